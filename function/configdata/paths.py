r"""yq-style paths: the only path language ConfigData rules speak.

Upstream evaluated ``"." + path + " |= $value"`` with yq, so rule paths are yq paths. We
accept the subset that addresses a single node, which is all a substitution can mean:

* keys: ``spec.replicas``, with an optional leading dot;
* list indexes: ``containers[0]`` (non-negative; yq's negative indexes are refused);
* quoted keys for anything else: ``metadata.annotations["a.b/c"]``, ``.["x.y"]``,
  ``a."b.c"`` (double quotes; ``\\"`` and ``\\\\`` escape inside them).

Plain keys are letters, digits, ``_`` and ``-``. Anything else (wildcards, pipes, selectors,
functions) is an :class:`InvalidConfigData` naming the rule, never a guess. ``format_path``
writes the canonical form, which ``parse_path`` reads back to the same steps.

Getting and setting work on plain dicts/lists and on ruamel's round-trip containers alike.
Setting creates a missing *map key* (as yq did); it never invents list entries and never
steps into a scalar.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping, MutableSequence
from dataclasses import dataclass
from typing import Any

from function.errors import InvalidConfigData

Step = str | int
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
MAX_PATH = 1024


@dataclass(frozen=True)
class Path:
    """A parsed rule path: map keys (str) and list indexes (int), in order.

    Parsed once (:func:`parse_path`) so that every applier walks the same steps, and printed
    back in canonical yq form for messages.
    """

    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return format_path(self.steps)

    def __len__(self) -> int:
        return len(self.steps)


def _quote(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_path(steps: tuple[Step, ...] | list[Step]) -> str:
    """The canonical yq text for ``steps`` (no leading dot, quoted keys only when needed)."""
    out: list[str] = []
    for s in steps:
        if isinstance(s, int):
            out.append(f"[{s}]")
        elif _PLAIN.fullmatch(s):
            out.append(("." if out else "") + s)
        else:
            out.append(f"[{_quote(s)}]")
    return "".join(out) or "."


def _read_quoted(text: str, i: int, where: str) -> tuple[str, int]:
    """A double-quoted key starting at ``text[i] == '"'``.

    Returns (key, index after the closing quote).
    """
    buf: list[str] = []
    i += 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 < len(text) and text[i + 1] in '"\\':
                buf.append(text[i + 1])
                i += 2
                continue
            raise InvalidConfigData(
                where, f'path {text!r}: only \\" and \\\\ escapes are allowed in quoted keys'
            )
        if c == '"':
            return "".join(buf), i + 1
        buf.append(c)
        i += 1
    raise InvalidConfigData(where, f"path {text!r}: unterminated quoted key")


def parse_path(text: Any, *, where: str = "") -> Path:
    """Parse a rule path; any text outside the supported subset is an :class:`InvalidConfigData`."""
    if not isinstance(text, str):
        raise InvalidConfigData(where, f"path must be a string, got {type(text).__name__}")
    if len(text) > MAX_PATH:
        raise InvalidConfigData(where, f"path is longer than {MAX_PATH} characters")
    shown = text if len(text) <= 120 else text[:117] + "..."
    if text.strip() != text or not text:
        raise InvalidConfigData(where, f"path {shown!r} is empty or has surrounding whitespace")
    steps: list[Step] = []
    i = 0
    n = len(text)
    if text.startswith("."):
        i = 1
        if n == 1:
            raise InvalidConfigData(where, "path '.' addresses the whole document; name a field")
    need_key = True  # at start or just after a '.'
    while i < n:
        c = text[i]
        if c == "[":
            close = text.find("]", i)
            if i + 1 < n and text[i + 1] == '"':
                key, j = _read_quoted(text, i + 1, where)
                if j >= n or text[j] != "]":
                    raise InvalidConfigData(where, f"path {shown!r}: expected ']' after quoted key")
                steps.append(key)
                i = j + 1
            elif close > i + 1 and text[i + 1 : close].isdigit() and text[i + 1 : close].isascii():
                steps.append(int(text[i + 1 : close]))
                i = close + 1
            else:
                raise InvalidConfigData(
                    where,
                    f"path {shown!r}: unsupported selector at offset {i} "
                    '(only [N] list indexes and ["key"] are supported)',
                )
            need_key = False
        elif c == ".":
            if need_key:
                raise InvalidConfigData(where, f"path {shown!r}: empty key at offset {i}")
            i += 1
            need_key = True
            if i >= n:
                raise InvalidConfigData(where, f"path {shown!r} ends with '.'")
            continue
        elif c == '"':
            if not need_key:
                raise InvalidConfigData(
                    where, f"path {shown!r}: missing '.' before quoted key at offset {i}"
                )
            key, i = _read_quoted(text, i, where)
            steps.append(key)
            need_key = False
        else:
            m = _PLAIN.match(text, i)
            if not m:
                raise InvalidConfigData(
                    where,
                    f"path {shown!r}: unsupported character {c!r} at offset {i} "
                    '(quote keys with other characters: ["a.b/c"]; yq operators are not supported)',
                )
            if not need_key:
                raise InvalidConfigData(
                    where, f"path {shown!r}: missing '.' before key at offset {i}"
                )
            steps.append(m.group(0))
            i = m.end()
            need_key = False
    if not steps:
        raise InvalidConfigData(where, f"path {shown!r} names no field")
    return Path(tuple(steps))


class PathMiss(Exception):
    """Internal: why a path does not resolve in one document (the caller adds rule and file)."""

    def __init__(self, message: str, depth: int) -> None:
        super().__init__(message)
        self.depth = depth


@dataclass(frozen=True)
class Reach:
    """How far a path reaches into one document.

    ``existing`` is how many leading steps exist. ``exact`` when all do; otherwise the
    remaining steps are all map keys under an existing map (so they can be created).
    """

    existing: int
    total: int

    @property
    def exact(self) -> bool:
        """Whether every step exists (the path replaces a value, creating nothing)."""
        return self.existing == self.total

    @property
    def missing(self) -> int:
        """How many trailing map keys setting the path would create."""
        return self.total - self.existing


def reach(doc: Any, path: Path) -> Reach:
    """How much of ``path`` exists in ``doc``; raises :class:`PathMiss` when it cannot be set
    there.
    """
    node = doc
    for depth, step in enumerate(path.steps):
        here = format_path(path.steps[:depth]) if depth else "the document root"
        if isinstance(step, int):
            if not isinstance(node, MutableSequence):
                kind = "a map" if isinstance(node, MutableMapping) else f"a scalar ({_kind(node)})"
                raise PathMiss(f"index [{step}] applied to {here}, which is {kind}", depth)
            if step >= len(node):
                raise PathMiss(
                    f"index [{step}] is out of range: {here} has {len(node)} entries", depth
                )
            node = node[step]
        else:
            if not isinstance(node, MutableMapping):
                kind = (
                    "a list" if isinstance(node, MutableSequence) else f"a scalar ({_kind(node)})"
                )
                raise PathMiss(f"key {step!r} applied to {here}, which is {kind}", depth)
            if step not in node:
                rest = path.steps[depth:]
                if any(isinstance(s, int) for s in rest):
                    raise PathMiss(
                        f"key {step!r} is missing under {here} and the rest of the path indexes "
                        "a list, "
                        "which cannot be created",
                        depth,
                    )
                return Reach(depth, len(path.steps))
            node = node[step]
    return Reach(len(path.steps), len(path.steps))


def _kind(node: Any) -> str:
    return "null" if node is None else type(node).__name__


def get(doc: Any, path: Path, default: Any = None) -> Any:
    """The value at ``path`` in ``doc``, or ``default`` where the path does not lead anywhere.

    Never raises: callers use it for the old value of a trace and for what a Helm list holds,
    where a missing path is an answer, not an error.
    """
    node = doc
    for step in path.steps:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return default
    return node


def dotted(text: str) -> Path:
    """A path an ops policy spells with dots only (``global.imagePullSecrets``): every segment a
    map key, empty segments skipped, no quoting (policy paths are not yq text).
    """
    return Path(tuple(p for p in text.split(".") if p))


def set_value(
    doc: Any, path: Path, value: Any, *, make_map: Any = dict, clear: bool = False
) -> tuple[Any, int]:
    """Write ``value`` at ``path``; returns (old value or None, number of keys created).

    Raises :class:`PathMiss` when the path cannot be set (see :func:`reach`). With ``clear``
    (a value the policy places, such as the Helm pull secrets, where no tenant content is to
    be respected), whatever is in the way of a map key (a scalar, a list) is replaced by a new
    map instead; ``path`` must then name map keys only.
    """
    if clear:
        return _set_clearing(doc, path, value, make_map)
    r = reach(doc, path)
    node = doc
    for step in path.steps[:-1]:
        if isinstance(step, str) and step not in node:
            node[step] = make_map()
        node = node[step]
    last = path.steps[-1]
    old = get(doc, path) if r.exact else None
    node[last] = value
    return old, r.missing


def _set_clearing(doc: Any, path: Path, value: Any, make_map: Any) -> tuple[Any, int]:
    node, created = doc, 0
    for step in path.steps[:-1]:
        nxt = node.get(step)
        if not isinstance(nxt, MutableMapping):
            nxt = make_map()
            node[step] = nxt
            created += 1
        node = nxt
    last = path.steps[-1]
    old = node.get(last)
    created += last not in node
    node[last] = value
    return old, created
