"""Turning pydantic JSON Schema into a *structural* OpenAPI v3 schema.

The Kubernetes API server only accepts structural schemas in CRDs (and so in XRDs): every
node typed, no ``$ref``/``$defs``, no typed ``anyOf``/``oneOf``, and
``x-kubernetes-preserve-unknown-fields`` only where a value really is free-form. pydantic
emits references, ``anyOf [X, null]`` for optional fields and ``additionalProperties: false``
for strict models, so this module rewrites its output rather than hand-maintaining a second
copy of the API.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_DROP = {"title", "examples"}


def structural(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model``."""
    raw = model.model_json_schema(mode="validation")
    defs = raw.pop("$defs", {})
    return _convert(raw, defs)


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = dict(defs[ref.split("/")[-1]])
    extra = {k: v for k, v in node.items() if k != "$ref"}
    target.update(extra)
    return target


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    nullable = False
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [o for o in node[key] if o.get("type") != "null"]
            nullable = len(options) != len(node[key])
            if len(options) != 1:
                raise ValueError(
                    f"cannot express a union of {len(options)} types structurally: {node[key]}"
                )
            merged = {k: v for k, v in node.items() if k != key}
            merged.update(_resolve(options[0], defs))
            node = merged
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in _DROP:
            continue
        if k == "default" and v is None:
            continue
        if k == "properties":
            out["properties"] = {name: _convert(sub, defs) for name, sub in v.items()}
        elif k == "items":
            out["items"] = _convert(v, defs)
        elif k == "additionalProperties":
            if v is False:
                continue  # strict models: the API server prunes unknown fields anyway
            if v is True or v == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
            else:
                out["additionalProperties"] = _convert(v, defs)
        elif k in ("maxItems", "minItems", "maxLength", "minLength"):
            out[k] = v
        else:
            out[k] = v
    if "type" not in out:
        if "properties" in out:
            out["type"] = "object"
        elif "enum" in out:
            out["type"] = "string"
        else:
            # A truly free-form value (Any): only here may unknown fields be preserved.
            out["type"] = "object"
            out["x-kubernetes-preserve-unknown-fields"] = True
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    if nullable:
        out["nullable"] = True
    return out
