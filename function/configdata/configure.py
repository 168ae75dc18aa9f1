"""Configuration rules → substitutions: user values merged over defaults, expressions evaluated,
the schema checked.

Upstream (ocm-controller v0.32.0 ``generateSubstitutions``) merged the values over
``defaults`` with yq ``*`` (maps merge key by key, anything else is replaced), put the rules
next to them in one spiff document and evaluated it. Here:

* the same document is built and evaluated by :mod:`function.configdata.expressions`, so
  ``(( ))`` in rule values, in defaults and in the user's values give upstream's results
  (interpolation, arithmetic, ``||``, lexical scoping, a rule's own fields included), and
  anything outside the supported subset is refused by name;
* an expression in defaults or values that fails while no rule uses it is a **finding**, not
  an error (upstream failed the whole configuration): nothing written depends on it;
* the schema is a real JSON Schema (``jsonschema``; ``$schema`` picks the draft, default
  2020-12) and, unlike upstream (whose schema field decoded to nothing), it is enforced on the
  user values (``required`` skipped: defaults may supply those keys) and on the merged values,
  after evaluation. ``schema_violations="Warning"`` (the ops policy switch) reports violations
  as findings instead of refusing.
* numbers are what upstream's JSON round trip made of them: an integral float is an integer.

Errors name the value path and the schema rule, and never echo a large value.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import SchemaError

from function import budgets
from function.cache import Memos, memo
from function.configdata import expressions as spiff
from function.configdata import schemabudget
from function.configdata.findings import Finding
from function.configdata.model import ConfigData
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.configdata.suggestions import did_you_mean, similar_keys
from function.errors import InvalidConfigData, InvalidValues, SackError, UnsupportedRule
from function.yamlio import MAX_EXPANDED_TEXT, YamlError, check_expansion

MAX_ERRORS = 5
SchemaViolations = Literal["Fatal", "Warning"]
RULES = spiff.RULES_KEY
SCHEMA_WHERE = "ConfigData configuration.schema"
MERGED = "merged values (defaults + values)"


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
    hint = _hint(err)
    if hint:
        msg = f"{msg}: {hint}"
    rule = "/".join(str(p) for p in err.schema_path)
    return f"{msg} (schema rule {rule})" if rule else msg


def _hint(err: jsonschema.ValidationError) -> str:
    """Did you mean: for the violations a typo causes: a key the schema does not have
    (``additionalProperties``/``unevaluatedProperties`` false), an ``enum`` value, a
    ``required`` key spelt otherwise. Computed from the error and its (sub)schema only, never
    by evaluating anything again (no pattern is matched here: with ``patternProperties`` the
    keys those patterns allow are unknown, so no suggestion is made).
    """
    schema = err.schema if isinstance(err.schema, Mapping) else {}
    instance = err.instance
    if err.validator in ("additionalProperties", "unevaluatedProperties"):
        props = schema.get("properties")
        if not isinstance(instance, Mapping) or not isinstance(props, Mapping):
            return ""
        if schema.get("patternProperties") or err.validator_value is not False:
            return ""
        return did_you_mean([k for k in instance if k not in props], props)
    if (
        err.validator == "enum"
        and isinstance(instance, str)
        and isinstance(err.validator_value, list)
    ):
        return did_you_mean([instance], err.validator_value)
    if err.validator == "required" and isinstance(instance, Mapping):
        missing = [k for k in err.validator_value or () if k not in instance]
        found = schema.get("properties")
        declared = found if isinstance(found, Mapping) else {}
        given = [k for k in instance if k not in declared]
        hints = []
        for m in missing:
            for g in given:
                if similar_keys(g, [m]):
                    hints.append(f"{g!r} is given: did you mean {m!r}?")
        return "; ".join(hints[:3])
    return ""


def validator_for(schema: Any, memos: Memos | None = None) -> jsonschema.protocols.Validator:
    """A checked validator for ``schema``; memoised in ``memos`` by the schema's canonical
    JSON.
    """
    try:
        key: Any = ("schema", json.dumps(schema, sort_keys=True, separators=(",", ":")))
    except (TypeError, ValueError):
        key = None
    return memo(
        "validators", key, lambda: _validator_for(schema), lambda _: 4 * len(key[1]) + 2000, memos
    )


def _validator_for(schema: Any) -> jsonschema.protocols.Validator:
    if not isinstance(schema, dict | bool):
        raise InvalidConfigData(
            SCHEMA_WHERE, f"must be a JSON Schema object, got {type(schema).__name__}"
        )
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    refused = schemabudget.check_regexes(schema)
    if refused is not None:
        at, e = refused
        raise InvalidConfigData(
            SCHEMA_WHERE,
            f"the regular expression at {'/'.join(map(str, at))} ({e.pattern[:60]!r}) cannot run "
            f"on a linear-time engine (RE2: {e.reason}); backreferences and lookaround are not "
            "supported",
        )
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        place = "/".join(str(p) for p in e.path) or "(root)"
        raise InvalidConfigData(
            SCHEMA_WHERE, f"is not a valid JSON Schema at {place}: {e.message[:200]}"
        ) from None
    # An empty registry: a `$ref` may point inside the schema only. Without it jsonschema
    # would fetch http(s):// and file:// references, letting a ConfigData author make the
    # function reach any host (past the registry allowlist) or read its own files.
    return schemabudget.bounded(cls)(schema, registry=referencing.Registry())


def violations(validator: Any, instance: Any, *, label: str, skip_required: bool) -> list[str]:
    """Every schema violation of ``instance``, each naming the value path and the schema rule
    (``label.path: message (schema rule …)``).
    """
    try:
        with schemabudget.Budget() as budget:
            errors = sorted(
                (
                    e
                    for e in validator.iter_errors(instance)
                    if not (skip_required and e.validator == "required")
                ),
                key=lambda e: (list(map(str, e.absolute_path)), str(e.validator)),
            )
    except schemabudget.StepBudgetExceeded:
        raise InvalidConfigData(
            SCHEMA_WHERE,
            f"checking {label} takes more than {budget.steps} schema steps (the schema-steps "
            "budget; nested anyOf/oneOf/$ref?)",
        ) from None
    except schemabudget.RegexRefused as e:  # pragma: no cover - check_regexes found them all
        raise InvalidConfigData(
            SCHEMA_WHERE, f"the regular expression {e.pattern[:60]!r} cannot run on RE2: {e.reason}"
        ) from None
    except RecursionError:
        raise InvalidConfigData(
            SCHEMA_WHERE, "has a $ref cycle (a reference that resolves to itself)"
        ) from None
    except (
        referencing.exceptions.Unresolvable,
        jsonschema.exceptions._WrappedReferencingError,
    ) as e:
        ref = getattr(e, "ref", None) or getattr(getattr(e, "_wrapped", None), "ref", None) or "?"
        raise InvalidConfigData(
            SCHEMA_WHERE,
            f"has a $ref that cannot be resolved ({str(ref)[:100]}); only references inside the "
            "schema are allowed",
        ) from None
    return [f"{_value_path(label, e.absolute_path)}: {_message(e)}" for e in errors]


# --------------------------------------------------------------------------- the document


def _as_upstream(value: Any, where: str) -> Any:
    """Values as upstream's JSON round trip left them (integral floats are integers, dates
    are their text), with the keys spiff would treat specially refused.
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return (
            int(value)
            if math.isfinite(value) and value.is_integer() and abs(value) < 2**63
            else value
        )
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and k.startswith("<<"):
                raise UnsupportedRule(
                    where, f"key {k[:40]!r}: spiff merge and control keys (<<…) are not supported"
                )
            out[k] = _as_upstream(v, where)
        return out
    if isinstance(value, list | tuple):
        return [_as_upstream(v, where) for v in value]
    return value


def _has(tree: Any, parts: tuple[Any, ...]) -> bool:
    for p in parts:
        if isinstance(tree, Mapping) and p in tree:
            tree = tree[p]
        else:
            return False
    return True


@dataclass(frozen=True)
class Configured:
    """What :func:`configure` gives back: the rules' substitutions, the findings on the way,
    and the merged values, evaluated, as the schema saw them (:func:`merged_values`).
    """

    substitutions: tuple[Substitution, ...]
    findings: tuple[Finding, ...]
    values: Mapping[str, Any]  # the merged values, evaluated (what the schema saw)


class _Run:
    """One configuration: the spiff document of defaults + values + rules, and its labels."""

    def __init__(
        self, cd: ConfigData, values: Mapping[str, Any] | None, memos: Memos | None = None
    ) -> None:
        user = {} if values is None else values
        if not isinstance(user, Mapping):
            raise InvalidValues(
                "values", f"must be a map of keys to values, got {type(user).__name__}"
            )
        conf = cd.configuration
        self.rules = list(conf.rules) if conf else []
        self.user = _as_upstream(dict(user), "values")
        defaults = _as_upstream(
            dict(conf.defaults) if conf else {}, "ConfigData configuration.defaults"
        )
        for where, tree in (("values", self.user), ("ConfigData configuration.defaults", defaults)):
            if RULES in tree:
                raise InvalidConfigData(
                    where, f"the key {RULES} is reserved: upstream keeps the rules under it"
                )
        merged = deep_merge(defaults, self.user)
        rules = []
        for i, rule in enumerate(self.rules):
            where = self.rule_where(i)
            if spiff.classify(rule.file)[0] != "plain":
                raise UnsupportedRule(
                    f"ConfigData configuration.rules[{i}].file",
                    "expressions in file are not supported",
                )
            rules.append(
                {
                    "name": f"subst-{i}",
                    "file": rule.file,
                    "path": rule.path,
                    "value": _as_upstream(rule.value, where),
                }
            )
        self.doc = spiff.Document({**merged, RULES: rules}, self.label, memos)

    def rule_where(self, i: int, sub: tuple[Any, ...] = ()) -> str:
        value = _value_path(f"configuration.rules[{i}].value", sub)
        return f"ConfigData {value} (file {self.rules[i].file})"

    def label(self, loc: spiff.Loc) -> str:
        if loc and loc[0] == RULES:
            i, field, rest = loc[1], loc[2] if len(loc) > 2 else "", loc[3:]
            extra = f" (upstream's 'subst-{i}')" if field == "name" else ""
            return _value_path(f"configuration.rules[{i}].{field}", rest) + extra
        prefix = "values" if _has(self.user, loc) else "configuration.defaults"
        return _value_path(prefix, loc)

    def _fail(self, e: spiff.ExpressionError, i: int) -> NoReturn:
        at = e.at or ()
        sub = tuple(at[3:]) if at[:3] == (RULES, i, "value") else ()
        where = self.rule_where(i, sub)
        raise _error(e, where) from None

    def substitutions(self) -> tuple[list[Substitution], list[spiff.OwnField]]:
        subs = []
        for i, rule in enumerate(self.rules):
            path = parse_path(
                rule.path, where=f"ConfigData configuration.rules[{i}].path (file {rule.file})"
            )
            before = len(self.doc.own_fields)
            try:
                value = self.doc.value((RULES, i, "value"))
            except spiff.ExpressionError as e:
                self._fail(e, i)
            except RecursionError:
                raise UnsupportedRule(
                    self.rule_where(i), "the expressions nest too deeply"
                ) from None
            warning = _own_field_warning(self, i, self.doc.own_fields[before:])
            subs.append(
                Substitution(
                    f"configuration.rules[{i}]",
                    "path",
                    rule.file,
                    path,
                    copy.deepcopy(value),
                    warning,
                )
            )
        return subs, self.doc.own_fields

    def evaluated_values(self) -> tuple[dict[str, Any], list[Finding]]:
        """The merged values with every expression evaluated; one that fails is kept as
        written and reported (no rule uses it: those were evaluated, and checked, first).
        """
        findings: list[Finding] = []

        def walk(loc: spiff.Loc) -> Any:
            node = self.doc.node(loc)
            if isinstance(node, dict):
                return {k: walk((*loc, k)) for k in node}
            if isinstance(node, list):
                return [walk((*loc, i)) for i in range(len(node))]
            if not isinstance(node, str) or spiff.classify(node)[0] == "plain":
                return node
            try:
                return self.doc.value(loc)
            except (spiff.ExpressionError, RecursionError) as e:
                label = self.label(loc)
                cause = (
                    _error(e, f"ConfigData {label}")
                    if isinstance(e, spiff.ExpressionError)
                    else None
                )
                what = cause.message if cause else "the expressions nest too deeply"
                findings.append(
                    Finding(
                        "UnusedExpressionFails",
                        f"ConfigData {label}: {what}; no rule uses this value, so it is ignored "
                        "(ocm-controller v1 failed the whole configuration on it): fix or "
                        "remove it",
                        rule=label.split(".", 1)[0]
                        if label.startswith("values")
                        else "configuration.defaults",
                        path=label,
                    )
                )
                return node

        root = {k: walk((k,)) for k in self.doc.root if k != RULES}
        return root, findings


def _error(e: spiff.ExpressionError, where: str) -> SackError:
    raw = (
        spiff.show(e.raw[2:-2])
        if e.raw and e.raw.startswith("((") and e.raw.endswith("))")
        else repr(e.raw)
    )
    if isinstance(e, spiff.Unsupported):
        return UnsupportedRule(
            where,
            f"{raw}: {e.message} (supported: references, string/number/bool/nil "
            "literals, text around (( )), + - * / %, concatenation, ||)",
        )
    if isinstance(e, spiff.SyntaxProblem):
        return InvalidConfigData(where, f"{raw} is not a valid spiff expression: {e.message}")
    if isinstance(e, spiff.NodeFailed) or e.message.startswith("(("):
        return InvalidConfigData(where, e.message)
    return InvalidConfigData(where, f"{raw}: {e.message}")


def _own_field_warning(run: _Run, i: int, hits: list[spiff.OwnField]) -> str | None:
    if not hits:
        return None
    h = hits[0]
    own = run.doc.node((RULES, i, h.field))
    shadow = f"; the key {h.field!r} of the values is shadowed" if h.shadowed else ""
    return (
        f"{run.rule_where(i)}: (( {h.field} )) resolves to this rule's own field {h.field} "
        f"({_short(own)}), as ocm-controller v1's spiff scoping did{shadow}: rename the value "
        f"(e.g. app{h.field[:1].upper()}{h.field[1:]}) or write (( .{h.field} )) to refer to "
        "the values"
    )


def _project(user: Any, merged: Any) -> Any:
    """The evaluated value of every key the user gave (maps: only the user's keys)."""
    if isinstance(user, Mapping) and isinstance(merged, Mapping):
        return {k: _project(v, merged.get(k)) for k, v in user.items()}
    return merged


def _bounded_output(subs: list[Substitution], merged: Any) -> None:
    """Refuse a configuration whose evaluated values expand past the expression-nodes budget.

    Evaluation shares results (a value referred to twice is one object), so 30 defaults that
    each refer to the previous one twice evaluate fast, but the values written into the
    HelmRelease or the patches would hold 2^30 nodes. Counted as written, and stopped at the
    budget.
    """
    limit = budgets.current().expression_nodes
    try:
        check_expansion(
            [*(s.value for s in subs), merged],
            "",
            max_nodes=limit,
            max_depth=MAX_OUTPUT_DEPTH,
            max_text=MAX_EXPANDED_TEXT,
        )
    except YamlError as e:
        detail = (
            e.message.removeprefix("document ")
            .replace(" (YAML alias bomb?)", "")
            .replace("expands", "expand")
            .replace("nests", "nest")
        )
        raise InvalidConfigData(
            "ConfigData configuration",
            f"the evaluated values (every rule's value, and defaults + values) {detail} as "
            "written (the expression-nodes budget: expressions referring to one value many "
            "times?)",
        ) from None


MAX_OUTPUT_DEPTH = 100


def configure(
    cd: ConfigData,
    values: Mapping[str, Any] | None,
    *,
    schema_violations: SchemaViolations = "Fatal",
    memos: Memos | None = None,
) -> Configured:
    """Every configuration substitution, in rule order, plus the findings on the way
    (``memos``: the edge's memo tables, for the schema validator and parsed expressions).
    """
    conf = cd.configuration
    if conf is None:
        if values:
            _Run(cd, values)  # still refuse values that are not a map
        return Configured((), (), dict(values or {}))
    run = _Run(cd, values, memos)
    subs, _ = run.substitutions()
    merged, findings = run.evaluated_values()
    _bounded_output(subs, merged)
    if conf.schema_ is not None:
        v = validator_for(conf.schema_, memos)
        problems = violations(v, _project(run.user, merged), label="values", skip_required=True)
        seen = {p.removeprefix("values") for p in problems}  # the user's own mistakes, once
        problems += [
            p
            for p in violations(v, merged, label=MERGED, skip_required=False)
            if p.removeprefix(MERGED) not in seen
        ]
        if problems and schema_violations != "Warning":
            more = f" (and {len(problems) - MAX_ERRORS} more)" if len(problems) > MAX_ERRORS else ""
            raise InvalidValues(SCHEMA_WHERE, "; ".join(problems[:MAX_ERRORS]) + more)
        findings += [
            Finding(
                "SchemaViolation",
                f"{SCHEMA_WHERE}: {p} (reported as a warning: schema violations are "
                "set to Warning)",
                rule="configuration.schema",
                path=p.split(":", 1)[0],
            )
            for p in problems
        ]
    return Configured(tuple(subs), tuple(findings), merged)


def document(
    cd: ConfigData, values: Mapping[str, Any] | None, memos: Memos | None = None
) -> spiff.Document:
    """The spiff document upstream evaluated (merged values, and the rules under
    :data:`RULES`, rule ``i``'s value at ``(RULES, i, "value")``), not evaluated yet.
    """
    return _Run(cd, values, memos).doc


def plan_configuration(
    cd: ConfigData,
    values: Mapping[str, Any] | None,
    *,
    schema_violations: SchemaViolations = "Fatal",
) -> tuple[Substitution, ...]:
    """Every configuration substitution, in rule order (findings: :func:`configure`)."""
    return configure(cd, values, schema_violations=schema_violations).substitutions


def merged_values(cd: ConfigData, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """The merged values, evaluated and checked against the schema (violations are errors)."""
    return dict(configure(cd, values).values)


def evaluate(value: Any, merged: Mapping[str, Any], where: str) -> Any:
    """One rule value evaluated against ``merged`` as if it were the only rule (tests, fuzzing)."""
    try:
        root = {
            **_as_upstream(dict(merged), "values"),
            RULES: [
                {"name": "subst-0", "file": "", "path": "", "value": _as_upstream(value, where)}
            ],
        }
        doc = spiff.Document(root, lambda loc: _value_path("values", loc))
        return doc.value((RULES, 0, "value"))
    except spiff.ExpressionError as e:
        raise _error(e, where) from None
    except RecursionError:
        raise UnsupportedRule(where, "the expressions nest too deeply") from None
