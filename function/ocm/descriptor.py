"""Parsing OCM component descriptors into the normalised :class:`Descriptor`.

The same component can reach us in several encodings, depending on which tool wrote it:
the OCM CLI v0.9.x stores plain JSON (``…component-descriptor.v2+json``, with ``null`` for
empty lists); older writers store YAML or a tar holding one ``component-descriptor.yaml``;
the spec documents both ``meta.schemaVersion`` and ``meta.configuredSchemaVersion``; and
newer tooling speaks ``ocm.software/v3alpha1``. All of them become one :class:`Descriptor`
so nothing downstream has to know which writer it was.

Errors name the field at fault (``component.resources[2].access: missing type``) because a
component author has to find it in a file they did not hand-write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from function.errors import ComponentError, SackError
from function.ocm.archive import tar_entries
from function.ocm.model import Descriptor, Digest, Resource
from function.yamlio import check_expansion, load_one, number_problem

MEDIA_TYPE_JSON = "application/vnd.ocm.software.component-descriptor.v2+json"
MEDIA_TYPE_YAML = "application/vnd.ocm.software.component-descriptor.v2+yaml"
MEDIA_TYPE_YAML_TAR = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar"

#: A descriptor is metadata only; a few MiB is already absurd.
MAX_DESCRIPTOR_BYTES = 4 * 1024 * 1024
#: A descriptor tar holds one file; a handful of entries (directories) is tolerated.
MAX_TAR_ENTRIES = 16
TAR_MEMBER = "component-descriptor.yaml"

V3_API_VERSIONS = ("ocm.software/v3alpha1", "ocm.gardener.cloud/v3alpha1")

# OCM's component name rule (ocm-spec, v3alpha1 schema). It also keeps names safe to use
# as path segments (no "..", no leading "/", no upper case surprises in registry paths).
COMPONENT_NAME_RE = re.compile(
    r"^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$"
)
# Versions become OCI tags (``+`` encoded as ``.build-``) and file names: keep them tame.
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
RELATIONS = ("local", "external")


def parse_descriptor(data: bytes, media_type: str | None, where: str) -> Descriptor:
    """Parse descriptor bytes as stored by any OCM writer.

    ``media_type`` is the layer media type when known (``+json``, ``+yaml``, ``+yaml+tar``);
    ``None`` sniffs: a tar header makes it a tar, anything else is parsed as YAML (JSON
    is YAML). ``where`` prefixes every error (``component acme.org/x:1.0``).
    """
    if len(data) > MAX_DESCRIPTOR_BYTES:
        raise ComponentError(
            where,
            f"component descriptor is {len(data)} bytes, more than the {MAX_DESCRIPTOR_BYTES} "
            "byte limit",
        )
    mt = (media_type or "").strip().lower()
    if mt.endswith("+tar") or (not mt and _looks_like_tar(data)):
        data = _descriptor_from_tar(data, where)
        mt = MEDIA_TYPE_YAML
    doc = _decode(data, mt, where)
    return descriptor_from_mapping(doc, where)


def descriptor_from_mapping(doc: Any, where: str) -> Descriptor:
    """Normalise an already-decoded descriptor document (v2 or v3alpha1)."""
    if not isinstance(doc, Mapping):
        raise ComponentError(where, f"component descriptor must be a mapping, got {_kind(doc)}")
    if "apiVersion" in doc:
        return _parse_v3(doc, where)
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        raise ComponentError(
            where,
            "meta: missing (need meta.schemaVersion: v2, or apiVersion: ocm.software/v3alpha1)",
        )
    schema = meta.get("schemaVersion", meta.get("configuredSchemaVersion"))
    if schema != "v2":
        raise ComponentError(
            where, f"meta.schemaVersion: unsupported schema version {schema!r} (supported: v2)"
        )
    return _parse_v2(doc, where)


# --------------------------------------------------------------------------- decoding


def _looks_like_tar(data: bytes) -> bool:
    return len(data) >= 262 and data[257:262] == b"ustar"


def _decode(data: bytes, mt: str, where: str) -> Any:
    if mt.endswith("+json") or mt == "application/json":

        def number(kind: str) -> Any:
            def parse(text: str) -> Any:
                problem = number_problem(text, kind)
                if problem:
                    what = "" if "descriptor" in where else "component descriptor: "
                    raise ComponentError(where, what + problem)
                return int(text) if kind == "int" else float(text)

            return parse

        try:
            doc = json.loads(data, parse_int=number("int"), parse_float=number("float"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ComponentError(
                where, f"component descriptor is not valid JSON ({type(e).__name__})"
            ) from None
        except RecursionError:
            raise ComponentError(where, "component descriptor nests too deeply") from None
        try:
            check_expansion(doc, where)
        except SackError as e:
            raise ComponentError(where, f"component descriptor {e.message}") from None
        return doc
    try:
        return load_one(data, "component descriptor", max_bytes=MAX_DESCRIPTOR_BYTES)
    except SackError as e:
        raise ComponentError(where, str(e)) from None


def _descriptor_from_tar(data: bytes, where: str) -> bytes:
    """The one ``component-descriptor.yaml`` of a descriptor tar, read in memory only."""
    found: list[bytes] = []
    what = "component descriptor tar"
    for member, read in tar_entries(data, where, what=what, max_entries=MAX_TAR_ENTRIES):
        name = member.name
        while name.startswith("./"):
            name = name[2:]
        if name != TAR_MEMBER:
            continue
        if not member.isfile():
            raise ComponentError(where, f"{what}: {TAR_MEMBER} is not a regular file")
        if member.size > MAX_DESCRIPTOR_BYTES:
            raise ComponentError(
                where, f"{what}: {TAR_MEMBER} is larger than {MAX_DESCRIPTOR_BYTES} bytes"
            )
        found.append(read())
    if len(found) != 1:
        raise ComponentError(
            where, f"{what} must hold exactly one {TAR_MEMBER}, found {len(found)}"
        )
    return found[0]


# --------------------------------------------------------------------------- schemas


def _parse_v2(doc: Mapping[str, Any], where: str) -> Descriptor:
    comp = _mapping(doc.get("component"), "component", where, required=True)
    name = _component_name(comp.get("name"), "component.name", where)
    version = _version(comp.get("version"), "component.version", where)
    provider = _provider(comp.get("provider"), "component.provider", where)
    resources = _resources(comp.get("resources"), "component.resources", where)
    return Descriptor(
        name=name, version=version, provider=provider, resources=resources, raw=_freeze_top(doc)
    )


def _parse_v3(doc: Mapping[str, Any], where: str) -> Descriptor:
    api = doc.get("apiVersion")
    if api not in V3_API_VERSIONS:
        raise ComponentError(
            where,
            f"apiVersion: unsupported {api!r} (supported: {', '.join(V3_API_VERSIONS)}, or "
            "meta.schemaVersion v2)",
        )
    kind = doc.get("kind")
    if kind is not None and kind != "ComponentVersion":
        raise ComponentError(where, f"kind: must be ComponentVersion, got {kind!r}")
    md = _mapping(doc.get("metadata"), "metadata", where, required=True)
    name = _component_name(md.get("name"), "metadata.name", where)
    version = _version(md.get("version"), "metadata.version", where)
    provider = _provider(md.get("provider"), "metadata.provider", where)
    spec = _mapping(doc.get("spec"), "spec", where, required=False)
    resources = _resources(spec.get("resources"), "spec.resources", where)
    return Descriptor(
        name=name, version=version, provider=provider, resources=resources, raw=_freeze_top(doc)
    )


# --------------------------------------------------------------------------- fields


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _mapping(value: Any, path: str, where: str, *, required: bool) -> Mapping[str, Any]:
    if value is None:
        if required:
            raise ComponentError(where, f"{path}: missing")
        return {}
    if not isinstance(value, Mapping):
        raise ComponentError(where, f"{path}: must be a mapping, got {_kind(value)}")
    return value


def _list(value: Any, path: str, where: str) -> list[Any]:
    """A list field; ``null`` (what the OCM CLI writes for empty lists) is an empty list."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ComponentError(where, f"{path}: must be a list, got {_kind(value)}")
    return value


def _string(value: Any, path: str, where: str, *, required: bool = True) -> str:
    if value is None or value == "":
        if required:
            raise ComponentError(where, f"{path}: missing")
        return ""
    if not isinstance(value, str):
        hint = (
            " (quote it in YAML)"
            if isinstance(value, int | float) and not isinstance(value, bool)
            else ""
        )
        raise ComponentError(where, f"{path}: must be a string, got {_kind(value)}{hint}")
    return value


def _component_name(value: Any, path: str, where: str) -> str:
    name = _string(value, path, where)
    if len(name) > 255 or not COMPONENT_NAME_RE.match(name):
        raise ComponentError(
            where,
            f"{path}: {name[:80]!r} is not a valid OCM component name (like acme.org/group/name)",
        )
    return name


def _version(value: Any, path: str, where: str) -> str:
    version = _string(value, path, where)
    if not VERSION_RE.match(version):
        raise ComponentError(where, f"{path}: {version[:80]!r} is not a valid version")
    return version


def _provider(value: Any, path: str, where: str) -> str:
    if isinstance(value, Mapping):
        return _string(value.get("name"), f"{path}.name", where)
    return _string(value, path, where)


def _resources(value: Any, path: str, where: str) -> tuple[Resource, ...]:
    return tuple(
        _resource(item, f"{path}[{i}]", where) for i, item in enumerate(_list(value, path, where))
    )


def _resource(item: Any, path: str, where: str) -> Resource:
    res = _mapping(item, path, where, required=True)
    name = _string(res.get("name"), f"{path}.name", where)
    version = _string(res.get("version"), f"{path}.version", where, required=False)
    rtype = _string(res.get("type"), f"{path}.type", where)
    relation = _string(res.get("relation"), f"{path}.relation", where, required=False) or "local"
    if relation not in RELATIONS:
        raise ComponentError(
            where, f"{path}.relation: must be local or external, got {relation[:40]!r}"
        )
    access = res.get("access")
    if access is None:
        raise ComponentError(where, f"{path}.access: missing")
    if not isinstance(access, Mapping):
        raise ComponentError(where, f"{path}.access: must be a mapping, got {_kind(access)}")
    atype = access.get("type")
    if atype is None or atype == "":
        raise ComponentError(where, f"{path}.access: missing type")
    if not isinstance(atype, str):
        raise ComponentError(where, f"{path}.access.type: must be a string, got {_kind(atype)}")
    extra_raw = _mapping(res.get("extraIdentity"), f"{path}.extraIdentity", where, required=False)
    extra: dict[str, str] = {}
    for k, v in extra_raw.items():
        if not isinstance(k, str):
            raise ComponentError(where, f"{path}.extraIdentity: keys must be strings")
        extra[k] = _string(v, f"{path}.extraIdentity.{k}", where)
    digest = _digest(res.get("digest"), f"{path}.digest", where)
    labels_raw = _list(res.get("labels"), f"{path}.labels", where)
    labels = tuple(
        MappingProxyType(dict(_mapping(lab, f"{path}.labels[{j}]", where, required=True)))
        for j, lab in enumerate(labels_raw)
    )
    return Resource(
        name=name,
        version=version,
        type=rtype,
        relation=relation,
        access=MappingProxyType(dict(access)),
        extra_identity=MappingProxyType(extra),
        digest=digest,
        labels=labels,
    )


def _digest(value: Any, path: str, where: str) -> Digest | None:
    if value is None:
        return None
    d = _mapping(value, path, where, required=True)
    return Digest(
        hash_algorithm=_string(d.get("hashAlgorithm"), f"{path}.hashAlgorithm", where),
        normalisation_algorithm=_string(
            d.get("normalisationAlgorithm"), f"{path}.normalisationAlgorithm", where, required=False
        ),
        value=_string(d.get("value"), f"{path}.value", where),
    )


def _freeze_top(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(doc))
