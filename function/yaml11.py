"""YAML 1.1, the YAML Kubernetes tools read: typing plain scalars as they do, and quoting so
they read back what we wrote.

The function parses YAML 1.2 (ruamel), but what reads our output does not: Helm, kubectl and
everything on ``sigs.k8s.io/yaml`` use go-yaml v2, a YAML 1.1 reader, for which a plain
``no`` is ``false``, ``on`` is ``true``, ``0777`` is 511 and ``1_000`` is 1000; PyYAML adds
sexagesimal ``1:20`` (80) and dates. Two consequences:

* :func:`needs_quotes` says which strings must be written quoted so that *every* reader, 1.1
  or 1.2, reads the same string back. Every YAML writer of the function and the CLI uses it for
  the values it writes (it never restyles what a file's author wrote).
* :func:`load_v1` reads a ConfigData as ocm-controller v1 did (sigs.k8s.io/yaml → go-yaml
  v2.4.2 ``resolve.go``): a plain ``y`` in its defaults is ``true`` (probe P10). It also
  reports every plain scalar that a YAML 1.2 reader would type differently, so the author
  learns about it instead of finding out from a diff.

go-yaml v2's rules are written out in :func:`goyaml_v2` (map lookup for booleans, nulls and
special floats; ``strconv.ParseInt(s, 0, 64)`` after dropping ``_``; its float pattern;
timestamps stay strings; no base 60); the other readers are ruamel's 1.1 and 1.2 resolvers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver

from function.yamlio import (
    MAX_BYTES,
    SCALAR_TAGS,
    Duplicate,
    FastResolver,
    YamlError,
    _fix_surrogates,
    _line,
    _to_text,
    check_expansion,
    compose_all,
    number_problem,
)

_GO_MAP: dict[str, Any] = {
    **dict.fromkeys(
        ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True
    ),
    **dict.fromkeys(
        ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False
    ),
    **dict.fromkeys(("", "~", "null", "Null", "NULL")),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_GO_INT = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")
_CORE_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_CORE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_CORE_SPECIAL = {
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys(("", "~", "null", "Null", "NULL")),
    **dict.fromkeys(("true", "True", "TRUE"), True),
    **dict.fromkeys(("false", "False", "FALSE"), False),
}
_R11 = VersionedResolver(version=(1, 1))
_R12 = VersionedResolver(version=(1, 2))
_STR = "tag:yaml.org,2002:str"
PLAIN = "tag:sack8s.io,2025:plain"
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


def _go_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 0, 64)`` (or ParseUint) on text without underscores."""
    if not _GO_INT.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-")
    if len(body.lstrip("0")) > 66:  # past uint64 in any base (and Python's int-string limit)
        return None
    if len(body) > 1 and body[0] == "0" and body[1] in "xXoObB":
        value = int(body[2:], {"x": 16, "o": 8, "b": 2}[body[1].lower()])
    elif len(body) > 1 and body[0] == "0":
        value = int(body, 8)
    else:
        value = int(body)
    value *= sign
    return value if INT64_MIN <= value <= UINT64_MAX else None


def goyaml_v2(text: str) -> Any:
    """The value go-yaml v2 gives a plain scalar decoded into ``interface{}``."""
    if text in _GO_MAP:
        return _GO_MAP[text]
    hint = text[0]
    if hint == ".":
        return float(text) if _GO_DOT_FLOAT.fullmatch(text) else text
    if hint in "+-0123456789":
        # A timestamp is resolved, but decoded into interface{} as its text (decode.go).
        plain = text.replace("_", "")
        value = _go_int(plain)
        if value is not None:
            return value
        if _GO_FLOAT.fullmatch(plain):
            return float(plain)
    return text


def core_12(text: str) -> Any:
    """The value the YAML 1.2 core schema gives a plain scalar."""
    if text in _CORE_SPECIAL:
        return _CORE_SPECIAL[text]
    if _CORE_INT.fullmatch(text):
        if text.startswith(("0o", "0x")):
            return int(text[2:], 8 if text[1] == "o" else 16)
        return int(text)
    if _CORE_FLOAT.fullmatch(text):
        return float(text)
    return text


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def needs_quotes(s: str) -> bool:
    """Would any YAML 1.1 or 1.2 reader take the plain scalar ``s`` for something else than
    the string ``s``? Then it must be written quoted.
    """
    if s in ("=", "<<") or not s:
        return True
    if not _same(goyaml_v2(s), s) or not _same(core_12(s), s):
        return True
    for r in (_R11, _R12):
        if str(r.resolve(ScalarNode, s, (True, False))) != _STR:
            return True
    return False


# --------------------------------------------------------------------------- reading as v1 did


@dataclass(frozen=True)
class Retyped:
    """A plain scalar that go-yaml v2 (YAML 1.1) and YAML 1.2 read differently."""

    path: str
    text: str
    v1: Any  # what upstream (and this product) uses
    v12: Any  # what a YAML 1.2 reader sees


def _key_text(key: Any) -> Any:
    """sigs.k8s.io/yaml turns non-string map keys into JSON object keys (strings)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key) if not isinstance(key, float) or not key.is_integer() else str(int(key))
    return key


def _fmt(path: str, step: Any) -> str:
    if isinstance(step, int):
        return f"{path}[{step}]"
    return f"{path}.{step}" if path else str(step)


class _Builder:
    def __init__(self, where: str) -> None:
        self.where = where
        self.retyped: list[Retyped] = []
        self.memo: dict[int, Any] = {}

    def build(self, node: Any, path: str) -> Any:
        if id(node) in self.memo:  # an alias: the same object, as the YAML says
            return self.memo[id(node)]
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if isinstance(node, SequenceNode):
            out: list[Any] = []
            self.memo[id(node)] = out
            out.extend(self.build(item, _fmt(path, i)) for i, item in enumerate(node.value))
            return out
        if isinstance(node, MappingNode):
            m: dict[Any, Any] = {}
            self.memo[id(node)] = m
            merged: dict[Any, Any] = {}
            for knode, vnode in node.value:
                if (
                    isinstance(knode, ScalarNode)
                    and str(knode.tag) in (PLAIN, "tag:yaml.org,2002:merge")
                    and knode.value == "<<"
                    and knode.style is None
                ):
                    sources = vnode.value if isinstance(vnode, SequenceNode) else [vnode]
                    for src in sources:
                        value = self.build(src, path)
                        if not isinstance(value, dict):
                            raise YamlError(
                                self.where, f"{path or '(top level)'}: a << merge needs maps"
                            )
                        for k, v in value.items():
                            merged.setdefault(k, v)  # earlier sources win (YAML merge key)
                    continue
                key = _key_text(self.build(knode, path))
                if isinstance(key, list | dict):
                    raise YamlError(
                        self.where,
                        f"{path or '(top level)'}: a map key must be a scalar, not a "
                        f"{type(key).__name__}",
                    )
                m[key] = self.build(vnode, _fmt(path, key))
            for k, v in merged.items():
                m.setdefault(k, v)
            return m
        raise YamlError(self.where, f"{path}: unsupported YAML node")  # pragma: no cover

    def check_number(self, node: ScalarNode, text: str) -> None:
        """Numbers go-yaml would read past int64/float64 (or give up on) are refused by line."""
        plain = text.replace("_", "")
        if not plain or plain[0] not in "+-.0123456789":
            return
        if _GO_INT.fullmatch(plain):
            body = plain.lstrip("+-")
            octal = len(body) > 1 and body[0] == "0" and body[1] not in "xXoObB"
            problem = number_problem(plain, "int", 8 if octal else 10)
        elif _GO_FLOAT.fullmatch(plain):
            problem = number_problem(plain, "float")
        else:
            return
        if problem:
            raise YamlError(self.where, f"{_line(node.start_mark)}: {problem}")

    def scalar(self, node: ScalarNode, path: str) -> Any:
        tag = str(node.tag)
        text = node.value
        if tag == PLAIN:
            self.check_number(node, text)
            v1 = goyaml_v2(text)
            v12 = core_12(text)
            if not _same(v1, v12):
                self.retyped.append(Retyped(path or "(top level)", text, v1, v12))
            return v1
        if tag == _STR:
            return text
        short = tag.rsplit(":", 1)[-1]
        if short in ("int", "float", "bool", "null"):
            self.check_number(node, text)
            value = goyaml_v2(text)
            ok = {
                "int": isinstance(value, int) and not isinstance(value, bool),
                "bool": isinstance(value, bool),
                "null": value is None,
                "float": isinstance(value, int | float) and not isinstance(value, bool),
            }
            if not ok[short]:
                raise YamlError(self.where, f"{path}: cannot decode {text[:40]!r} as !!{short}")
            return float(value) if short == "float" else value
        if short in ("timestamp", "binary"):
            return text
        raise YamlError(
            self.where, f"{path or '(top level)'}: the YAML tag {tag[:60]} is not supported"
        )


@dataclass(frozen=True)
class V1Document:
    value: Any
    retyped: tuple[Retyped, ...]
    duplicates: tuple[Duplicate, ...]  # keys written twice in a map: the later value is used


_V1_TAGS = SCALAR_TAGS | {"tag:yaml.org,2002:binary"}
# Every plain scalar is left untyped (tag PLAIN) so :class:`_Builder` types it as go-yaml v2 does.
_V1_RESOLVER = FastResolver(VersionedResolver(version=(1, 2)), plain=PLAIN)


def read_v1(data: bytes | str, where: str) -> V1Document:
    """One YAML document read as ocm-controller v1 read ConfigData (go-yaml v2, YAML 1.1),
    with the plain scalars a YAML 1.2 reader types differently and the duplicate keys
    (go-yaml v2's Unmarshal keeps the last). One parse, under :mod:`function.yamlio`'s caps
    and messages (size, UTF-8, nodes and depth while parsing, tags, alias expansion).
    """
    text = _to_text(data, where, MAX_BYTES)
    nodes, composer = compose_all(
        text, where, _V1_RESOLVER, scalar_tags=_V1_TAGS, check_numbers=False
    )
    b = _Builder(where)
    docs = [b.build(n, "") for n in nodes if n is not None]
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise YamlError(where, f"must hold exactly one YAML document, found {len(docs)}")
    value = docs[0]
    if check_expansion(value, where):
        value = _fix_surrogates(value, where)
    return V1Document(value, tuple(b.retyped), tuple(composer.duplicates))


def load_v1(data: bytes | str, where: str) -> tuple[Any, tuple[Retyped, ...]]:
    """:func:`read_v1`'s value and retyped scalars."""
    doc = read_v1(data, where)
    return doc.value, doc.retyped


__all__ = [
    "PLAIN",
    "Retyped",
    "V1Document",
    "core_12",
    "goyaml_v2",
    "load_v1",
    "needs_quotes",
    "read_v1",
]
