"""What ``sack8s inspect`` shows about a component version, from data already loaded.

A team deciding what to write in a claim needs, in one place: which versions exist and which
one its range picks; every resource with its access, digest and whether the cluster will pull
it pinned; and the ConfigData's rules grouped by the file they address, next to the
deployables that actually contain that file. The last part answers the most common first-hour
question ("why does my value land nowhere?"): a rule on ``deployment.yaml`` does nothing for a
Helm chart that has no such file.

Pure: takes the resolution, the component version, the ConfigData bytes and the deployables'
file lists, returns a JSON-able report and its text form. The CLI (``function/cli/inspect.py``)
does the reading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from function.configdata.flatvalues import flat_keys
from function.configdata.model import parse_configdata
from function.errors import SackError
from function.ocm import normalisation, signatures
from function.ocm.access import (
    LOCAL_BLOB,
    OCI_ARTIFACT,
    normalize_access_type,
)
from function.ocm.images import localized_reference, parse_image_reference
from function.ocm.inventory import Resolution
from function.ocm.model import TYPE_CONFIGDATA, ComponentVersion, Resource
from function.ocm.source import resource_key

MAX_FILES_SHOWN = 12


def access_text(resource: Resource) -> str:
    """The access as one line: type plus what locates the content."""
    a = resource.access
    raw = str(a.get("type", ""))
    kind = normalize_access_type(raw)
    if kind == OCI_ARTIFACT:
        return f"{raw} {a.get('imageReference', '')}".strip()
    if kind == LOCAL_BLOB:
        mt = a.get("mediaType")
        text = f"{raw} {a.get('localReference', '')}" + (f" ({mt})" if mt else "")
        ga = a.get("globalAccess")
        if isinstance(ga, Mapping) and ga.get("type"):
            ref = ga.get("imageReference") or ga.get("ref") or ""
            text += f", globalAccess {ga.get('type')} {ref}".rstrip()
        return text
    rest = ", ".join(
        f"{k}={v}" for k, v in sorted(a.items()) if k != "type" and isinstance(v, str | int)
    )
    return f"{raw} {rest}".strip()


def pinning(cv: ComponentVersion, resource: Resource) -> dict[str, Any]:
    """Whether what the cluster pulls for ``resource`` is fixed by a digest, and by which one."""
    kind = normalize_access_type(str(resource.access.get("type", "")))
    out: dict[str, Any]
    if kind == OCI_ARTIFACT:
        try:
            ref = localized_reference(cv, resource)
        except SackError as e:
            out = {"pinned": False, "by": f"refused: {e.message}"}
            try:
                out["reference"] = localized_reference(cv, resource, allow_unpinned=True)
            except SackError:
                pass
            return out
        raw = parse_image_reference(resource.access.get("imageReference"), "access")
        out = {
            "pinned": True,
            "by": "by the reference's digest" if raw.digest else "by the resource digest",
            "reference": ref,
        }
        if raw.scheme:
            out["note"] = (
                f"the {raw.scheme}:// of the access is dropped from the reference: it only says "
                "how to talk to "
                "the registry"
            )
        return out
    if kind == LOCAL_BLOB:
        ref = resource.access.get("localReference")
        if isinstance(ref, str) and ref.startswith("sha256:"):
            out = {"pinned": True, "by": "by its content digest (localBlob)"}
        else:
            out = {
                "pinned": False,
                "by": "a named blob: only its resource digest verifies it"
                if resource.digest is not None
                else "a named blob: no digest to verify it against",
            }
        if cv.repository is not None and resource.type in ("ociImage", "ociArtifact"):
            try:
                out["reference"] = localized_reference(cv, resource)
            except SackError:
                pass
        return out
    return {
        "pinned": False,
        "by": f"access type {resource.access.get('type')!r} is not one the function reads",
    }


def unread_digest_check(resource: Resource) -> str:
    """Why the digest of a resource whose content the function never reads is not checked
    against bytes (an image: the digest pins the reference the cluster pulls).
    """
    kind = normalize_access_type(str(resource.access.get("type", "")))
    if resource.digest is None:
        return "not checked: not read by the function, and no digest declared"
    if kind == OCI_ARTIFACT:
        return "not read by the function: the cluster pulls it by reference, pinned by digest"
    return f"not read by the function (access {resource.access.get('type')!r})"


def _digest(resource: Resource) -> dict[str, str] | None:
    d = resource.digest
    if d is None:
        return None
    return {
        "hashAlgorithm": d.hash_algorithm,
        "normalisationAlgorithm": d.normalisation_algorithm,
        "value": d.value,
    }


def _value_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


#: JSON Schema keywords that limit a value, in the order ``inspect`` shows them.
LIMITS = (
    "enum",
    "const",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
MAX_VALUE_DEPTH = 4
MAX_VALUES_SHOWN = 200


def schema_values(schema: Any, defaults: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every value a claim can set: its dotted name, type, default (the ConfigData's
    ``defaults``, what applies when the claim gives none), whether it is required, and the
    schema's limits on it (``enum``, ``minimum``/``maximum``, ``pattern``, lengths, ...).
    Nested objects' properties are listed under their parent (``image.tag``), up to
    :data:`MAX_VALUE_DEPTH` levels; a ``$ref`` is named, not followed.
    """
    out: list[dict[str, Any]] = []

    def walk(node: Any, prefix: str, given: Any, required: Any, depth: int) -> None:
        props = node.get("properties") if isinstance(node, Mapping) else None
        props = props if isinstance(props, Mapping) else {}
        given = given if isinstance(given, Mapping) else {}
        needed = set(required) if isinstance(required, list) else set()
        for key in sorted({str(k) for k in props} | {str(k) for k in given}):
            if len(out) >= MAX_VALUES_SHOWN:
                return
            path = f"{prefix}{key}"
            entry: dict[str, Any] = {"name": path}
            spec = props.get(key)
            if isinstance(spec, Mapping):
                if "type" in spec:
                    entry["type"] = spec["type"]
                elif "$ref" in spec:
                    entry["type"] = f"$ref {str(spec['$ref'])[:80]}"
                limits = {k: spec[k] for k in LIMITS if k in spec}
                if limits:
                    entry["limits"] = limits
                if isinstance(spec.get("description"), str):
                    entry["description"] = _value_text(" ".join(spec["description"].split()))
            if key in given:
                entry["default"] = _value_text(given[key])
            if key in needed:
                entry["required"] = True
            out.append(entry)
            if isinstance(spec, Mapping) and depth < MAX_VALUE_DEPTH and "properties" in spec:
                walk(spec, f"{path}.", given.get(key), spec.get("required"), depth + 1)

    walk(
        schema if isinstance(schema, Mapping) else {},
        "",
        defaults,
        schema.get("required") if isinstance(schema, Mapping) else None,
        1,
    )
    return out


def limits_text(limits: Mapping[str, Any]) -> list[str]:
    """``minimum 1``, ``one of a, b``, ``pattern ^[a-z]+$``: each limit as a reader says it."""
    bits = []
    for k, v in limits.items():
        if k == "enum" and isinstance(v, list):
            bits.append(
                "one of "
                + ", ".join(_value_text(x) for x in v[:10])
                + (" ..." if len(v) > 10 else "")
            )
        else:
            bits.append(f"{k} {_value_text(v)}")
    return bits


def configdata_report(data: bytes, name: str, files_of: Mapping[str, list[str]]) -> dict[str, Any]:
    """One ConfigData's rules grouped by file, each file with the deployables that contain it."""
    cd = parse_configdata(data, f"ConfigData (resource {name})")
    by_file: dict[str, list[dict[str, Any]]] = {}
    for i, rule in enumerate(cd.localization):
        res = rule.resource.name if rule.resource else None
        for field, path in rule.targets():
            by_file.setdefault(rule.file, []).append(
                {
                    "rule": f"localization[{i}].{field}",
                    "path": path,
                    "from": f"resource {res} ({field})",
                }
            )
        if rule.mapping is not None:
            by_file.setdefault(rule.file, []).append(
                {
                    "rule": f"localization[{i}]",
                    "path": rule.mapping.path,
                    "from": "CUE mapping (unsupported)",
                }
            )
    conf = cd.configuration
    for i, rule in enumerate(conf.rules if conf else []):
        by_file.setdefault(rule.file, []).append(
            {
                "rule": f"configuration.rules[{i}]",
                "path": rule.path,
                "value": _value_text(rule.value),
            }
        )
    files = []
    for file in sorted(by_file):
        inside = sorted(r for r, fs in files_of.items() if file in fs)
        files.append({"file": file, "in": inside, "rules": by_file[file]})
    schema = conf.schema_ if conf else None
    defaults = dict(conf.defaults) if conf else {}
    values = schema_values(schema, defaults)
    out: dict[str, Any] = {"resource": name, "files": files, "values": values}
    flat = sorted(flat_keys(schema))
    if flat:
        out["flatConfigMapKeys"] = flat
    if isinstance(schema, Mapping) and schema.get("additionalProperties") is False:
        out["onlySchemaValues"] = True
    return out


def integrity_report(cv: ComponentVersion, keys: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The descriptor's normalised digest and its signatures; each signature named in
    ``keys`` (name, PEM) verified as the function verifies it, the others listed unchecked.
    """
    raw = cv.descriptor.raw
    out: dict[str, Any] = {}
    try:
        out["normalisedDigest"] = normalisation.digest(raw, normalisation.V4ALPHA1).to_status()
    except normalisation.NormalisationError as e:
        out["normalisedDigestError"] = str(e)
    key_of = dict(keys)
    sigs = []
    listed = raw.get("signatures") if isinstance(raw.get("signatures"), list) else []
    for s in listed:
        if not isinstance(s, Mapping):
            continue
        name = str(s.get("name"))
        dig = s.get("digest") if isinstance(s.get("digest"), Mapping) else {}
        info = s.get("signature") if isinstance(s.get("signature"), Mapping) else {}
        entry: dict[str, Any] = {
            "name": name,
            "algorithm": str(info.get("algorithm") or ""),
            "digest": {
                k: str(dig.get(k) or "")
                for k in ("hashAlgorithm", "normalisationAlgorithm", "value")
            },
        }
        if name in key_of:
            v = signatures.verify(raw, name, key_of[name])
            entry["verified"] = v.ok
            entry["result"] = v.detail
        sigs.append(entry)
    named = {e["name"] for e in sigs}
    for name, pem in keys:
        if name not in named:
            v = signatures.verify(raw, name, pem)
            sigs.append({"name": name, "verified": False, "result": v.detail})
    out["signatures"] = sigs
    return out


def report(
    source: str,
    resolution: Resolution,
    cv: ComponentVersion,
    *,
    configdata: Mapping[str, bytes | str],
    deployable_files: Mapping[str, list[str] | str],
    digest_checks: Mapping[str, str] | None = None,
    keys: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The whole inspection. ``configdata``/``deployable_files`` map a resource name to its
    content, or to the one-line reason it could not be read (shown, never fatal).
    ``digest_checks`` maps a :func:`~function.ocm.source.resource_key` to how its blob
    compared with the declared digest (the CLI reads every localBlob to say so); ``keys``
    are the public keys to verify signatures with (``--public-key NAME=FILE``).
    """
    resources = []
    for r in cv.descriptor.resources:
        entry: dict[str, Any] = {
            "name": r.name,
            "version": r.version,
            "type": r.type,
            "relation": r.relation,
            "access": access_text(r),
        }
        if r.extra_identity:
            entry["extraIdentity"] = dict(sorted(r.extra_identity.items()))
        entry["digest"] = _digest(r)
        if digest_checks is not None:
            entry["digestCheck"] = digest_checks.get(resource_key(r)) or unread_digest_check(r)
        entry.update(pinning(cv, r))
        files = deployable_files.get(r.name)
        if isinstance(files, list):
            entry["files"] = files
        elif isinstance(files, str):
            entry["filesError"] = files
        resources.append(entry)
    files_of = {k: v for k, v in deployable_files.items() if isinstance(v, list)}
    cds = []
    for name in sorted(configdata):
        data = configdata[name]
        if isinstance(data, str):
            cds.append({"resource": name, "error": data})
            continue
        try:
            cds.append(configdata_report(data, name, files_of))
        except SackError as e:
            cds.append({"resource": name, "error": str(e)})
    return {
        "source": source,
        "component": cv.name,
        "provider": cv.descriptor.provider,
        "versions": list(resolution.versions),
        "version": cv.version,
        "resolvedBy": resolution.how,
        "descriptorDigest": cv.descriptor_digest,
        **integrity_report(cv, keys),
        "resources": resources,
        "configData": cds,
    }


def format_text(rep: Mapping[str, Any]) -> str:
    """The report as aligned text for a terminal (stable: same input, same bytes)."""
    lines = [
        f"component   {rep['component']}"
        + (f" (provider {rep['provider']})" if rep.get("provider") else ""),
        f"source      {rep['source']}",
        f"versions    {', '.join(rep['versions'])}",
        f"version     {rep['version']} ({_how(rep['resolvedBy'])})",
        f"descriptor  {rep['descriptorDigest']}",
    ]
    nd = rep.get("normalisedDigest")
    lines.append(
        f"normalised  {nd['hashAlgorithm']} {nd['normalisationAlgorithm']} {nd['value']}"
        if nd
        else f"normalised  cannot be computed: {rep.get('normalisedDigestError')}"
    )
    sigs = rep.get("signatures") or []
    lines += ["", f"signatures ({len(sigs)})"] if sigs else []
    for sig in sigs:
        if "verified" not in sig:
            result = "not checked (no --public-key for it)"
        else:
            result = sig["result"] if sig["verified"] else "FAILED: " + sig["result"]
        d = sig.get("digest")
        head = f"  {sig['name']}" + (f"  {sig['algorithm']}" if sig.get("algorithm") else "")
        if d:
            head += f"  {d['hashAlgorithm']} {d['normalisationAlgorithm']} {d['value']}"
        lines += [head, f"    {result}"]
    lines += ["", f"resources ({len(rep['resources'])})"]
    for r in rep["resources"]:
        ident = "".join(f" {k}={v}" for k, v in (r.get("extraIdentity") or {}).items())
        lines.append(f"  {r['name']}{ident}  {r['version']}  {r['type']}  ({r['relation']})")
        lines.append(f"    access     {r['access']}")
        d = r.get("digest")
        lines.append(
            f"    digest     {d['hashAlgorithm']} {d['normalisationAlgorithm']} {d['value']}"
            if d
            else "    digest     none"
        )
        if r.get("digestCheck"):
            lines.append(f"    checked    {r['digestCheck']}")
        lines.append(f"    pinned     {'yes' if r['pinned'] else 'NO'}: {r['by']}")
        if r.get("reference"):
            lines.append(f"    pulls      {r['reference']}")
        if r.get("note"):
            lines.append(f"    note       {r['note']}")
        if "files" in r:
            shown = ", ".join(r["files"][:MAX_FILES_SHOWN])
            more = f", ... ({len(r['files'])} files)" if len(r["files"]) > MAX_FILES_SHOWN else ""
            lines.append(f"    files      {shown}{more}")
        if "filesError" in r:
            lines.append(f"    files      cannot be read: {r['filesError']}")
    for cd in rep["configData"]:
        lines += ["", f"ConfigData (resource {cd['resource']})"]
        if "error" in cd:
            lines.append(f"  cannot be read: {cd['error']}")
            continue
        if cd["values"]:
            only = " (no others: additionalProperties false)" if cd.get("onlySchemaValues") else ""
            lines.append(f"  values a claim can set{only}:")
            for v in cd["values"]:
                bits = (
                    [v["type"] if isinstance(v.get("type"), str) else json.dumps(v["type"])]
                    if "type" in v
                    else []
                )
                if v.get("required"):
                    bits.append("required")
                if "default" in v:
                    bits.append(f"default {v['default']}")
                bits += limits_text(v.get("limits") or {})
                lines.append(f"    {v['name']}" + (f"  ({', '.join(bits)})" if bits else ""))
                if v.get("description"):
                    lines.append(f"      {v['description']}")
        if cd.get("flatConfigMapKeys"):
            lines.append(
                "  a values ConfigMap may also hold them one key per value (flat): "
                + ", ".join(cd["flatConfigMapKeys"])
            )
        for f in cd["files"]:
            where = f"in {', '.join(f['in'])}" if f["in"] else "in none of the deployables read"
            lines.append(f"  {f['file']}  ({where})")
            width = max(len(x["rule"]) for x in f["rules"])
            pwidth = max(len(x["path"]) for x in f["rules"])
            for x in f["rules"]:
                what = f"<- {x['from']}" if "from" in x else f"= {x['value']}"
                lines.append(f"    {x['rule'].ljust(width)}  {x['path'].ljust(pwidth)}  {what}")
    return "\n".join(lines) + "\n"


def _how(how: str) -> str:
    if how.startswith("constraint "):
        return f"what {how} resolves to"
    return {"given": "as given"}.get(how, how)


def configdata_resources(cv: ComponentVersion) -> list[Resource]:
    return [r for r in cv.descriptor.resources if r.type == TYPE_CONFIGDATA]


__all__ = [
    "access_text",
    "configdata_report",
    "configdata_resources",
    "format_text",
    "pinning",
    "report",
    "unread_digest_check",
]
