"""Substitutions: the engine's only output, and how they land in one file's documents.

Planning (localize/configure) knows rules, values and the component but no files; it yields
:class:`Substitution` s. Resolving pins each one to exactly one document of the target file
and records the old value: a :class:`Change`. Appliers (YAML file, Helm values, Kustomize
patches) consume changes, so every applier reports the same trace.

Multi-document rule (documented in docs/configdata.md): a path *resolves* in a document when
all its steps exist there (exact), or when only trailing map keys are missing under an
existing map (creatable, as yq created them). Exact matches win over creatable ones; among
creatable ones, the document where the most steps exist wins. Two documents at the same
best level is an ambiguity error, never a guess. A single-document file takes the path if
it resolves there at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from function.configdata.paths import Path, PathMiss, Reach, reach, set_value
from function.errors import InvalidConfigData

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Substitution:
    """One value to write at one path of one file, and the rule that asked for it.

    Planning yields these without knowing the files; ``warning`` reaches the user only if
    the substitution is applied (a rule for another deployable must not warn here).
    """

    rule: str  # "localization[0]" / "configuration.rules[2]"
    field: str  # "image", "tag", ..., or "path" for configuration rules
    file: str
    path: Path
    value: Any
    warning: str | None = None  # shown only if the substitution is applied

    @property
    def where(self) -> str:
        """How errors name this substitution: ConfigData, rule, field and file."""
        return f"ConfigData {self.rule}.{self.field} (file {self.file})"


@dataclass(frozen=True)
class Change:
    """One resolved substitution: which document, what was there, and how much was created."""

    sub: Substitution
    document: int
    old: Any
    created: int  # trailing map keys that did not exist and were created
    kind: str | None = None  # kind/name of the KRM object, for logs
    name: str | None = None

    # The substitution's fields, read through the change (alike by design).
    @property
    def rule(self) -> str:
        """The rule that asked for the change (``localization[0]``, ``configuration.rules[2]``)."""
        return self.sub.rule

    @property
    def path(self) -> Path:
        """Where in :attr:`document` the value was written."""
        return self.sub.path

    @property
    def value(self) -> Any:
        """What was written (the substitution's value)."""
        return self.sub.value


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def resolve_document(docs: list[Any], sub: Substitution) -> tuple[int, Reach]:
    """The one document index ``sub.path`` resolves in (see the module docstring)."""
    reaches: list[tuple[int, Reach]] = []
    misses: list[tuple[int, PathMiss]] = []
    for i, doc in enumerate(docs):
        try:
            reaches.append((i, reach(doc, sub.path)))
        except PathMiss as miss:
            misses.append((i, miss))
    path = str(sub.path)
    if not reaches:
        if not docs:
            raise InvalidConfigData(sub.where, f"path {path}: the file has no YAML document")
        if len(docs) == 1:
            raise InvalidConfigData(sub.where, f"path {path}: {misses[0][1]}")
        detail = "; ".join(f"document {i}: {m}" for i, m in misses[:4])
        raise InvalidConfigData(
            sub.where, f"path {path} resolves in none of the {len(docs)} documents ({detail})"
        )
    if len(docs) == 1:
        return reaches[0]
    exact = [(i, r) for i, r in reaches if r.exact]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        raise _ambiguous(sub, "exists in documents", exact)
    best = max(r.existing for _, r in reaches)
    top = [(i, r) for i, r in reaches if r.existing == best]
    if best == 0:
        raise InvalidConfigData(
            sub.where,
            f"path {path} exists in none of the {len(docs)} documents (not even its first key)",
        )
    if len(top) > 1:
        raise _ambiguous(sub, "is missing in every document and could be created in documents", top)
    return top[0]


def _ambiguous(
    sub: Substitution, how: str, candidates: list[tuple[int, Reach]]
) -> InvalidConfigData:
    """Two documents fit the path equally well: refuse, naming them, rather than guess."""
    idx = ", ".join(str(i) for i, _ in candidates)
    return InvalidConfigData(
        sub.where, f"path {sub.path} {how} {idx}: ambiguous; split the file or make the path unique"
    )


def _krm(doc: Any) -> tuple[str | None, str | None]:
    if isinstance(doc, dict):
        meta = doc.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        kind = doc.get("kind")
        return (kind if isinstance(kind, str) else None, name if isinstance(name, str) else None)
    return None, None


def apply_to_documents(docs: list[Any], sub: Substitution, *, make_map: Any = dict) -> Change:
    """Resolve ``sub`` in ``docs`` and write it there (the documents are working copies)."""
    index, _ = resolve_document(docs, sub)
    try:
        old, created = set_value(docs[index], sub.path, sub.value, make_map=make_map)
    except PathMiss as miss:  # pragma: no cover - resolve_document already checked
        raise InvalidConfigData(sub.where, f"path {sub.path}: {miss}") from None
    kind, name = _krm(docs[index])
    change = Change(sub, index, old, created, kind, name)
    if created:
        log.debug("created missing key(s): %s", describe(change))
    return change


def describe(change: Change) -> str:
    """One log line: rule, file, document, path, old -> new."""
    obj = f" ({change.kind}/{change.name})" if change.kind and change.name else ""
    created = " [created]" if change.created else ""
    label = change.rule if change.sub.field == "path" else f"{change.rule}.{change.sub.field}"
    return (
        f"{label}: {change.sub.file} document {change.document}{obj} "
        f"{change.path}: {_short(change.old)} -> {_short(change.value)}{created}"
    )
