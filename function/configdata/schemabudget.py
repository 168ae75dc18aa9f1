"""JSON Schema evaluation with a bounded cost, whatever the ConfigData's schema says.

The schema is written by the service team that publishes the component, and one replica of
the function validates every tenant's values against every component's schema. jsonschema
itself has three unbounded costs that a few lines of schema can trigger:

* **regular expressions**: ``pattern``, ``patternProperties`` (and ``additionalProperties`` /
  ``unevaluatedProperties`` beside them) run Python's backtracking ``re``; ``^(a+)+$`` against
  40 characters never finishes. Here every schema regex runs on RE2 (``google-re2``), whose
  matching is linear in the text. RE2 refuses what cannot be matched in linear time
  (backreferences, lookaround): such a schema is refused with the schema path of the regex.
* **steps**: nested ``anyOf``/``oneOf``/``$ref`` evaluate every branch, and a branch can refer
  to the previous level twice: 2^depth keyword evaluations and their collected errors.
  Every keyword evaluation is counted against :data:`MAX_STEPS` per validation.
* **uniqueItems**: jsonschema compares items pairwise when they cannot be sorted (maps), so a
  few thousand maps cost seconds. Here items are hashed, with JSON Schema's equality (``1``
  equals ``1.0``; ``true`` is not ``1``).

The budgets are process settings (:mod:`function.budgets`), documented in docs/security.md.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import jsonschema
import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import jsonschema.validators
import re2
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from function import budgets


class RegexRefused(ValueError):
    """A schema regex RE2 cannot run (the pattern, and RE2's reason)."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(reason)
        self.pattern = pattern
        self.reason = reason


class StepBudgetExceeded(Exception):
    """Schema evaluation took more than the step budget."""


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would write every refused pattern to stderr
# Program and DFA cache per regex (RE2's default is 8 MiB): a pattern that needs more is
# refused ("pattern too large"), so the compiled cache below holds at most 256 MiB.
_OPTIONS.max_mem = 1 << 20


@lru_cache(maxsize=256)
def compile_linear(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (linear-time matching), or :class:`RegexRefused`."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else "not supported"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexRefused(pattern, str(reason)) from None


class _LinearRe:
    """What jsonschema's keyword modules call as ``re``: ``search`` runs on RE2."""

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)

    @staticmethod
    def search(pattern: str, string: str, flags: int = 0) -> Any:
        if flags:  # pragma: no cover - jsonschema passes none
            return re.search(pattern, string, flags)
        return compile_linear(pattern).search(string)


# jsonschema's pattern, patternProperties, additionalProperties and unevaluatedProperties
# (every draft) call re.search in these three modules and nowhere else (jsonschema 4.x).
for _module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils):
    _module.re = _LinearRe()


def _schema_regexes(node: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every regex of a schema with its schema path (values under enum/const/default and
    examples are data, not schema).
    """
    stack = [(node, path)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Mapping):
            for k, v in node.items():
                if k in ("enum", "const", "default", "examples"):
                    continue
                if k == "pattern" and isinstance(v, str):
                    yield (*path, k), v
                elif k == "patternProperties" and isinstance(v, Mapping):
                    for p, sub in v.items():
                        if isinstance(p, str):
                            yield (*path, k, p), p
                        stack.append((sub, (*path, k, p)))
                    continue
                stack.append((v, (*path, k)))
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))


def check_regexes(schema: Any) -> tuple[tuple[Any, ...], RegexRefused] | None:
    """The first schema regex RE2 refuses, with its schema path, or None."""
    for path, pattern in _schema_regexes(schema, ()):
        try:
            compile_linear(pattern)
        except RegexRefused as e:
            return path, e
    return None


def _key(v: Any) -> Any:
    """A hashable key equal for exactly the values JSON Schema calls equal."""
    if v is True or v is False:
        return ("b", v)
    if isinstance(v, int | float):
        return ("n", v)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, Mapping):
        return ("m", frozenset((k, _key(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return ("l", tuple(_key(x) for x in v))
    return ("o", v) if v is None else ("r", repr(v))


def _unique_items(validator: Any, unique: Any, instance: Any, _schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        k = _key(item)
        if k in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(k)


_steps: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "schema_steps", default=None
)


def _counted(fn: Any) -> Any:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        left = _steps.get()
        if left is not None:
            left[0] -= 1
            if left[0] < 0:
                raise StepBudgetExceeded
            if not left[0] & 255:
                budgets.check_cpu()
        return fn(validator, value, instance, schema)

    return keyword


@lru_cache(maxsize=16)
def bounded(cls: type[Validator]) -> type[Validator]:
    """``cls`` with every keyword counted against the step budget and uniqueItems hashed."""
    keywords = dict(cls.VALIDATORS)
    if "uniqueItems" in keywords:
        keywords["uniqueItems"] = _unique_items
    extended: type[Validator] = jsonschema.validators.extend(
        cls, {k: _counted(f) for k, f in keywords.items()}
    )
    return extended


class Budget:
    """``with Budget(): ...`` counts the keyword evaluations of the validations inside."""

    def __init__(self, steps: int | None = None) -> None:
        self.steps = budgets.current().schema_steps if steps is None else steps

    def __enter__(self) -> Budget:
        self._token = _steps.set([self.steps])
        return self

    def __exit__(self, *exc: object) -> None:
        _steps.reset(self._token)
