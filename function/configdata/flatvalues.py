"""Values from a flat ConfigMap: one data key per value (``data: {replicas: "3"}``).

Teams keep configuration in ConfigMaps one key per setting, the way ``kubectl create
configmap --from-literal`` writes them. The nested form (one data key holding a YAML map of
values) stays what it was; a ConfigMap is read flat only when that cannot be mistaken for it:
no data key was named (``configMapRef.key`` / ``--key``) and *every* data key is a top-level
property of the ConfigData schema whose type is a scalar (``string``, ``integer``,
``number``, ``boolean``, alone or with ``null``). A nested values file's key (``values.yaml``)
is no such property, so it keeps its meaning.

ConfigMap data are strings, so each is typed by its property: ``"3"`` → ``3`` for an
``integer``, ``"2.5"`` → ``2.5`` for a ``number``, ``"true"``/``"false"`` for a ``boolean``
(exactly those spellings: no YAML 1.1 ``yes``/``on``), anything else stays the string it was
and the schema check then names the key and the type it wanted. A property that allows
``string`` keeps the text as it is. Pure: the caller passes the data and the schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from function.configdata.suggestions import did_you_mean

SCALARS = ("string", "integer", "number", "boolean")
_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,30})")
_NUMBER = re.compile(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,2})?")


def _types(spec: Any) -> tuple[str, ...] | None:
    """The property's scalar types, or None when it may be anything else (or is unknown)."""
    if not isinstance(spec, Mapping):
        return None
    t = spec.get("type")
    types = (t,) if isinstance(t, str) else tuple(t) if isinstance(t, list) else ()
    if not types or not all(isinstance(x, str) for x in types):
        return None
    scalars = tuple(x for x in types if x in SCALARS)
    if not scalars or any(x not in (*SCALARS, "null") for x in types):
        return None
    return scalars


def flat_keys(schema: Any) -> dict[str, tuple[str, ...]]:
    """The schema's top-level scalar properties and their types: what a flat ConfigMap may hold."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return {}
    out = {}
    for name, spec in props.items():
        types = _types(spec)
        if isinstance(name, str) and types:
            out[name] = types
    return out


def is_flat(data: Mapping[str, Any], schema: Any) -> bool:
    """Whether ``data`` (a ConfigMap's ``data``, no key named) is to be read one key per value."""
    keys = flat_keys(schema)
    return bool(data) and all(isinstance(k, str) and k in keys for k in data)


def typed(text: Any, types: tuple[str, ...]) -> Any:
    """``text`` as the first of ``types`` that reads it; unchanged when none does."""
    if not isinstance(text, str) or "string" in types:
        return text
    for t in types:
        if t == "integer" and _INTEGER.fullmatch(text):
            return int(text)
        if t == "number" and _NUMBER.fullmatch(text):
            number = float(text)
            return int(number) if _INTEGER.fullmatch(text) else number
        if t == "boolean" and text in ("true", "false"):
            return text == "true"
    return text


def flat_values(data: Mapping[str, Any], schema: Any) -> dict[str, Any]:
    """The values of a flat ConfigMap (:func:`is_flat`), each typed by its property."""
    keys = flat_keys(schema)
    return {k: typed(v, keys[k]) for k, v in sorted(data.items())}


def not_flat_reason(data: Mapping[str, Any], schema: Any) -> str:
    """Why ``data`` cannot be read flat, for the error that asks for a key instead."""
    keys = flat_keys(schema)
    if not keys:
        return "the ConfigData schema has no top-level string, integer, number or boolean property"
    others = sorted(str(k) for k in data if k not in keys)
    shown = ", ".join(repr(k) for k in others[:5]) + (" ..." if len(others) > 5 else "")
    hint = did_you_mean(others, keys)
    verb = "is" if len(others) == 1 else "are"
    return f"{shown} {verb} no such property of the schema" + (f" ({hint})" if hint else "")


__all__ = ["flat_keys", "flat_values", "is_flat", "not_flat_reason", "typed"]
