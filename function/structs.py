"""protobuf Struct ↔ plain data, without the double trouble.

A Struct stores every number as a double, so ``replicas: 2`` in a claim arrives as ``2.0``.
Written back into a Kubernetes object (a Kustomize patch, Helm values) that ``2.0`` is
refused for an integer field. Integral doubles are therefore turned back into ints as
soon as data leaves a Struct; nothing in Kubernetes needs the distinction the other way.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format


def plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def to_dict(msg: Any) -> dict[str, Any]:
    """A Struct (or message) as plain data with integral numbers as ints."""
    if msg is None:
        return {}
    return plain(json_format.MessageToDict(msg, preserving_proto_field_name=True))
