"""Validate objects against Kubernetes structural schemas, as the API server would, offline.

The default suite has no `crossplane beta validate` (the Crossplane CLI is not available on
these machines), so every shipped and rendered object is checked here against the upstream
CRDs' ``openAPIV3Schema``, our generated XRDs and the function-input CRD. The e2e suite then
sends the same renders to a real kube-apiserver (dry-run and for real), which stays the
authority.

Library choices, and why:

- ``openapi-schema-validator`` (OAS 3.0 dialect on ``jsonschema``) does the JSON-Schema part:
  CRD schemas are OpenAPI v3.0 schemas (``nullable``, OAS formats), which plain Draft 4/7
  validators get wrong (``nullable: true`` is ignored, ``null`` then fails ``type``).
- ``cel-python`` evaluates ``x-kubernetes-validations`` rules (Flux, OCM and Usage CRDs carry
  CEL rules such as "either chart or chartRef must be set"), with Kubernetes' escaping of CEL
  reserved words in field names (``__namespace__``).
- ``kubernetes-validate`` checks the built-in kinds (Namespace, ServiceAccount, Role, ...), for
  which no CRD exists, and the ``metadata`` of custom objects (as an ObjectMeta).

What is Kubernetes-specific and therefore written here, because no Python library implements
it: unknown fields (the API server prunes them, crank's validate reports them; a misspelled
field must fail), ``x-kubernetes-preserve-unknown-fields``, ``x-kubernetes-int-or-string``,
``x-kubernetes-embedded-resource``, ``x-kubernetes-list-type`` (set/map uniqueness), the
fields Crossplane adds to every XR schema, and object names (DNS-1123).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

# CEL reserved words: Kubernetes escapes field names equal to them as __name__ in rules.
_CEL_RESERVED = {
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
}
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# What Crossplane adds to every XR schema it serves (crossplane-runtime pkg/xcrd/schemas.go;
# ../shared/reference/crossplane.md). Typed loosely: our own schema is what is under test.
_LOOSE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_XR_SPEC_V2 = {"crossplane": _LOOSE}
_XR_SPEC_LEGACY = dict.fromkeys(
    (
        "compositionRef",
        "compositionSelector",
        "compositionRevisionRef",
        "claimRef",
        "writeConnectionSecretToRef",
        "publishConnectionDetailsTo",
        "environmentConfigRefs",
    ),
    _LOOSE,
) | {
    "compositionUpdatePolicy": {"type": "string"},
    "compositionRevisionSelector": _LOOSE,
    "compositeDeletePolicy": {"type": "string"},
    "resourceRefs": {"type": "array", "items": _LOOSE},
}
_XR_STATUS = {
    "conditions": {"type": "array", "items": _LOOSE},
    "connectionDetails": _LOOSE,
    "claimConditionTypes": {"type": "array", "items": {"type": "string"}},
    "crossplane": _LOOSE,
}


@dataclass(frozen=True)
class Schema:
    """One served version of one kind."""

    api_version: str
    kind: str
    namespaced: bool
    schema: Mapping[str, Any]
    source: str


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _xr_schema(xrd: Mapping[str, Any], version: Mapping[str, Any], legacy: bool) -> dict[str, Any]:
    schema = copy.deepcopy(
        (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
    )
    props = schema.setdefault("properties", {})
    spec = props.setdefault("spec", {"type": "object"})
    spec.setdefault("properties", {}).update(_XR_SPEC_LEGACY if legacy else _XR_SPEC_V2)
    status = props.setdefault("status", {"type": "object"})
    status.setdefault("properties", {}).update(_XR_STATUS)
    props.setdefault("metadata", {"type": "object"})
    return schema


def schemas_from(paths: Iterable[Path]) -> dict[tuple[str, str], Schema]:
    """Every served (apiVersion, kind) the given CRD and XRD files define (XRD: the claim too)."""
    out: dict[tuple[str, str], Schema] = {}
    for path in paths:
        for d in _load(path):
            spec = d.get("spec") or {}
            group = spec.get("group")
            if d.get("kind") == "CustomResourceDefinition":
                for v in spec.get("versions") or []:
                    if not v.get("served", True):
                        continue
                    av = f"{group}/{v['name']}"
                    s = (v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
                    kind = spec["names"]["kind"]
                    out[(av, kind)] = Schema(
                        av, kind, spec.get("scope") == "Namespaced", s, str(path)
                    )
            elif d.get("kind") == "CompositeResourceDefinition":
                scope = spec.get("scope", "LegacyCluster")
                legacy = scope == "LegacyCluster" or d["apiVersion"].endswith("/v1")
                for v in spec.get("versions") or []:
                    if not v.get("served", True):
                        continue
                    av = f"{group}/{v['name']}"
                    kind = spec["names"]["kind"]
                    s = _xr_schema(spec, v, legacy and scope != "Cluster")
                    out[(av, kind)] = Schema(av, kind, scope == "Namespaced", s, str(path))
                    if spec.get("claimNames"):
                        ckind = spec["claimNames"]["kind"]
                        cs = _xr_schema(spec, v, legacy=True)
                        out[(av, ckind)] = Schema(av, ckind, True, cs, str(path))
    return out


@cache
def _oas30():
    from openapi_schema_validator import OAS30Validator, oas30_format_checker

    return OAS30Validator, oas30_format_checker


def _fmt(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def _jsonschema_problems(validator: Any, obj: Any) -> Iterator[str]:
    for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        yield f"{_fmt(e.absolute_path)}: {e.message}"


def _strip_extensions(schema: Any) -> Any:
    """The schema without Kubernetes' keywords that OAS 3.0 does not know.

    ``x-kubernetes-int-or-string`` becomes ``anyOf: [integer, string]`` where the CRD did not
    spell it out (controller-gen always does; hand-written CRDs may not).
    """
    if isinstance(schema, list):
        return [_strip_extensions(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: _strip_extensions(v)
        for k, v in schema.items()
        if not k.startswith("x-kubernetes-") and k not in ("default",)
    }
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out and "type" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


def _to_cel(value: Any) -> Any:
    """A JSON value as CEL sees it in a CRD rule: reserved-word keys escaped."""
    if isinstance(value, dict):
        return {(f"__{k}__" if k in _CEL_RESERVED else k): _to_cel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cel(v) for v in value]
    return value


def _lower_ascii(s: Any) -> Any:
    import celpy

    return celpy.celtypes.StringType("".join(c.lower() if c.isascii() else c for c in s))


def _upper_ascii(s: Any) -> Any:
    import celpy

    return celpy.celtypes.StringType("".join(c.upper() if c.isascii() else c for c in s))


# Kubernetes' CEL libraries beyond the CEL standard that the CRDs' rules call (only these:
# a rule calling anything else is reported as not evaluable, never passed).
_K8S_CEL_FUNCTIONS = {"lowerAscii": _lower_ascii, "upperAscii": _upper_ascii}


@cache
def _cel_program(rule: str):
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(rule), functions=_K8S_CEL_FUNCTIONS)


def _cel_problems(rules: list[Mapping[str, Any]], value: Any, where: list[Any]) -> Iterator[str]:
    import celpy

    for r in rules:
        if "oldSelf" in r["rule"]:
            continue  # a transition rule: the API server evaluates it on update only
        try:
            ok = _cel_program(r["rule"]).evaluate({"self": celpy.json_to_cel(_to_cel(value))})
        except Exception as e:  # a rule this CEL runtime cannot evaluate: say so, never pass
            first = str(e).split(" (in activation")[0]
            yield f"{_fmt(where)}: CEL rule {r['rule']!r} could not be evaluated: {first}"
            continue
        if ok is not True and not (isinstance(ok, celpy.celtypes.BoolType) and bool(ok)):
            yield f"{_fmt(where)}: {r.get('message') or 'failed rule: ' + r['rule']}"


def _structural_problems(schema: Mapping[str, Any], value: Any, where: list[Any]) -> Iterator[str]:
    """Unknown fields, embedded resources, list types and CEL rules, recursively."""
    if not isinstance(schema, Mapping):
        return
    if schema.get("x-kubernetes-validations") and value is not None:
        yield from _cel_problems(schema["x-kubernetes-validations"], value, where)
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        if embedded:
            for k in ("apiVersion", "kind"):
                if not value.get(k):
                    yield f"{_fmt(where)}: embedded resource without {k}"
        for k, v in value.items():
            if k == "metadata" and (not where or embedded):
                continue  # ObjectMeta: checked by _metadata_problems, not by the CRD's stub
            if props is not None and k in props:
                yield from _structural_problems(props[k], v, [*where, k])
            elif isinstance(addl, Mapping):
                yield from _structural_problems(addl, v, [*where, k])
            elif addl is True or preserve:
                continue
            elif embedded and k in ("apiVersion", "kind", "metadata"):
                continue
            elif not where and k in ("apiVersion", "kind", "metadata"):
                continue
            else:
                yield f"{_fmt([*where, k])}: unknown field (not in the schema; the API server would prune it)"
    elif isinstance(value, list):
        items = schema.get("items")
        for i, v in enumerate(value):
            yield from _structural_problems(items or {}, v, [*where, i])
        ltype = schema.get("x-kubernetes-list-type")
        if ltype == "set":
            seen: list[Any] = []
            for i, v in enumerate(value):
                if v in seen:
                    yield f"{_fmt([*where, i])}: duplicate entry in a list of type set"
                seen.append(v)
        elif ltype == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen_keys: set[tuple[Any, ...]] = set()
            for i, v in enumerate(value):
                if isinstance(v, dict):
                    key = tuple(v.get(k) for k in keys)
                    if key in seen_keys:
                        yield f"{_fmt([*where, i])}: duplicate map key {dict(zip(keys, key, strict=False))}"
                    seen_keys.add(key)


def _name_problems(meta: Mapping[str, Any], namespaced: bool) -> Iterator[str]:
    name = meta.get("name")
    if name is not None and (len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name)):
        yield f"metadata.name: {name!r} is not a DNS-1123 subdomain"
    ns = meta.get("namespace")
    if ns is not None and (len(ns) > 63 or not _DNS1123_LABEL.match(ns)):
        yield f"metadata.namespace: {ns!r} is not a DNS-1123 label"
    if namespaced is False and ns:
        yield f"metadata.namespace: set on a cluster-scoped kind ({ns!r})"


@cache
def _builtin_validator(api_version: str, kind: str, version: str) -> Any:
    """kubernetes-validate's strict schema for a built-in kind, compiled once.

    (``kubernetes_validate.validate`` re-reads and re-parses its multi-megabyte definitions
    file on every call; the schemas and the validation are the library's, only the loading is
    done once here.) None when the library has no schema for the kind.
    """
    import re as _re

    import jsonschema
    import kubernetes_validate.utils as kvu
    from referencing import Registry, Resource

    shipped = [v for v in kvu.all_versions() if kvu.major_minor(v) <= version]
    schema_dir = f"v{shipped[-1]}-local-strict"
    api = _re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kvu.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{api}.json", version
        )
    except FileNotFoundError:
        return None
    defs = kvu.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", version)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def _builtin_problems(doc: Mapping[str, Any], version: str) -> list[str]:
    v = _builtin_validator(str(doc.get("apiVersion")), str(doc.get("kind")), version)
    if v is None:
        return [
            f"no schema for {doc.get('apiVersion')}, Kind={doc.get('kind')} (kubernetes-validate {version})"
        ]
    return [
        f"{_fmt(e.absolute_path)}: {e.message} (kubernetes-validate {version})"
        for e in sorted(v.iter_errors(dict(doc)), key=lambda e: list(map(str, e.absolute_path)))
    ]


def _metadata_problems(meta: Any, version: str) -> Iterator[str]:
    """ObjectMeta as the API server reads it: checked as a ConfigMap's metadata would be."""
    if meta is None:
        return
    probe = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    for p in _builtin_problems(probe, version):
        yield p if p.startswith("metadata") else f"metadata: {p}"


def is_builtin(doc: Mapping[str, Any]) -> bool:
    """A Kubernetes built-in group: core (no group), apps, batch, ... or *.k8s.io."""
    group = str(doc.get("apiVersion", "")).rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


@cache
def k8s_version() -> str:
    """The Kubernetes schemas kubernetes-validate checks built-ins against: the newest shipped."""
    import kubernetes_validate.utils as kvu

    return max(
        (kvu.major_minor(v) for v in kvu.all_versions()),
        key=lambda v: tuple(map(int, v.split("."))),
    )


class Validator:
    """Validates documents against a set of CRDs/XRDs plus the Kubernetes built-in schemas."""

    def __init__(
        self, extension_files: Iterable[Path], allowed_missing: Iterable[tuple[str, str]] = ()
    ):
        self.schemas = schemas_from(extension_files)
        self.allowed_missing = set(allowed_missing)
        self._oas: dict[tuple[str, str], Any] = {}

    def _oas_validator(self, found: Schema) -> Any:
        key = (found.api_version, found.kind)
        if key not in self._oas:
            validator_cls, fmt = _oas30()
            self._oas[key] = validator_cls(_strip_extensions(found.schema), format_checker=fmt)
        return self._oas[key]

    def problems(self, doc: Mapping[str, Any]) -> list[str]:
        """Every problem with one document, each prefixed with its kind and name."""
        gvk = (str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
        meta = doc.get("metadata") or {}
        what = f"{gvk[1] or '?'} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}{meta.get('name', '?')}"
        out: list[str] = []
        if not gvk[0] or not gvk[1]:
            return [f"{what}: no apiVersion/kind"]
        found = self.schemas.get(gvk)
        if found is not None:
            out += list(_jsonschema_problems(self._oas_validator(found), dict(doc)))
            out += list(_structural_problems(found.schema, dict(doc), []))
            out += list(_metadata_problems(meta, k8s_version()))
            out += list(_name_problems(meta, found.namespaced))
        elif gvk in self.allowed_missing:
            pass
        elif is_builtin(doc):
            out += _builtin_problems(doc, k8s_version())
        else:
            out.append(f"no CRD/XRD for {gvk[0]}, Kind={gvk[1]}")
        return [f"{what}: {p}" for p in out]

    def validate_all(self, docs: Iterable[Mapping[str, Any]]) -> list[str]:
        out: list[str] = []
        for d in docs:
            out += self.problems(d)
            if d.get("kind") == "Composition" and str(d.get("apiVersion", "")).startswith(
                "apiextensions.crossplane.io/"
            ):
                for i, step in enumerate((d.get("spec") or {}).get("pipeline") or []):
                    if step.get("input"):
                        out += [f"pipeline[{i}].input: {p}" for p in self.problems(step["input"])]
        return out
