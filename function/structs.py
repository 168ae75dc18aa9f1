"""protobuf Struct ↔ plain data, without the double trouble.

A Struct stores every number as a double, so ``replicas: 2`` in a claim arrives as ``2.0``.
Written back into a Kubernetes object (a Kustomize patch, Helm values) that ``2.0`` is
refused for an integer field. Integral doubles are therefore turned back into ints as
soon as data leaves a Struct; nothing in Kubernetes needs the distinction the other way.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2


def plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "struct_value":
        return {k: _value(x) for k, x in v.struct_value.fields.items()}
    if kind == "number_value":
        f = v.number_value
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    if kind == "bool_value":
        return v.bool_value
    return None


def to_dict(msg: Any) -> dict[str, Any]:
    """A Struct (or message) as plain data with integral numbers as ints.

    Structs are walked directly (about twice as fast as ``MessageToDict`` plus a second pass).
    """
    if msg is None:
        return {}
    if isinstance(msg, struct_pb2.Struct):
        return {k: _value(v) for k, v in msg.fields.items()}
    return plain(json_format.MessageToDict(msg, preserving_proto_field_name=True))


def fields(msg: struct_pb2.Struct, names: tuple[str, ...]) -> dict[str, Any]:
    """Only the named top-level fields of a Struct, as plain data (skip converting the rest)."""
    f = msg.fields
    return {n: _value(f[n]) for n in names if n in f}
