"""Suggestions ("did you mean") for a rule path that creates a key next to a similar existing key.

Upstream (yq ``|=``) creates missing map keys, and so do we: a rule may legitimately add a
key the file does not have yet. But a typo creates one too: ``spec.replcias`` silently adds
``replcias: 3`` beside ``replicas: 1`` and the Deployment keeps one replica. So a created key
is checked against its siblings, the keys that already existed in the map it was added to,
and a close one is reported (never refused: the rule stays valid).

"Close" means: equal ignoring case, or within an optimal-string-alignment edit distance
(insertions, deletions, substitutions, adjacent transpositions) of 1 when the shorter key has
4 to 7 characters and of 2 from 8 characters on. Shorter keys match by case only: ``B`` next
to ``A`` or ``env`` next to ``dev`` is no typo, ``replcias``/``replicas``,
``imagePulPolicy``/``imagePullPolicy`` and ``Replicas``/``replicas`` are. Pure functions:
callers pass the documents after the change, as lists and maps.

The distance is rapidfuzz's ``OSA`` (C++): on every pair tried it gave the former
hand-written version's results, several times faster.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from function import budgets
from function.configdata.paths import Step, format_path
from function.configdata.substitution import Change

MAX_DISTANCE = 2


@dataclass(frozen=True)
class Suggestion:
    """A created key and the existing sibling keys it probably meant."""

    rule: str  # "configuration.rules[0]" / "localization[1].tag"
    file: str
    document: int
    path: str  # the rule's path as written (canonical form)
    created: str  # the first key the rule created
    similar: tuple[str, ...]  # existing sibling keys, closest first
    suggested: tuple[str, ...]  # the rule's path with the created key replaced by each of them

    @property
    def message(self) -> str:
        """:meth:`describe` for the plain ``ConfigData`` name (the engine's warning text)."""
        return self.describe()

    def describe(self, configdata: str = "ConfigData") -> str:
        """One line naming the ConfigData (``configdata``), rule, file, path and the likely keys."""
        means = " or ".join(self.suggested)
        keys = ", ".join(repr(k) for k in self.similar)
        return (
            f"{configdata} {self.rule} (file {self.file}): path {self.path} creates key "
            f"{self.created!r} "
            f"in document {self.document} next to existing {keys}: did you mean {means}? "
            "(a new key is allowed; fix the rule's path if it is a typo)"
        )


def edit_distance(a: str, b: str, limit: int = MAX_DISTANCE) -> int:
    """Optimal string alignment distance, or ``limit + 1`` when it exceeds ``limit``.

    Computed by rapidfuzz (``OSA``, C++), imported on first use: only a created or unknown key
    needs it, and the ConfigData commands start faster without it.

    Args:
        a: One key.
        b: The other key.
        limit: The largest distance that matters to the caller.

    Returns:
        The distance (insertions, deletions, substitutions, adjacent transpositions), at most
        ``limit + 1``.
    """
    from rapidfuzz.distance import OSA

    return OSA.distance(a, b, score_cutoff=limit)


def similar_keys(key: str, existing: Iterable[Any]) -> tuple[str, ...]:
    """The keys of ``existing`` (string keys only) ``key`` is probably a typo of, closest first.

    Only the first ``suggestion-candidates`` keys are compared (:mod:`function.budgets`): a
    component whose rules create thousands of keys in one map must not make the search
    quadratic.
    """
    scored: list[tuple[int, str]] = []
    for other in itertools.islice(existing, budgets.current().suggestion_candidates):
        if not isinstance(other, str) or other == key:
            continue
        if other.lower() == key.lower():
            scored.append((0, other))
            continue
        allowed = min(MAX_DISTANCE, min(len(key), len(other)) // 4)
        if allowed == 0:
            continue
        d = edit_distance(key, other, allowed)
        if d <= allowed:
            scored.append((d, other))
    return tuple(k for _, k in sorted(scored))


def did_you_mean(unknown: Iterable[Any], known: Iterable[Any]) -> str:
    """``did you mean 'replicas'?`` for names no schema property has, against those it has.

    For a values key the schema refuses (``replicsa`` where ``replicas`` is a property), an
    ``enum`` value, a ``required`` key given under another spelling: one clause, or ``""``
    when nothing is close. Several unknown names are each named with their candidates.
    """
    candidates = [k for k in known if isinstance(k, str)]
    pairs = []
    for name in unknown:
        if not isinstance(name, str):
            continue
        close = similar_keys(name, candidates)
        if close:
            pairs.append((name, " or ".join(repr(k) for k in close[:3])))
    if not pairs:
        return ""
    if len(pairs) == 1:
        return f"did you mean {pairs[0][1]}?"
    return "did you mean " + ", ".join(f"{m} for {n!r}" for n, m in pairs) + "?"


def suggestion_for(docs: list[Any], change: Change) -> Suggestion | None:
    """A :class:`Suggestion` when ``change`` created a key next to a similar one, else None.

    ``docs`` are the file's documents *after* the change (the created key is in them; it is
    not its own sibling). Keys created by the change below the first one have no siblings.
    """
    if not change.created:
        return None
    steps: tuple[Step, ...] = change.path.steps
    first = len(steps) - change.created
    key = steps[first]
    if not isinstance(key, str) or not (0 <= change.document < len(docs)):
        return None
    parent = _walk(docs[change.document], steps[:first])
    if not isinstance(parent, Mapping):
        return None
    similar = similar_keys(key, parent.keys())
    if not similar:
        return None
    label = change.rule if change.sub.field == "path" else f"{change.rule}.{change.sub.field}"
    suggested = tuple(format_path((*steps[:first], k, *steps[first + 1 :])) for k in similar)
    return Suggestion(
        label, change.sub.file, change.document, format_path(steps), key, similar, suggested
    )


def suggestions(docs: list[Any], changes: Iterable[Change]) -> tuple[Suggestion, ...]:
    """Every :func:`suggestion_for` of ``changes`` on one file (``docs`` after all of them)."""
    out = []
    for change in itertools.islice(
        (c for c in changes if c.created), budgets.current().suggestion_keys
    ):
        s = suggestion_for(docs, change)
        if s is not None:
            out.append(s)
    return tuple(out)


def _walk(node: Any, steps: tuple[Step, ...]) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return None
            node = node[step]
        else:
            if not isinstance(node, Mapping) or step not in node:
                return None
            node = node[step]
    return node


__all__ = [
    "Suggestion",
    "did_you_mean",
    "edit_distance",
    "similar_keys",
    "suggestion_for",
    "suggestions",
]
