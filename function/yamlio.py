"""Loading YAML from people we do not trust, without letting it eat the process.

Claims, ConfigData files, values and manifests all arrive as YAML written by service teams.
A "billion laughs" document is a few hundred bytes that expands to gigabytes once aliases
are followed (which converting to JSON or a protobuf Struct does). So every load here
caps the input size and the *expanded* node count, and refuses with a message naming the
file instead of expanding.

Parsing itself is bounded too (issue 31): libyaml's parser feeds :class:`Composer`, which
counts nodes and nesting as it composes, refuses any tag but the core ones wherever it
stands, numbers Kubernetes cannot hold, and records duplicate keys with both lines; every
refusal names the file, line and column.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.tag import Tag

from function import budgets
from function.cache import Memos, copied_memo, digest
from function.errors import SackError

try:  # libyaml's scanner and parser (ruamel.yaml.clib): the pure-Python one costs ~5 us a byte
    from _ruamel_yaml import CParser as _CParser
except ImportError:  # pragma: no cover - the wheel exists for every platform the image uses
    _CParser = None

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 50_000  # the default of the yaml-nodes budget (function/budgets.py)
MAX_DEPTH = 64
MAX_EXPANDED_TEXT = 4 * 1024 * 1024  # no more text than the largest document without aliases
_SURROGATE = re.compile("[\ud800-\udfff]")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_CORE = "tag:yaml.org,2002:"
# Explicit tags a document may carry; anything else (``!!python/...``, ``!foo``, ``!!set``) is
# refused wherever it stands: a scalar, a sequence, a map or a key.
SCALAR_TAGS = frozenset(_CORE + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
_COLLECTION_TAGS = {SequenceNode: _CORE + "seq", MappingNode: _CORE + "map"}
_KIND = {ScalarNode: "scalar", SequenceNode: "sequence", MappingNode: "map"}


class YamlError(SackError):
    reason = "InvalidYAML"


def _safe() -> YAML:
    y = YAML(typ="safe", pure=True)
    return y


# A document libyaml refuses may still be YAML 1.2 (libyaml reads 1.1 syntax: ``{a: 0:0}``);
# the pure-Python parser reads it again, but only this much of it (~1 s of CPU).
PURE_MAX_BYTES = 128 * 1024


def _events(text: str, *, pure: bool = False) -> Any:
    if pure or _CParser is None:
        yield from _safe().parse(io.StringIO(text))
        return
    parser = _CParser(text)
    while True:
        event = parser.get_event()
        yield event
        if isinstance(event, StreamEndEvent):
            return


def _line(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"


def number_problem(text: str, kind: str, base: int = 10) -> str | None:
    """Why ``text`` (a scalar typed int or float) cannot be held by the Go/Kubernetes side, or None.

    Kubernetes decodes integers into int64 and other numbers into float64; Python's ``int()``
    refuses more than 4,300 digits with a ValueError. Checked on the text, so the cost is the
    scalar's length whatever the value.
    """
    body = text.replace("_", "").lstrip("+-")
    if kind == "int":
        if body[:2].lower() in ("0x", "0o", "0b"):
            base, body = {"x": 16, "o": 8, "b": 2}[body[1].lower()], body[2:]
        digits = body.lstrip("0")
        try:
            too_big = len(digits) > 64 or not (
                INT64_MIN <= int(digits or "0", base) * (-1 if text[:1] == "-" else 1) <= INT64_MAX
            )
        except ValueError:
            return None  # not an integer after all: the constructor says so
        if too_big:
            return (
                f"the integer {text[:24]}{'...' if len(text) > 24 else ''} ({len(digits)} digits) "
                "is outside the 64-bit range Kubernetes holds (quote it if a string is meant)"
            )
        return None
    if body.lower() in ("inf", ".inf", "nan", ".nan"):
        return None
    try:
        value = float(body)
    except ValueError:
        return None
    if value in (float("inf"), float("-inf")):
        return (
            f"the number {text[:24]}{'...' if len(text) > 24 else ''} is beyond a 64-bit float "
            "(quote it if a string is meant)"
        )
    return None


@dataclass(frozen=True)
class Duplicate:
    """A map key written twice in one map (the later value wins, as go-yaml's decoder does)."""

    key: str
    first: int  # 1-based lines
    second: int

    def describe(self) -> str:
        return (
            f"the key {self.key[:60]!r} is defined twice in one map "
            f"(lines {self.first} and {self.second})"
        )


class Composer:
    """YAML events to nodes, under the node and depth caps *while* parsing.

    ruamel's composer builds the whole node graph before anything can look at it, so a
    document under the byte cap could cost seconds and hundreds of MB before the node cap
    refused it. Here every node is counted as it is composed, nesting is an explicit stack
    (no RecursionError), explicit tags are checked where they stand and duplicate keys are
    recorded with both lines. ``resolver`` types plain scalars (YAML 1.2 core, or the
    deferred typing of :mod:`function.yaml11`).
    """

    def __init__(
        self,
        where: str,
        resolver: Any,
        *,
        max_nodes: int | None = None,
        max_depth: int = MAX_DEPTH,
        scalar_tags: frozenset[str] = SCALAR_TAGS,
        check_numbers: bool = True,
    ) -> None:
        self.where = where
        self.resolver = resolver
        self.max_nodes = budgets.current().yaml_nodes if max_nodes is None else max_nodes
        self.max_depth = max_depth
        self.scalar_tags = scalar_tags
        self.check_numbers = check_numbers
        self.duplicates: list[Duplicate] = []

    def fail(self, mark: Any, message: str) -> YamlError:
        return YamlError(self.where, f"{_line(mark)}: {message}")

    def _tag(self, event: Any, kind: type[Node], value: Any) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            return self.resolver.resolve(kind, value, event.implicit)
        tag = str(tag)
        allowed = self.scalar_tags if kind is ScalarNode else {_COLLECTION_TAGS[kind]}
        if tag not in allowed:
            raise self.fail(
                event.start_mark,
                f"the YAML tag {str(tag)[:60]} is not supported (on a {_KIND[kind]}; only the "
                "core tags !!str, !!int, !!float, !!bool, !!null, !!map and !!seq are)",
            )
        return tag_of(tag)

    def compose_all(self, text: str) -> list[Node | None]:
        try:
            return self._compose_all(text, pure=False)
        except YAMLError:
            if _CParser is None or len(text) > PURE_MAX_BYTES:
                raise
        self.duplicates = []
        return self._compose_all(text, pure=True)

    def _compose_all(self, text: str, *, pure: bool) -> list[Node | None]:
        docs: list[Node | None] = []
        anchors: dict[str, Node] = {}
        stack: list[list[Any]] = []  # [node, pending key node or None, {key: line}]
        root: Node | None = None
        count = 0
        for event in _events(text, pure=pure):
            if isinstance(event, DocumentStartEvent):
                anchors, root = {}, None
                continue
            if isinstance(event, DocumentEndEvent):
                docs.append(root)
                continue
            if isinstance(event, AliasEvent):
                node = anchors.get(event.anchor)
                if node is None:
                    raise self.fail(event.start_mark, f"found undefined alias {event.anchor!r}")
            elif isinstance(event, ScalarEvent):
                count += 1
                if not count & 4095:
                    budgets.check_cpu()
                tag = self._tag(event, ScalarNode, event.value)
                if self.check_numbers and tag in (_CORE + "int", _CORE + "float"):
                    problem = number_problem(event.value, str(tag).rsplit(":", 1)[-1])
                    if problem:
                        raise self.fail(event.start_mark, problem)
                node = ScalarNode(
                    tag,
                    event.value,
                    event.start_mark,
                    event.end_mark,
                    style=event.style or None,
                    anchor=event.anchor,
                )
            elif isinstance(event, SequenceStartEvent | MappingStartEvent):
                count += 1
                if count > self.max_nodes:
                    raise self.fail(
                        event.start_mark,
                        f"document has more than {self.max_nodes} nodes (the yaml-nodes budget)",
                    )
                if len(stack) >= self.max_depth:
                    raise YamlError(self.where, f"nests deeper than {self.max_depth} levels")
                kind = SequenceNode if isinstance(event, SequenceStartEvent) else MappingNode
                node = kind(
                    self._tag(event, kind, None),
                    [],
                    event.start_mark,
                    None,
                    flow_style=event.flow_style,
                    anchor=event.anchor,
                )
                if event.anchor is not None:
                    anchors[event.anchor] = node
                stack.append([node, None, {}])
                continue
            elif isinstance(event, SequenceEndEvent | MappingEndEvent):
                node = stack.pop()[0]
                node.end_mark = event.end_mark
            else:
                continue  # stream start and end
            if count > self.max_nodes:
                raise self.fail(
                    event.start_mark,
                    f"document has more than {self.max_nodes} nodes (the yaml-nodes budget)",
                )
            if isinstance(event, ScalarEvent) and event.anchor is not None:
                anchors[event.anchor] = node
            if not stack:
                root = node
                continue
            frame = stack[-1]
            parent = frame[0]
            if isinstance(parent, SequenceNode):
                parent.value.append(node)
            elif frame[1] is None:
                frame[1] = node
            else:
                key = frame[1]
                frame[1] = None
                parent.value.append((key, node))
                if isinstance(key, ScalarNode) and not str(key.tag).endswith(":merge"):
                    line = key.start_mark.line + 1
                    seen = frame[2]
                    if key.value in seen:
                        self.duplicates.append(Duplicate(key.value, seen[key.value], line))
                    else:
                        seen[key.value] = line
        return docs


def check_expansion(
    data: Any,
    where: str,
    *,
    max_nodes: int | None = None,
    max_depth: int = MAX_DEPTH,
    max_text: int = MAX_EXPANDED_TEXT,
) -> bool:
    """Walk ``data`` as it would be expanded and refuse past the node, depth or text budget.

    Aliases are walked every time they are used, so a small document whose anchors are
    repeated (a "huge anchor" bomb: one 100 KB string referenced 1,000 times) is measured
    at its expanded size. Returns whether some string holds UTF-16 surrogates (JSON's
    ``\ud83d\ude00`` escapes), which :func:`_fix_surrogates` then repairs.
    """
    max_nodes = budgets.current().yaml_nodes if max_nodes is None else max_nodes
    count = 0
    text = 0
    surrogates = False
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if not count & 4095:
            budgets.check_cpu()
        if count > max_nodes:
            raise YamlError(
                where, f"document expands to more than {max_nodes} nodes (YAML alias bomb?)"
            )
        if depth > max_depth:
            raise YamlError(where, f"document nests deeper than {max_depth} levels")
        if isinstance(node, str):
            text += len(node)
            if text > max_text:
                raise YamlError(
                    where,
                    f"document expands to more than {max_text} characters of text (YAML alias "
                    "bomb?)",
                )
            if not surrogates and not node.isascii():
                surrogates = _SURROGATE.search(node) is not None
        elif isinstance(node, dict):
            for k, v in node.items():
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return surrogates


def _fix_surrogates(node: Any, where: str) -> Any:
    """Join surrogate pairs into the characters they encode; refuse a lone surrogate."""
    if isinstance(node, str):
        if _SURROGATE.search(node) is None:
            return node
        try:
            return node.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeError:
            raise YamlError(
                where,
                "holds a lone UTF-16 surrogate escape (\\uD800-\\uDFFF) that encodes no character",
            ) from None
    if isinstance(node, dict):
        return {_fix_surrogates(k, where): _fix_surrogates(v, where) for k, v in node.items()}
    if isinstance(node, list):
        return [_fix_surrogates(v, where) for v in node]
    return node


def _to_text(data: bytes | str, where: str, max_bytes: int) -> str:
    if len(data) > max_bytes:
        raise YamlError(where, f"is {len(data)} bytes, more than the {max_bytes} byte limit")
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise YamlError(where, f"is not UTF-8 text (byte {e.start})") from None
    return data


def load_all(
    data: bytes | str, where: str, *, max_bytes: int = MAX_BYTES, memos: Memos | None = None
) -> list[Any]:
    """Every document of a YAML stream as plain Python data (empty documents dropped).

    Parsing is pure-Python (ruamel's YAML 1.2 safe loader), so a parsed stream is memoised
    by the SHA-256 of its bytes in ``memos`` (:mod:`function.cache`, the edge's tables);
    every caller gets its own copy. Only valid streams are kept: an invalid one is parsed,
    and refused, every time.
    """
    if len(data) > max_bytes:
        _to_text(data, where, max_bytes)  # raises, naming the file
    return copied_memo(
        "yaml_docs", (digest(data), max_bytes), lambda: _load_all(data, where, max_bytes), memos
    )


def syntax_error(where: str, e: YAMLError) -> YamlError:
    """One error for a YAML parse failure: where, the line and column, and ruamel's problem."""
    mark = getattr(e, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or type(e).__name__
    return YamlError(where, f"is not valid YAML{at}: {problem}")


_TAGS: dict[str, Tag] = {}


def tag_of(text: str) -> Tag:
    """One shared :class:`Tag` per tag text: a Tag decodes its text on first use and keeps it,
    so sharing saves the decoding per scalar (half of ruamel's per-node cost).
    """
    tag = _TAGS.get(text)
    if tag is None:
        tag = _TAGS[text] = Tag(suffix=text)
    return tag


class FastResolver:
    """ruamel's implicit typing of plain scalars (the rules of ``base``) without its per-call
    version lookups; ``plain`` instead tags every plain scalar with that tag.
    """

    def __init__(self, base: VersionedResolver, plain: str | None = None) -> None:
        self.table = base.versioned_resolver
        self.plain = None if plain is None else tag_of(plain)
        self.kinds = {
            ScalarNode: tag_of(_CORE + "str"),
            SequenceNode: tag_of(_CORE + "seq"),
            MappingNode: tag_of(_CORE + "map"),
        }

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Tag:
        if kind is ScalarNode and implicit[0]:
            if self.plain is not None:
                return self.plain
            for tag, regexp in self.table.get(value[0] if value else "", ()):
                if regexp.match(value):
                    return tag_of(tag)
            for tag, regexp in self.table.get(None, ()):
                if regexp.match(value):  # pragma: no cover - no catch-all rule in the core schema
                    return tag_of(tag)
        return self.kinds[kind]


_R12 = FastResolver(VersionedResolver(version=(1, 2)))


def compose_all(
    text: str, where: str, resolver: Any = _R12, **kw: Any
) -> tuple[list[Any], Composer]:
    """Every document's node (None for an empty one), composed under the caps."""
    composer = Composer(where, resolver, **kw)
    try:
        return composer.compose_all(text), composer
    except YAMLError as e:
        raise syntax_error(where, e) from None


def _load_all(data: bytes | str, where: str, max_bytes: int) -> list[Any]:
    text = _to_text(data, where, max_bytes)
    nodes, composer = compose_all(text, where)
    if composer.duplicates:
        raise YamlError(where, "; ".join(d.describe() for d in composer.duplicates[:3]))
    constructor = _safe().constructor
    try:
        docs = [constructor.construct_document(n) for n in nodes if n is not None]
        docs = [d for d in docs if d is not None]
    except YAMLError as e:
        raise syntax_error(where, e) from None
    except RecursionError:
        raise YamlError(where, f"nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError, OverflowError) as e:
        # ruamel raises plain ValueErrors for some scalars (e.g. `._` read as a float).
        raise YamlError(where, f"is not valid YAML: {type(e).__name__} reading a scalar") from None
    for i, d in enumerate(docs):
        if check_expansion(d, where):
            docs[i] = _fix_surrogates(d, where)
    return docs


def load_one(
    data: bytes | str, where: str, *, max_bytes: int = MAX_BYTES, memos: Memos | None = None
) -> Any:
    """Exactly one YAML document (JSON is YAML too)."""
    docs = load_all(data, where, max_bytes=max_bytes, memos=memos)
    if len(docs) != 1:
        raise YamlError(where, f"must hold exactly one YAML document, found {len(docs)}")
    return docs[0]
