"""No two desired objects may be one: a collision is a Fatal, never a dict overwrite.

Builders return objects by composition-resource key; merging them with ``dict.update`` would
silently drop whichever came first when two keys meet, and two objects with one identity
would make Crossplane apply two contents to one object. The keys and names are built so that
neither can happen (names.py, objectnames.py); this is the proof at run time, checked on
every desired state before it is returned:

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


def merge(into: dict[str, dict[str, Any]], new: Mapping[str, dict[str, Any]]) -> None:
    for key, obj in new.items():
        if key in into:
            raise InvalidClaim(
                "spec",
                f"two composed objects have the composition-resource key {key!r} "
                f"({_describe(into[key])}, {_describe(obj)})",
            )
        into[key] = obj


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def check(desired: Mapping[str, Mapping[str, Any]]) -> None:
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
