"""Configuration rules → substitutions: user values, checked, merged over defaults.

Upstream merged values over ``defaults`` with yq ``*`` (maps merge recursively, anything else
is replaced by the user's value), evaluated each rule value with spiff++, and (meant to)
validate only the user values against ``schema``. Here:

* the schema is a real JSON Schema (``jsonschema``; ``$schema`` picks the draft, default
  2020-12, so draft-07 schemas work) and is enforced on the user values *and* on the merged
  values. For the user values ``required`` is not checked, since defaults may supply what is
  missing; the merged check catches what is still absent.
* rule values are literals or ``(( dotted.path ))`` references into the merged values
  (recursively inside literal maps/lists). Any other spiff expression is refused; there is
  no spiff interpreter here, and guessing its semantics would write wrong values silently.

Errors name the value path and the schema rule, and never echo a large value.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import SchemaError

from function.cache import memo
from function.configdata.model import ConfigData
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.errors import InvalidConfigData, InvalidValues, UnsupportedRule

_EXPR = re.compile(r"^\(\((.*)\)\)$", re.S)
_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.(?:[A-Za-z_][A-Za-z0-9_-]*|[0-9]+))*")
MAX_ERRORS = 5


def deep_merge(base: Any, over: Any) -> Any:
    """Yq ``*``: maps merge key by key, everything else (lists included) is replaced."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = {k: copy.deepcopy(v) for k, v in base.items()}
        for k, v in over.items():
            out[k] = deep_merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, dict):
        return f"<map with {len(value)} keys>" if len(repr(value)) > limit else repr(value)
    if isinstance(value, list):
        return f"<list of {len(value)} items>" if len(repr(value)) > limit else repr(value)
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _value_path(prefix: str, parts: Any) -> str:
    out = prefix
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _message(err: jsonschema.ValidationError) -> str:
    msg = err.message
    full = repr(err.instance)
    if len(full) > 60 and full in msg:
        msg = msg.replace(full, _short(err.instance))
    if len(msg) > 300:
        msg = msg[:297] + "..."
    rule = "/".join(str(p) for p in err.schema_path)
    return f"{msg} (schema rule {rule})" if rule else msg


def validator_for(schema: Any) -> jsonschema.protocols.Validator:
    """A checked validator for ``schema``; memoised by the schema's canonical JSON."""
    try:
        key: Any = ("schema", json.dumps(schema, sort_keys=True, separators=(",", ":")))
    except (TypeError, ValueError):
        key = None
    return memo("validators", key, lambda: _validator_for(schema), lambda _: 4 * len(key[1]) + 2000)


def _validator_for(schema: Any) -> jsonschema.protocols.Validator:
    where = "ConfigData configuration.schema"
    if not isinstance(schema, dict | bool):
        raise InvalidConfigData(where, f"must be a JSON Schema object, got {type(schema).__name__}")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        at = "/".join(str(p) for p in e.path) or "(root)"
        raise InvalidConfigData(
            where, f"is not a valid JSON Schema at {at}: {e.message[:200]}"
        ) from None
    # An empty registry: a `$ref` may point inside the schema only. Without it jsonschema
    # would fetch http(s):// and file:// references, letting a ConfigData author make the
    # function reach any host (past the registry allowlist) or read its own files.
    return cls(schema, registry=referencing.Registry())


def validate(validator: Any, instance: Any, *, label: str, skip_required: bool) -> None:
    where = "ConfigData configuration.schema"
    try:
        errors = sorted(
            (
                e
                for e in validator.iter_errors(instance)
                if not (skip_required and e.validator == "required")
            ),
            key=lambda e: (list(map(str, e.absolute_path)), str(e.validator)),
        )
    except RecursionError:
        raise InvalidConfigData(
            where, "has a $ref cycle (a reference that resolves to itself)"
        ) from None
    except (
        referencing.exceptions.Unresolvable,
        jsonschema.exceptions._WrappedReferencingError,
    ) as e:
        ref = getattr(e, "ref", None) or getattr(getattr(e, "_wrapped", None), "ref", None) or "?"
        raise InvalidConfigData(
            where,
            f"has a $ref that cannot be resolved ({str(ref)[:100]}); only references inside the "
            "schema are allowed",
        ) from None
    if not errors:
        return
    shown = [f"{_value_path(label, e.absolute_path)}: {_message(e)}" for e in errors[:MAX_ERRORS]]
    more = f" (and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
    raise InvalidValues("ConfigData configuration.schema", "; ".join(shown) + more)


def merged_values(cd: ConfigData, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """User values validated, merged over defaults, and the result validated too."""
    user = {} if values is None else values
    if not isinstance(user, Mapping):
        raise InvalidValues("values", f"must be a map of keys to values, got {type(user).__name__}")
    conf = cd.configuration
    defaults = dict(conf.defaults) if conf else {}
    schema = conf.schema_ if conf else None
    merged = deep_merge(defaults, dict(user))
    if schema is not None:
        v = validator_for(schema)
        validate(v, dict(user), label="values", skip_required=True)
        validate(v, merged, label="merged values (defaults + values)", skip_required=False)
    return merged


def _lookup(merged: Any, ref: str, where: str, expr: str) -> Any:
    node = merged
    walked: list[str] = []
    for part in ref.split("."):
        walked.append(part)
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise InvalidConfigData(
                where,
                f"{expr} refers to {'.'.join(walked)!r}, which is not in the merged values "
                "(defaults + values)",
            )
    return copy.deepcopy(node)


def evaluate(value: Any, merged: Mapping[str, Any], where: str) -> Any:
    """A rule value: a literal, or ``(( dotted.path ))`` looked up in ``merged`` (recursively)."""
    if isinstance(value, str):
        m = _EXPR.match(value.strip())
        if m:
            expr = m.group(1).strip()
            shown = value if len(value) <= 80 else value[:77] + "..."
            if _REF.fullmatch(expr):
                return _lookup(merged, expr, where, f"(( {expr} ))")
            raise UnsupportedRule(
                where,
                f"spiff expression {shown!r} is not supported: only literals and (( dotted.path )) "
                "references into the values are",
            )
        if "((" in value and "))" in value:
            shown = value if len(value) <= 80 else value[:77] + "..."
            raise UnsupportedRule(
                where,
                f"{shown!r} embeds a spiff expression; only a whole-value (( dotted.path )) is "
                "supported",
            )
        return value
    if isinstance(value, Mapping):
        return {k: evaluate(v, merged, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [evaluate(v, merged, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def plan_configuration(
    cd: ConfigData, values: Mapping[str, Any] | None
) -> tuple[Substitution, ...]:
    """Every configuration substitution, in rule order."""
    conf = cd.configuration
    if conf is None:
        return ()
    merged = merged_values(cd, values)
    subs: list[Substitution] = []
    for i, rule in enumerate(conf.rules):
        rid = f"configuration.rules[{i}]"
        where = f"ConfigData {rid}.value (file {rule.file})"
        path = parse_path(rule.path, where=f"ConfigData {rid}.path (file {rule.file})")
        subs.append(Substitution(rid, "path", rule.file, path, evaluate(rule.value, merged, where)))
    return tuple(subs)
