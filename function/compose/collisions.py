"""No two desired objects may be one: a collision is a Fatal, never a dict overwrite.

Builders return objects by composition-resource key; putting them in a map with ``d[k] = v``
or ``dict.update`` would silently drop whichever came first when two keys meet, and two
objects with one identity would make Crossplane apply two contents to one object. The keys
and names are built so that neither can happen (names.py, objectnames.py); :func:`merge` is
the one way any builder or the core puts a desired object in a map, and refuses a second
object under a key with one Fatal naming both sources (the claim fields or rules that asked
for them). This is the proof at run time, checked on every desired state before it is
returned:

- no two objects share a composition-resource key;
- no two share (apiVersion, kind, namespace, name), nor (apiVersion, kind, name) at all:
  Crossplane v2.2.4 sorts ``resourceRefs`` by apiVersion, kind and name only and rewrites
  the XR on every reconcile when two refs differ only in namespace (observed.md);
- no two ExternalSecrets write one Secret (ESO would let the last one win).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from function.errors import InvalidClaim


class Objects(dict[str, dict[str, Any]]):
    """Desired objects by composition-resource key, remembering for each the claim field or
    rule that asked for it (``sources``), so a collision can name both.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sources: dict[str, str] = {}

    def copy(self) -> Objects:
        """A copy that keeps the sources (``dict.copy`` would drop them)."""
        out = Objects(self)
        out.sources.update(self.sources)
        return out

    def only(self, keys: Any) -> Objects:
        """The objects under ``keys`` (with their sources), in this map's order."""
        out = Objects()
        for k, v in self.items():
            if k in keys:
                out[k] = v
                if k in self.sources:
                    out.sources[k] = self.sources[k]
        return out


def merge(
    into: dict[str, dict[str, Any]],
    new: Mapping[str, dict[str, Any]],
    source: str | None = None,
) -> None:
    """Put ``new`` into ``into``; a key already there is one Fatal naming both objects and
    both sources (``source``: the claim field or rule ``new`` was built for, when ``new`` does
    not carry its own).
    """
    for key, obj in new.items():
        src = (new.sources.get(key) if isinstance(new, Objects) else None) or source
        if key in into:
            first = into.sources.get(key) if isinstance(into, Objects) else None
            where = src if src and src.startswith("spec") else (first or "spec")
            if not where.startswith("spec"):
                where = "spec"
            raise InvalidClaim(
                where,
                f"two composed objects have the composition-resource key {key!r}: "
                f"{_describe(into[key])}{f' (for {first})' if first else ''} and "
                f"{_describe(obj)}{f' (for {src})' if src else ''}; one would silently "
                "replace the other",
            )
        into[key] = obj
        if isinstance(into, Objects) and src:
            into.sources[key] = src


def objects(*entries: tuple[str, dict[str, Any], str]) -> Objects:
    """A map of ``(key, object, source)`` entries, each put in through :func:`merge`."""
    out = Objects()
    for key, obj, source in entries:
        merge(out, {key: obj}, source)
    return out


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def check(desired: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse desired objects Crossplane or the API server would confuse: one identity twice,
    one (apiVersion, kind, name) in two namespaces (Crossplane v2.2.4 cannot tell them apart),
    or two ExternalSecrets writing one Secret.

    Raises:
        InvalidClaim: naming both composition-resource keys and objects.
    """
    full: dict[tuple[Any, ...], str] = {}
    blind: dict[tuple[Any, ...], str] = {}
    secrets: dict[tuple[Any, ...], str] = {}
    for key in sorted(desired):
        obj = desired[key]
        meta = obj.get("metadata") or {}
        ident = (obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name"))
        for table, k, what in (
            (full, ident, "the same identity"),
            (
                blind,
                (ident[0], ident[1], ident[3]),
                "one name (Crossplane v2.2.4 cannot tell them apart)",
            ),
        ):
            if k in table:
                raise InvalidClaim(
                    "spec",
                    f"composed objects {table[k]!r} and {key!r} have {what}: "
                    f"{_describe(desired[table[k]])}, {_describe(obj)}",
                )
            table[k] = key
        if obj.get("kind") == "ExternalSecret":
            target = ((obj.get("spec") or {}).get("target") or {}).get("name") or meta.get("name")
            sk = (meta.get("namespace"), target)
            if sk in secrets:
                raise InvalidClaim(
                    "spec",
                    f"ExternalSecrets {secrets[sk]!r} and {key!r} both write Secret "
                    f"{sk[0]}/{sk[1]}",
                )
            secrets[sk] = key
