"""The OCM normalised digest of a component descriptor: what a signature signs and what the
OCM controller reports in ``Component.status.component.digest``.

A descriptor changes in transport (access locations, repository contexts, unsigned labels),
so OCM signs a *normalised* form that keeps only what identifies the content. Two
normalisations are in use:

* ``jsonNormalisation/v4alpha1`` (= the legacy name ``jsonNormalisation/v3``, which OCM's
  signing library maps to it): the v2 serialisation of the descriptor, projected through the
  v2 Go structs (fields they do not know are dropped, ``omitempty`` fields are absent when
  empty, null values are skipped), with the specification's exclusions, serialised as RFC
  8785 canonical JSON. The current OCM controller reports ``SHA-256`` over it.
* ``jsonNormalisation/v1`` (older tooling): the same projection through the OCM v1 library's
  v2 structs, with its own exclusions (``meta`` kept, sources dropped, ``extraIdentity``
  forced to ``null`` when absent, the legacy version-into-extraIdentity defaulting), every
  mapping written as a key-sorted list of one-entry mappings.

Pure: data in, bytes out. Sources: ocm-spec ``doc/04-extensions/04-algorithms/
component-descriptor-normalization-algorithms.md`` and ``doc/02-processing/
05-component-descriptor-normalization.md``; open-component-model ``bindings/go/descriptor/
normalisation/json/v4alpha1/normalisation.go``, ``.../engine/jcs/``, ``bindings/go/signing/
digest.go``; ocm ``api/ocm/compdesc/versions/v2/signing.go``, ``api/tech/signing/norm/entry``,
``api/ocm/compdesc/normalizations/legacy/legacy.go`` (docs/security.md).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

V1 = "jsonNormalisation/v1"
V3 = "jsonNormalisation/v3"
V4ALPHA1 = "jsonNormalisation/v4alpha1"
#: What each name computes: v3 is v4alpha1 under its legacy name (byte-identical).
ALGORITHMS = {V1: V1, V3: V4ALPHA1, V4ALPHA1: V4ALPHA1}
#: Hash names as OCM writes them (Go's crypto.Hash.String()), matched case-insensitively.
HASHES = {"SHA-256": "sha256", "SHA-512": "sha512"}

_NONE_ACCESS = ("none", "None")


class NormalisationError(ValueError):
    """The descriptor cannot be normalised (or the algorithm is unknown): the message says why."""


@dataclass(frozen=True)
class NormalisedDigest:
    """``{hashAlgorithm, normalisationAlgorithm, value}``: ``status.component.digest``'s shape."""

    hash_algorithm: str
    normalisation_algorithm: str
    value: str

    def to_status(self) -> dict[str, str]:
        return {
            "hashAlgorithm": self.hash_algorithm,
            "normalisationAlgorithm": self.normalisation_algorithm,
            "value": self.value,
        }


def canonical_algorithm(name: str) -> str | None:
    """The normalisation ``name`` computes (v3 → v4alpha1), or None when unknown."""
    return ALGORITHMS.get(name)


def canonical_hash(name: str) -> str | None:
    """``SHA-256``/``SHA-512`` for any spelling (``sha256``, ``SHA256``), or None when unknown."""
    key = (name or "").upper().replace("_", "-")
    if key in HASHES:
        return key
    if key in ("SHA256", "SHA512"):
        return f"SHA-{key[3:]}"
    return None


def normalise(raw: Mapping[str, Any], algorithm: str) -> bytes:
    """The normalised bytes of the descriptor document ``raw`` (v2 or v3alpha1, as stored)."""
    algo = canonical_algorithm(algorithm)
    if algo is None:
        raise NormalisationError(
            f"unknown normalisation algorithm {algorithm[:60]!r} "
            f"(supported: {', '.join(ALGORITHMS)})"
        )
    doc = as_v2(raw)
    if algo == V4ALPHA1:
        return jcs(_v4alpha1(doc)).encode()
    return _entries_json(_v1(doc)).encode()


def digest(
    raw: Mapping[str, Any], algorithm: str, hash_algorithm: str = "SHA-256"
) -> NormalisedDigest:
    """The normalised digest, reported under the name asked for (``v3`` stays ``v3``)."""
    h = canonical_hash(hash_algorithm)
    if h is None:
        raise NormalisationError(
            f"unknown hash algorithm {hash_algorithm[:40]!r} (supported: SHA-256, SHA-512)"
        )
    value = hashlib.new(HASHES[h], normalise(raw, algorithm)).hexdigest()
    return NormalisedDigest(h, algorithm, value)


# --------------------------------------------------------------------------- v3alpha1 → v2


def as_v2(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """A v3alpha1 descriptor in its v2 shape (the baseline both normalisations read)."""
    if "apiVersion" not in raw:
        return raw
    md = _map(raw.get("metadata"))
    spec = _map(raw.get("spec"))
    comp: dict[str, Any] = {
        "name": md.get("name"),
        "version": md.get("version"),
        "provider": md.get("provider"),
        "labels": md.get("labels"),
        "creationTime": md.get("creationTime"),
        "repositoryContexts": raw.get("repositoryContexts"),
        "resources": spec.get("resources"),
        "sources": spec.get("sources"),
        "componentReferences": spec.get("references"),
    }
    return {"meta": {"schemaVersion": "v2"}, "component": comp}


# --------------------------------------------------------------------------- projections


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else []


def _str(v: Any) -> str:
    """A Go ``string`` field: absent/null is ""; anything else must be a string."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, _dt.datetime | _dt.date):
        return _timestamp(v)
    raise NormalisationError(f"expected a string, got {type(v).__name__} {str(v)[:40]!r}")


def _timestamp(v: Any) -> str:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(_dt.UTC).replace(tzinfo=None)
        frac = f".{v.microsecond:06d}".rstrip("0") if v.microsecond else ""
        return v.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"
    return v.isoformat()


def _rounded_time(v: Any) -> str:
    """The OCM v1 library's ``metav1.Timestamp``: RFC 3339, UTC, rounded to the second."""
    if isinstance(v, _dt.datetime):
        t = v
    else:
        text = _str(v)
        try:
            t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise NormalisationError(f"creationTime {text[:40]!r} is not RFC 3339") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    t = t.astimezone(_dt.UTC)
    if t.microsecond >= 500000:
        t += _dt.timedelta(seconds=1)
    return t.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _identity(v: Any) -> dict[str, str]:
    return {str(k): _str(x) for k, x in _map(v).items()}


def _signing(label: Mapping[str, Any]) -> bool:
    return label.get("signing") in (True, "true")


def _labels(v: Any, *, keep_null_value: bool) -> list[dict[str, Any]] | None:
    """Signing-relevant labels (``signing: true``), with name, version, value, signing only;
    None when none is left (the field is then omitted).
    """
    out = []
    for item_raw in _list(v):
        lab = _map(item_raw)
        if not _signing(lab):
            continue
        item: dict[str, Any] = {"name": _str(lab.get("name"))}
        if lab.get("value") is not None or keep_null_value:
            item["value"] = lab.get("value")
        if lab.get("version"):
            item["version"] = _str(lab.get("version"))
        item["signing"] = True
        out.append(item)
    return out or None


def _label_struct(lab: Mapping[str, Any]) -> dict[str, Any]:
    """A label as the v2 Go struct writes it, null values skipped."""
    out: dict[str, Any] = {"name": _str(lab.get("name"))}
    if lab.get("value") is not None:
        out["value"] = lab.get("value")
    if lab.get("version"):
        out["version"] = _str(lab.get("version"))
    if _signing(lab):
        out["signing"] = True
    return out


def _element(e: Mapping[str, Any], *, keep_null_value: bool = False) -> dict[str, Any]:
    """ElementMeta: name and version always, extraIdentity and labels when not empty."""
    out: dict[str, Any] = {"name": _str(e.get("name")), "version": _str(e.get("version"))}
    extra = _identity(e.get("extraIdentity"))
    if extra:
        out["extraIdentity"] = extra
    labels = _labels(e.get("labels"), keep_null_value=keep_null_value)
    if labels:
        out["labels"] = labels
    return out


def _none_access(r: Mapping[str, Any]) -> bool:
    return _map(r.get("access")).get("type") in _NONE_ACCESS


def _digest_struct(v: Any) -> dict[str, str]:
    d = _map(v)
    return {
        "hashAlgorithm": _str(d.get("hashAlgorithm")),
        "normalisationAlgorithm": _str(d.get("normalisationAlgorithm")),
        "value": _str(d.get("value")),
    }


def _provider(v: Any, *, as_map: bool, keep_null_value: bool) -> Any:
    if isinstance(v, Mapping):
        prov: Any = dict(v)
    else:
        text = _str(v)
        prov = text
        if text.lstrip().startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, Mapping):
                prov = dict(parsed)
    if not isinstance(prov, Mapping):
        return {"name": prov} if as_map else prov
    out = {k: x for k, x in prov.items() if k != "labels" and x is not None}
    out["name"] = _str(prov.get("name"))
    labels = _labels(prov.get("labels"), keep_null_value=keep_null_value)
    if labels:
        out["labels"] = labels
    return out


def _header(comp: Mapping[str, Any], *, legacy: bool) -> dict[str, Any]:
    """Name, version, labels, creation time and provider, which both algorithms write alike
    but for three legacy (v1) rules: null label values kept, the time rounded to the second,
    and a provider that is a bare name written as the name.
    """
    out: dict[str, Any] = {"name": _str(comp.get("name")), "version": _str(comp.get("version"))}
    labels = _labels(comp.get("labels"), keep_null_value=legacy)
    if labels:
        out["labels"] = labels
    if comp.get("creationTime"):
        when = comp.get("creationTime")
        out["creationTime"] = _rounded_time(when) if legacy else _str(when)
    out["provider"] = _provider(comp.get("provider"), as_map=not legacy, keep_null_value=legacy)
    return out


def _v4alpha1(doc: Mapping[str, Any]) -> dict[str, Any]:
    comp = _map(doc.get("component"))
    out = _header(comp, legacy=False)
    out["resources"] = [_v4alpha1_resource(_map(r)) for r in _list(comp.get("resources"))]
    sources = map(_map, _list(comp.get("sources")))
    out["sources"] = [{**_element(s), "type": _str(s.get("type"))} for s in sources]
    out["componentReferences"] = [
        _v4alpha1_reference(_map(c)) for c in _list(comp.get("componentReferences"))
    ]
    return {"component": out}


def _v4alpha1_resource(r: Mapping[str, Any]) -> dict[str, Any]:
    item = {**_element(r), "type": _str(r.get("type")), "relation": _str(r.get("relation"))}
    return _with_resource_digest(item, r)


def _v4alpha1_reference(c: Mapping[str, Any]) -> dict[str, Any]:
    item = _element(c)
    # The exclusion rules name "references", the v2 Go struct "componentReferences": the
    # label rule never applies there, so a reference keeps all its labels (upstream code).
    labels = [_label_struct(_map(lab)) for lab in _list(c.get("labels"))]
    if labels:
        item["labels"] = labels
    else:
        item.pop("labels", None)
    item["componentName"] = _str(c.get("componentName"))
    item["digest"] = _digest_struct(c.get("digest"))  # not a pointer: always present
    return item


def _with_resource_digest(item: dict[str, Any], r: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` with the resource's declared digest, in both algorithms; a resource whose
    access is none has no content, so its digest is left out.
    """
    if r.get("digest") is not None and not _none_access(r):
        item["digest"] = _digest_struct(r.get("digest"))
    return item


def _legacy_extra_identity(resources: list[dict[str, Any]]) -> None:
    """The OCM v1 library's defaulting: a resource sharing name and extraIdentity with
    another gets its version added to extraIdentity (in order, seeing earlier changes).
    """
    for i, ri in enumerate(resources):
        for j, rj in enumerate(resources):
            if i == j or rj.get("name") != ri.get("name"):
                continue
            if (rj.get("extraIdentity") or {}) != (ri.get("extraIdentity") or {}):
                continue
            extra = dict(ri.get("extraIdentity") or {})
            extra["version"] = ri.get("version", "")
            ri["extraIdentity"] = extra
            break


def _v1(doc: Mapping[str, Any]) -> dict[str, Any]:
    comp = _map(doc.get("component"))
    meta = _map(doc.get("meta"))
    out = _header(comp, legacy=True)
    raw_resources = [dict(_map(r)) for r in _list(comp.get("resources"))]
    for r in raw_resources:
        r["name"] = _str(r.get("name"))
        r["version"] = _str(r.get("version"))
        r["extraIdentity"] = _identity(r.get("extraIdentity"))
    _legacy_extra_identity(raw_resources)
    out["resources"] = [_v1_resource(r) for r in raw_resources]
    out["componentReferences"] = [
        _v1_reference(_map(c)) for c in _list(comp.get("componentReferences"))
    ]
    schema = meta.get("schemaVersion", meta.get("configuredSchemaVersion"))
    return {"meta": {"schemaVersion": _str(schema)}, "component": out}


def _v1_resource(r: Mapping[str, Any]) -> dict[str, Any]:
    item = _element(r, keep_null_value=True)
    item.setdefault("extraIdentity", None)
    item["type"] = _str(r.get("type"))
    if r.get("relation"):
        item["relation"] = _str(r.get("relation"))
    if r.get("srcRef"):
        item["srcRef"] = r.get("srcRef")
    return _with_resource_digest(item, r)


def _v1_reference(c: Mapping[str, Any]) -> dict[str, Any]:
    item = _element(c, keep_null_value=True)
    item.setdefault("extraIdentity", None)
    item["componentName"] = _str(c.get("componentName"))
    if c.get("digest") is not None:
        item["digest"] = _digest_struct(c.get("digest"))
    return item


# --------------------------------------------------------------------------- serialisations


def _scalar(value: Any, quote: Callable[[str], str]) -> str | None:
    """A JSON scalar as both serialisations write it (they differ only in string escaping);
    None for a mapping or a list.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return number(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, _dt.datetime | _dt.date):
        return quote(_timestamp(value))
    return None


def jcs(value: Any) -> str:
    """RFC 8785 canonical JSON (numbers as IEEE doubles, keys in UTF-16 code-unit order)."""
    scalar = _scalar(value, _string)
    if scalar is not None:
        return scalar
    if isinstance(value, Mapping):
        items = sorted(((str(k), v) for k, v in value.items() if v is not None), key=_utf16)
        return "{" + ",".join(f"{_string(k)}:{jcs(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    raise NormalisationError(f"cannot normalise a {type(value).__name__}")


def _utf16(item: tuple[str, Any]) -> bytes:
    return item[0].encode("utf-16-be", "surrogatepass")


def number(value: int | float) -> str:
    """ECMAScript Number.prototype.toString of the IEEE double (what JCS and Go's encoder write)."""
    try:
        f = float(value)
    except OverflowError:
        raise NormalisationError(f"number {str(value)[:40]} is out of range") from None
    if not math.isfinite(f):
        raise NormalisationError("numbers must be finite")
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    _, tup, exponent = decimal.Decimal(repr(abs(f))).as_tuple()
    if not isinstance(exponent, int):  # pragma: no cover - finite floats have int exponents
        raise NormalisationError("numbers must be finite")
    n = len(tup) + exponent  # the decimal point sits after the first n digits
    digits = "".join(map(str, tup)).lstrip("0")
    n -= len(tup) - len("".join(map(str, tup)).lstrip("0"))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        s = mantissa + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + s


_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(s: str) -> str:
    """An RFC 8785 string: quote and backslash escaped, control characters in their short
    forms or as lower-case ``u00xx`` escapes, everything else as is: exactly what Python's
    encoder writes with ``ensure_ascii=False``.
    """
    if _SURROGATE.search(s):
        raise NormalisationError("strings must be valid Unicode (a lone surrogate)")
    return json.dumps(s, ensure_ascii=False)


def _go_string(s: str) -> str:
    """Go's encoding/json (HTML escaping off): JCS escapes plus U+2028/U+2029."""
    return _string(s).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _entries_json(value: Any) -> str:
    """The OCM v1 library's entry normalisation: a mapping is a key-sorted list of
    ``{key: value}``.
    """
    scalar = _scalar(value, _go_string)
    if scalar is not None:
        return scalar
    if isinstance(value, Mapping):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0].encode())
        entries = ("{" + f"{_go_string(k)}:{_entries_json(v)}" + "}" for k, v in items)
        return "[" + ",".join(entries) + "]"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_entries_json(v) for v in value) + "]"
    raise NormalisationError(f"cannot normalise a {type(value).__name__}")
