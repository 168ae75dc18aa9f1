"""spiff++ (dynaml) expressions, the subset v1 ConfigData uses, evaluated as ocm-controller did.

ocm-controller v0.32.0 (``controllers/mutation_reconcile_looper.go`` ``generateSubstitutions``)
merged the values over ``configuration.defaults``, appended the rules as a list under the key
``ocmAdjustmentsTemplateKey`` and ran the whole document through spiff v1.7.0-beta-7 with the
``interpolation`` feature on. So every string in defaults, values and rule values that spiff
takes for an expression is evaluated, in its own place in that document. This module gives
the same results for what real ConfigData writes, and refuses everything else by name:

* **recognising** an expression (spiff ``yaml/node.go`` ``EmbeddedDynaml``,
  ``yaml/interpolation.go``): a string that starts with ``((`` and ends with ``))`` is one
  expression (``(( a )):(( b ))`` is a parse error there too); any other string with
  ``(( … ))`` inside is *interpolated*: text and expressions are joined into one concatenation
  (``tcp://(( host )):6379`` is ``"tcp://" host ":6379"``). ``((!…))`` escapes an expression.
* **grammar** (``dynaml/dynaml.peg``, precedence from loosest): ``||``; concatenation by
  juxtaposition; ``+ -``; ``* / %``; primaries: references (``a.b[0]``, ``.a`` from the root),
  ``"strings"`` (JSON escapes), integers, floats, ``true``/``false``, ``nil``/``~``, IP
  literals, ``( … )``. Operators need blanks on both sides (``a-1`` is the key ``a-1``, as in
  spiff). Everything else spiff has (functions, lambdas, ``merge``, conditionals,
  comparisons, ``-or``, ``//``, lists, maps, tags, markers, ``$symbols``, ``~~`` …) is refused
  with :class:`Unsupported` naming it.
* **references** are lexically scoped (``flow/environment.go`` ``FindReference``): the first
  name is looked up in the enclosing maps, innermost first, then the rest is followed from
  there without backtracking. A rule's own map (``name: subst-<i>``, ``file``, ``path``,
  ``value``) is the innermost scope of its value, so ``(( name ))`` in a rule is ``subst-0``
  and ``(( path ))`` the rule's path, exactly as upstream; the caller warns about it. On a
  list, ``[n]`` indexes and any other step selects the entry whose ``name`` equals it.
* **values** (``dynaml/concatenation.go``, ``addition.go`` …): concatenating strings, integers
  and booleans gives a string (a float or nil is an error); lists and maps concatenate;
  arithmetic keeps integers integral (division truncates, ``%`` is integers only); ``a || b``
  is ``b`` when evaluating ``a`` itself fails (a missing key, a type error), but an error in a
  node that ``a`` refers to fails the whole evaluation, as spiff leaves both unresolved.
  IP/CIDR arithmetic is refused.

Nothing here knows about ConfigData: :class:`Document` evaluates a plain data tree and labels
places through a callback; :mod:`function.configdata.configure` builds the tree.

The parser is hand-written, not a ``lark`` grammar: a LALR grammar of this subset (blanks
folded into the operator tokens, so one token of lookahead tells ``a -1`` from ``a - 1``)
parsed the same expressions, but each one 1.2 to 2.5 times slower, with about 140 ms of
import and table building when a command starts (lark's table cache writes a file: the
image's root is read-only); and its errors name a character ("No terminal matches '=' … col
3") where users need the construct ("comparisons (==) are not supported"): naming them would
keep every look-ahead check of :class:`_Parser` beside it.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from function.cache import Memos, memo

MAX_EXPRESSION = 4096  # characters of one expression (after interpolation)
MAX_DEPTH = 32  # nesting of parentheses in one expression
MAX_CHAIN = 50  # expressions referring to expressions referring to ...
MAX_BUILT = 4 * 1024 * 1024  # characters / list entries concatenation may build per document
INT64 = (-(2**63), 2**63 - 1)
RULES_KEY = "ocmAdjustmentsTemplateKey"
SPECIAL_NAMES = {
    "_": "'_' (the current node)",
    "__": "'__' (the document node)",
    "___": "'___' (the root of the document)",
    "__ctx": "'__ctx' (the spiff context)",
}

Loc = tuple[Any, ...]


class ExpressionError(Exception):
    """Base: ``message`` says what is wrong. ``at`` is the place of the expression that failed
    and ``raw`` its text as written, both filled in by :meth:`Document.value`.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.at: Loc | None = None
        self.raw: str | None = None


class Unsupported(ExpressionError):
    """A spiff construct outside the supported subset."""


class SyntaxProblem(ExpressionError):
    """Not a valid dynaml expression (spiff fails to parse it too)."""


class EvalFailed(ExpressionError):
    """The expression's own evaluation failed (missing key, type error): ``||`` may catch it."""


class NodeFailed(ExpressionError):
    """An expression that this one refers to failed (or a cycle): never caught by ``||``."""

    def __init__(self, message: str, loc: Loc) -> None:
        super().__init__(message)
        self.loc = loc


# --------------------------------------------------------------------------- recognising


def _join(
    result: str, text: str, expr: str, *, final: bool, unescape: bool
) -> tuple[bool, str, str, str]:
    """One step of spiff's ``addExpr``: append the text seen so far (as a JSON string literal)
    and the expression just closed; ``((!…))`` stays text. Returns (found, result, text, expr).
    """
    if unescape and expr.startswith("!"):
        text += "((" + expr[1:] + ")"
        expr = ""
    if expr.startswith("!"):
        text += "((" + expr + ")"
        expr = ""
    if expr == "" and (result == "" or not final):
        return False, result, text, expr
    if text:
        result = (result + " " if result else "") + json.dumps(text, ensure_ascii=False)
    if expr:
        expr = expr[:-1].strip()  # drop the first ')' of the closing '))'
    if result and expr:
        result += " "
    return True, result + expr, "", ""


def _interpolate(s: str, *, unescape: bool) -> tuple[str | None, str | None]:
    """Spiff's ``convertToExpression``: (plain text, None) or (None, one dynaml expression)."""
    mask = quote = start = found = False
    ob = lvl = 0
    expr = text = result = ""
    for c in s:
        if start:
            if quote:
                if c == '"':
                    if not mask:
                        quote = False
                    mask = False
                elif c == "\\":
                    mask = not mask
                else:
                    mask = False
                expr += c
                continue
            if c == "(":
                lvl += 1
            elif c == ")":
                if lvl > 0:
                    lvl -= 1
                else:
                    ob += 1
                    if ob == 2:
                        start = False
                        ob = 0
                        added, result, text, expr = _join(
                            result, text, expr, final=False, unescape=unescape
                        )
                        found = added or found
            elif c == '"':
                quote = True
            if start:
                expr += c
            if c != ")":
                ob = 0
        else:
            if c == "(":
                ob += 1
            elif ob >= 2:
                start = True
                text = text[:-2]
                expr = c
                ob = 0
            if not start:
                text += c
                if c != "(":
                    ob = 0
    if start:
        text += "((" + expr
        expr = ""
    added, result, text, expr = _join(result, text, expr, final=True, unescape=unescape)
    found = added or found
    return (None, result) if found else (text, None)


def classify(s: str) -> tuple[str, str]:
    """``("plain", s)``, ``("expr", dynaml text)`` or ``("literal", unescaped text)``."""
    if s.startswith("((") and s.endswith("))") and len(s) >= 4:
        sub = s[2:-2]
        if not sub.startswith("!"):
            return "expr", sub
        return "literal", "((" + sub[1:] + "))"
    if "((" not in s:
        return "plain", s
    _, expr = _interpolate(s, unescape=False)
    if expr is not None:
        return "expr", expr
    text, _ = _interpolate(s, unescape=True)
    if text is not None and text != s:
        return "literal", text
    return "plain", s


def is_expression(value: Any) -> bool:
    """Whether spiff would evaluate ``value``: a string that is, or interpolates, ``(( … ))``.

    Escaped ``((!…))`` and plain strings are data, and evaluation leaves them as they are.
    """
    return isinstance(value, str) and classify(value)[0] == "expr"


# --------------------------------------------------------------------------- parsing


# The syntax tree: one record per node kind (alike by design), so evaluation dispatches on type.


@dataclass(frozen=True)
class Lit:
    """A literal: string, number, boolean, nil, or an IP address (kept as its text)."""

    value: Any


@dataclass(frozen=True)
class Ref:
    """A reference such as ``a.b[0]`` (``text`` as written, for messages)."""

    path: tuple[str, ...]  # first element "" = from the root
    text: str


@dataclass(frozen=True)
class Concat:
    """``a b``: juxtaposition, spiff's concatenation."""

    a: Any
    b: Any


@dataclass(frozen=True)
class Arith:
    """``a op b`` for ``op`` in ``+ - * / %``."""

    op: str
    a: Any
    b: Any


@dataclass(frozen=True)
class Or:
    """``a || b``: ``b`` when evaluating ``a`` itself fails."""

    a: Any
    b: Any


_WS = " \t\n\r"
_KEY = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9_\-]*(?::[a-zA-Z0-9_][a-zA-Z0-9_\-]*)?")
_INDEX = re.compile(r"\[-?[0-9]+\]")
_NUMBER = re.compile(r"-?[0-9][0-9_]*(?:\.[0-9][0-9]*)?(?:[eE]-?[0-9][0-9]*)?")
_IP = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_TAG = re.compile(r"(?:doc[.:]-?[0-9]+|[a-zA-Z_][a-zA-Z0-9_]*(?:[.:][a-zA-Z_][a-zA-Z0-9_]*)*)::")
_NAME = re.compile(r"[a-zA-Z0-9_]+")
_PRIMARY_KEYWORDS = (  # Chained alternatives that start with a keyword and a bracket
    ("map{", "map{…} (map mapping)"),
    ("sync[", "sync[…]"),
    ("catch[", "catch[…]"),
    ("map[", "map[…] (list mapping)"),
    ("select{", "select{…}"),
    ("select[", "select[…]"),
    ("sum[", "sum[…]"),
)
_COMPARE = ("==", "!=", "<=", ">=", ">", "<")


def _path_components(ref: str) -> tuple[str, ...]:
    """Spiff ``PathComponents(ref, leading=true)``: ``a.b[0]`` → a, b, [0]; ``.a`` → "", a."""
    path: list[str] = []
    comp = ""
    for c in ref:
        if c == ".":
            path.append(comp)
            comp = ""
        elif c == "[":
            if comp:
                path.append(comp)
            comp = c
        else:
            comp += c
    if comp:
        path.append(comp)
    return tuple(path)


class _Parser:
    """A recursive-descent reading of ``dynaml.peg`` (ordered choice, no backtracking into a
    committed alternative), for the supported subset. Every method takes a position and
    returns ``(node, new position)`` or ``None``.
    """

    def __init__(self, text: str) -> None:
        self.t = text
        self.n = len(text)
        self.depth = 0
        self._memo: dict[
            tuple[str, int], tuple[Any, int] | None
        ] = {}  # packrat: groups are tried twice

    def ws(self, i: int) -> int:
        while i < self.n and self.t[i] in _WS:
            i += 1
        return i

    def req_ws(self, i: int) -> int | None:
        j = self.ws(i)
        return j if j > i else None

    def at(self, i: int, s: str) -> bool:
        return self.t.startswith(s, i)

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unsupported(f"expression nests deeper than {MAX_DEPTH} levels")

    def parse(self) -> Any:
        j = self.ws(0)
        if self.at(j, "prefer") and self.req_ws(j + 6) is not None:
            raise Unsupported("'prefer' is not supported")
        if self.at(j, "&"):
            raise Unsupported(f"the marker {self.t[j:].split()[0][:30]!r} is not supported")
        r = self.expression(0)
        if r is None or r[1] != self.n:
            at = 0 if r is None else r[1]
            raise SyntaxProblem(f"parse error at column {at + 1} ({self.t[at : at + 20]!r})")
        return r[0]

    def expression(self, i: int) -> tuple[Any, int] | None:
        key = ("expression", i)
        if key not in self._memo:
            self._memo[key] = self._expression(i)
        return self._memo[key]

    def _expression(self, i: int) -> tuple[Any, int] | None:
        self._deeper()
        try:
            j = self.ws(i)
            self._scoped(j)
            if (self.at(j, "|") and not self.at(j, "||")) or re.match(r"\|\|\s*->", self.t[j:]):
                raise Unsupported("lambda expressions (|x| -> …) are not supported")
            r = self.level7(i)
            return None if r is None else (r[0], self.ws(r[1]))
        finally:
            self.depth -= 1

    def _scoped(self, j: int) -> None:
        """``( a = 1 ) expr`` (a scope) is refused; a plain ``( expr )`` is a group."""
        if not self.at(j, "("):
            return
        k = self.ws(j + 1)
        if self.at(k, ")"):
            m = self.ws(k + 1)
            if m < self.n and self.expression(m) is not None:
                raise Unsupported("scopes ( … ) expr are not supported")
            return
        inner = self.expression(k)
        if inner is not None and self.at(inner[1], "=") and not self.at(inner[1], "=="):
            raise Unsupported("scopes (name = value) expr are not supported")

    def level7(self, i: int) -> tuple[Any, int] | None:
        r = self.level6(self.ws(i))
        if r is None:
            return None
        node, k = r
        while True:
            m = self.req_ws(k)
            if m is None:
                return node, k
            if self.at(m, "//") and self.req_ws(m + 2) is not None:
                raise Unsupported("'//' (valid-or) is not supported; use '||'")
            if not (self.at(m, "||") and self.req_ws(m + 2) is not None):
                return node, k
            b = self.level6(self.req_ws(m + 2) or 0)
            if b is None:
                return node, k
            node, k = Or(node, b[0]), b[1]

    def level6(self, i: int) -> tuple[Any, int] | None:
        r = self.level5(i)
        if r is not None and self.at(self.ws(r[1]), "?"):
            raise Unsupported("conditional expressions (a ? b : c) are not supported")
        return r

    def level5(self, i: int) -> tuple[Any, int] | None:
        r = self.level4(i)
        if r is None:
            return None
        node, k = r
        while True:
            m = self.req_ws(k)
            b = None if m is None else self.level4(m)
            if b is None:
                return node, k
            node, k = Concat(node, b[0]), b[1]

    def level4(self, i: int) -> tuple[Any, int] | None:
        r = self.level3(i)
        if r is not None:
            m = self.req_ws(r[1])
            for op in ("-or", "-and"):
                if m is not None and self.at(m, op) and self.req_ws(m + len(op)) is not None:
                    raise Unsupported(f"the logical operator {op} is not supported")
        return r

    def level3(self, i: int) -> tuple[Any, int] | None:
        r = self.level2(i)
        if r is not None:
            m = self.req_ws(r[1])
            for op in _COMPARE:
                if m is not None and self.at(m, op) and self.req_ws(m + len(op)) is not None:
                    raise Unsupported(f"comparisons ({op}) are not supported")
        return r

    def _binary(
        self, i: int, ops: str, lower: Callable[[int], tuple[Any, int] | None]
    ) -> tuple[Any, int] | None:
        r = lower(i)
        if r is None:
            return None
        node, k = r
        while True:
            m = self.req_ws(k)
            if m is None or m >= self.n or self.t[m] not in ops:
                return node, k
            after = self.req_ws(m + 1)
            b = None if after is None else lower(after)
            if b is None:
                return node, k
            node, k = Arith(self.t[m], node, b[0]), b[1]

    def level2(self, i: int) -> tuple[Any, int] | None:
        return self._binary(i, "+-", self.level1)

    def level1(self, i: int) -> tuple[Any, int] | None:
        return self._binary(i, "*/%", self.level0)

    def level0(self, i: int) -> tuple[Any, int] | None:
        t = self.t
        if i >= self.n:
            return None
        m = _IP.match(t, i)
        if m:
            return Lit(m.group()), m.end()
        if t[i] == '"':
            return self.string(i)
        m = _NUMBER.match(t, i)
        if m and not self.at(m.end(), "::"):
            raw = m.group().replace("_", "")
            try:
                value: Any = float(raw) if any(c in raw for c in ".eE") else int(raw)
            except ValueError:  # pragma: no cover - the pattern only matches numbers
                raise SyntaxProblem(f"{m.group()!r} is not a number") from None
            if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
                raise SyntaxProblem(f"the integer {m.group()[:30]} is out of range (64 bits)")
            if isinstance(value, float) and not math.isfinite(value):
                raise SyntaxProblem(f"the number {m.group()[:30]} is beyond a 64-bit float")
            return Lit(value), m.end()
        for word, value in (("true", True), ("false", False)):
            if self.at(i, word):
                return Lit(value), i + len(word)
        if self.at(i, "~~"):
            raise Unsupported("'~~' (undefined) is not supported")
        if self.at(i, "nil"):
            return Lit(None), i + 3
        if self.at(i, "~"):
            return Lit(None), i + 1
        if t[i] == "$":
            raise Unsupported("symbols ($name) are not supported")
        if t[i] == "!":
            raise Unsupported("negation (!) is not supported")
        if t[i] == "*":
            raise Unsupported("template substitution (*expr) is not supported")
        if self.at(i, "merge"):
            raise Unsupported("'merge' is not supported")
        if self.at(i, "auto"):
            raise Unsupported("'auto' is not supported")
        if self.at(i, "lambda") and (
            self.req_ws(i + 6) is not None or self.at(self.ws(i + 6), "|")
        ):
            raise Unsupported("lambda expressions are not supported")
        return self.chained(i)

    def string(self, i: int) -> tuple[Any, int]:
        t = self.t
        j = i + 1
        while j < self.n:
            if t.startswith('\\"', j):
                j += 2
            elif t[j] == '"':
                break
            else:
                j += 1
        if j >= self.n:
            raise SyntaxProblem(f"unterminated string at column {i + 1}")
        raw = t[i : j + 1]
        try:
            return Lit(json.loads(raw)), j + 1
        except ValueError:
            raise SyntaxProblem(
                f"invalid string literal {raw[:40]!r} (JSON escapes only)"
            ) from None

    def chained(self, i: int) -> tuple[Any, int] | None:
        t = self.t
        for word, name in _PRIMARY_KEYWORDS:
            if self.at(i, word):
                raise Unsupported(f"{name} is not supported")
        if t[i] == "[":
            raise Unsupported("list literals and ranges ([…]) are not supported")
        if t[i] == "{":
            raise Unsupported("map literals ({…}) are not supported")
        if t[i] == "(":
            inner = self.expression(i + 1)
            if inner is None or not self.at(inner[1], ")"):
                return None
            node, k = inner[0], inner[1] + 1
        elif self.at(i, ".["):
            raise Unsupported("dynamic indexes (.[expr]) are not supported")
        else:
            if _TAG.match(t, i):
                raise Unsupported("tagged references (tag::path) are not supported")
            j = i + 1 if t[i] == "." else i
            m = _KEY.match(t, j)
            if m is None:
                return None
            k = m.end()
            while True:
                if self.at(k, ".") and (key := _KEY.match(t, k + 1)):
                    k = key.end()
                    continue
                idx = _INDEX.match(t, k + 1 if self.at(k, ".") else k)
                if idx:
                    k = idx.end()
                    continue
                break
            text = t[i:k]
            path = _path_components(text)
            if path[0] in SPECIAL_NAMES:
                raise Unsupported(
                    f"the special reference {SPECIAL_NAMES[path[0]]} is not supported"
                )
            node = Ref(path, text)
        if self.at(k, "(") or self.at(k, "*("):
            name = node.text if isinstance(node, Ref) else "(…)"
            raise Unsupported(f"function calls ({name}(…)) are not supported")
        if self.at(k, "[") or self.at(k, ".["):
            raise Unsupported("dynamic indexes, slices and projections ([…]) are not supported")
        if not isinstance(node, Ref) and self.at(k, ".") and _KEY.match(t, k + 1):
            raise Unsupported("references into a computed value ((expr).key) are not supported")
        return node, k


def parse(text: str, memos: Memos | None = None) -> Any:
    """The AST of one dynaml expression (memoised in the ``expressions`` table of ``memos``:
    ConfigData repeats few distinct ones).
    """
    if len(text) > MAX_EXPRESSION:
        raise Unsupported(f"expression is longer than {MAX_EXPRESSION} characters")
    return memo(
        "expressions",
        ("dynaml", text),
        lambda: _parse(text),
        lambda _: 200 + 8 * len(text),
        memos,
    )


def _parse(text: str) -> Any:
    try:
        return _Parser(text).parse()
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops it first
        raise Unsupported(f"expression nests deeper than {MAX_DEPTH} levels") from None


def written(value: Any, limit: int = 80) -> str:
    """A value as written in the document, for messages (cut when long)."""
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def show(text: str, limit: int = 80) -> str:
    """An expression as a user wrote it, for messages: ``(( a + 1 ))``, cut when long."""
    s = f"(( {text.strip()} ))"
    return s if len(s) <= limit else s[: limit - 5] + "… ))"


# --------------------------------------------------------------------------- values


# spiff's names for the value types, first match wins (a bool is an int to isinstance).
_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (type(None), "nil"),
    (bool, "bool"),
    (int, "int"),
    (float, "float"),
    (str, "string"),
    (list, "list"),
    (dict, "map"),
)


def _type(v: Any) -> str:
    """The type of ``v`` as spiff's messages name it."""
    return next((name for cls, name in _TYPE_NAMES if isinstance(v, cls)), type(v).__name__)


def _concat_text(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v
    return None


def concatenate(a: Any, b: Any) -> Any:
    """``a b`` as spiff's ``concatenation.go`` computes it.

    Strings, integers and booleans join as text; a list takes a list's entries or one more
    entry; maps merge, the right one winning; nil on the right of a list or map adds nothing.

    Raises:
        EvalFailed: any other pair (a float or nil beside text, a map beside a string), so
            ``||`` may catch it.
    """
    sa, sb = _concat_text(a), _concat_text(b)
    if sa is not None and sb is not None:
        return sa + sb
    if isinstance(a, list):
        if isinstance(b, list):
            return a + b
        return a if b is None else [*a, b]
    if isinstance(a, dict):
        if isinstance(b, dict):
            return {**a, **b}
        if b is None:
            return a
    raise EvalFailed(f"a {_type(a)} cannot be concatenated with a {_type(b)}")


def _is_ip(s: str) -> bool:
    for parse_ in (ipaddress.ip_address, lambda x: ipaddress.ip_network(x, strict=False)):
        try:
            parse_(s)
            return True
        except ValueError:
            continue
    return False


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def arithmetic(op: str, a: Any, b: Any) -> Any:
    """``a op b`` with Go's integer semantics, as spiff computes it.

    Two integers stay an integer (division truncates toward zero, the remainder has the
    dividend's sign); otherwise both are floats. What Go would silently wrap, or could not
    write as JSON, is refused instead.

    Raises:
        EvalFailed: an operand of the wrong type, division by zero, a float overflow.
        Unsupported: IP address arithmetic, or an integer result beyond 64 bits.
    """
    name = {
        "+": "addition",
        "-": "subtraction",
        "*": "multiplication",
        "/": "division",
        "%": "modulo",
    }[op]
    if isinstance(a, str) and op != "%":
        if _is_ip(a):
            raise Unsupported(
                f"IP address / CIDR arithmetic ({name} on {a[:40]!r}) is not supported"
            )
        raise EvalFailed(
            f"the first operand of {name} must be a number (or an IP address), got the string "
            f"{a[:40]!r}"
        )
    if op == "%":
        if (
            not (isinstance(a, int) and isinstance(b, int))
            or isinstance(a, bool)
            or isinstance(b, bool)
        ):
            raise EvalFailed(f"modulo needs integers, got {_type(a)} and {_type(b)}")
    elif not (_number(a) and _number(b)):
        raise EvalFailed(f"{name} needs numbers, got {_type(a)} and {_type(b)}")
    if isinstance(a, int) and isinstance(b, int):
        if op in "/%" and b == 0:
            raise EvalFailed("division by zero")
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        else:  # Go: integer division truncates toward zero; the remainder has the dividend's sign
            q = abs(a) // abs(b)
            q = q if (a >= 0) == (b >= 0) else -q
            r = q if op == "/" else a - b * q
        if not INT64[0] <= r <= INT64[1]:
            raise Unsupported(
                f"{name} overflows 64-bit integers (spiff would wrap around silently)"
            )
        return r
    x, y = float(a), float(b)
    if op in ("/", "%") and y == 0.0:
        raise EvalFailed("division by zero")
    out = x + y if op == "+" else x - y if op == "-" else x * y if op == "*" else x / y
    if not math.isfinite(out):
        # JSON (and Kubernetes) has no Inf: Go would fail to write the result
        raise EvalFailed(f"{name} overflows a 64-bit float")
    return out


# --------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class OwnField:
    """A reference that resolved to a field of the rule it sits in (upstream's scoping)."""

    loc: Loc  # where the expression is
    rule: int
    field: str
    shadowed: bool  # the merged values also have this key


class Document:
    """Evaluates every expression of one data tree in place, on demand, with spiff's scoping.

    ``root`` is plain data (dicts, lists, scalars). ``label(loc)`` names a place for messages.
    Results are memoised per place and shared, never copied (a value referred to a thousand
    times is one object), so nothing may mutate what :meth:`value` returns; cycles are errors.
    """

    def __init__(
        self, root: Mapping[str, Any], label: Callable[[Loc], str], memos: Memos | None = None
    ) -> None:
        self.root = root
        self.memos = memos  # the edge's memo tables, for parsed expressions
        self.label = label
        self._done: dict[Loc, Any] = {}
        self._failed: dict[Loc, ExpressionError] = {}
        self._busy: list[Loc] = []
        self._built = 0
        self.own_fields: list[OwnField] = []

    # -- the tree

    def node(self, loc: Loc) -> Any:
        """The node at ``loc`` as written (an expression is its text, not its value)."""
        n: Any = self.root
        for step in loc:
            n = n[step]
        return n

    def _scopes(self, loc: Loc) -> list[Loc]:
        """The maps enclosing ``loc``, innermost first (lists are not scopes of their own)."""
        out = []
        for i in range(len(loc) - 1, -1, -1):
            if isinstance(self.node(loc[:i]), dict):
                out.append(loc[:i])
        return out

    # -- resolution

    def value(self, loc: Loc) -> Any:
        """The fully evaluated value at ``loc`` (expressions inside containers included)."""
        if loc in self._done:
            return self._done[loc]
        if loc in self._failed:
            raise self._failed[loc]
        n = self.node(loc)
        if isinstance(n, str):
            kind, text = classify(n)
            if kind == "plain":
                return n
            if kind == "literal":
                result: Any = text
            else:
                try:
                    result = self._evaluate_at(loc, text)
                except ExpressionError as e:
                    if e.at is None:
                        e.at, e.raw = loc, n
                    raise
        elif isinstance(n, dict):
            result = {k: self.value((*loc, k)) for k in n}
        elif isinstance(n, list):
            result = [self.value((*loc, i)) for i in range(len(n))]
        else:
            return n
        self._done[loc] = result
        return result

    def _evaluate_at(self, loc: Loc, text: str) -> Any:
        if loc in self._busy:
            cycle = [*self._busy[self._busy.index(loc) :], loc]
            raise NodeFailed(
                "the expressions refer to each other in a cycle: "
                + " -> ".join(self.label(c) for c in cycle),
                loc,
            )
        if len(self._busy) >= MAX_CHAIN:
            raise NodeFailed(
                f"more than {MAX_CHAIN} expressions refer to one another in a chain", loc
            )
        self._busy.append(loc)
        try:
            return self.evaluate(parse(text, self.memos), loc)
        except ExpressionError as e:
            self._failed[loc] = e
            raise
        finally:
            self._busy.pop()

    def evaluate(self, node: Any, loc: Loc) -> Any:
        """Evaluate one parsed expression as if it stood at ``loc``.

        Operators are left-associative, so a long ``a b c …`` is a deep left spine: it is
        walked in a loop (only parentheses nest the recursion, and the parser caps those).
        """
        if isinstance(node, Lit):
            return node.value
        if isinstance(node, Ref):
            return self.reference(node, loc)
        spine = []
        while type(node) in (Concat, Arith, Or) and type(node.a) is type(node):
            spine.append(node)
            node = node.a
        spine.append(node)
        spine.reverse()  # innermost (leftmost) first
        first = spine[0]
        if isinstance(first, Or):
            for operand in [first.a] + [n.b for n in spine]:
                try:
                    return self.evaluate(operand, loc)
                except EvalFailed as e:
                    failed = e
            raise failed
        acc = self.evaluate(first.a, loc)
        for n in spine:
            b = self.evaluate(n.b, loc)
            acc = self._concatenate(acc, b) if isinstance(n, Concat) else arithmetic(n.op, acc, b)
        return acc

    def _concatenate(self, a: Any, b: Any) -> Any:
        out = concatenate(a, b)
        if isinstance(out, str | list) and out is not a:
            self._built += len(out)
            if self._built > MAX_BUILT:
                raise Unsupported(
                    f"the expressions build more than {MAX_BUILT} characters or list entries"
                )
        return out

    def _follow(self, base: Loc, steps: tuple[str, ...], ref: Ref) -> Any:
        """Follow ``steps`` from the node at ``base``, evaluating expressions met on the way."""
        here_loc: Loc | None = base
        here: Any = None
        for n, step in enumerate(steps):
            if here_loc is not None:
                node = self.node(here_loc)
                if is_expression(node):
                    here, here_loc = self._referenced(here_loc), None
                else:
                    here = node
            nxt = _step(here, step)
            if nxt is None:
                shown = (
                    ".".join(ref.path[: len(ref.path) - len(steps) + n + 1])
                    .lstrip(".")
                    .replace(".[", "[")
                )
                raise EvalFailed(
                    f"{show(ref.text)} refers to {shown!r}, which is not in the merged values "
                    "(defaults + values)"
                )
            key, here = nxt
            if here_loc is not None:
                here_loc = (*here_loc, key)
        return self._referenced(here_loc) if here_loc is not None else here

    def _referenced(self, loc: Loc) -> Any:
        try:
            return self.value(loc)
        except NodeFailed:
            raise
        except Unsupported as e:
            raise Unsupported(
                f"{self.label(loc)} is {written(self.node(loc))}: {e.message}"
            ) from None
        except ExpressionError as e:
            raise NodeFailed(
                f"{self.label(loc)} is {written(self.node(loc))}, which fails: {e.message}", loc
            ) from None

    def reference(self, ref: Ref, loc: Loc) -> Any:
        """The value ``ref`` names from the expression at ``loc``, with spiff's scoping.

        Args:
            ref: The reference, as parsed.
            loc: Where the referring expression sits; its enclosing maps are the scopes.

        Returns:
            The referred value, evaluated when it is an expression itself.

        Raises:
            EvalFailed: the reference does not resolve (``||`` may catch it).
            NodeFailed: the referred expression fails (``||`` does not catch it).
            Unsupported: the whole document, or the rules' own key, is referred to.
        """
        first = ref.path[0]
        if first == "":
            if len(ref.path) == 1:
                raise Unsupported("a reference to the whole document is not supported")
            return self._follow((), ref.path[1:], ref)
        for scope in self._scopes(loc):
            if first in self.node(scope):
                if scope == () and first == RULES_KEY:
                    raise Unsupported(
                        f"{RULES_KEY} is where upstream keeps the rules; it cannot be referenced"
                    )
                self._note_own_field(scope, first, loc)
                return self._follow((*scope, first), ref.path[1:], ref)
        raise EvalFailed(
            f"{show(ref.text)} refers to {first!r}, which is not in the merged values "
            "(defaults + values)"
        )

    def _note_own_field(self, scope: Loc, name: str, loc: Loc) -> None:
        if len(scope) == 2 and scope[0] == RULES_KEY and isinstance(scope[1], int):
            self.own_fields.append(OwnField(loc, scope[1], name, name in self.root))

    # -- what refers to what, without evaluating

    def reads(self, loc: Loc) -> set[Loc]:
        """The places the expressions at and under ``loc`` refer to, directly or through the
        expressions found there (a default that is itself ``(( image.tag ))``).

        Static, with :meth:`reference`'s scoping: nothing is evaluated, so both sides of
        ``||`` count and so does a place only an error path would reach; a reference that
        does not resolve reads nothing. A path through an expression stops at it (what it
        refers to is read). Used to tell which values a rule consumes; never raises.
        """
        out: set[Loc] = set()
        todo, seen = [loc], set()
        while todo:
            here = todo.pop()
            if here in seen:
                continue
            seen.add(here)
            node = self.node(here)
            if isinstance(node, dict):
                todo.extend((*here, k) for k in node)
                continue
            if isinstance(node, list):
                todo.extend((*here, i) for i in range(len(node)))
                continue
            if not is_expression(node):
                continue
            try:
                tree = parse(classify(node)[1], self.memos)
            except (ExpressionError, RecursionError):
                continue
            for ref in _refs(tree):
                target = self._static_target(ref, here)
                if target is not None:
                    out.add(target)
                    todo.append(target)
        return out

    def _static_target(self, ref: Ref, loc: Loc) -> Loc | None:
        first, steps = ref.path[0], ref.path[1:]
        if first == "":
            base: Loc | None = ()
        else:
            base = next(
                (
                    (*scope, first)
                    for scope in self._scopes(loc)
                    if first in self.node(scope) and not (scope == () and first == RULES_KEY)
                ),
                None,
            )
        if base is None:
            return None
        here = base
        for step in steps:
            node = self.node(here)
            if is_expression(node):
                return here  # the rest follows a computed value: what it refers to is read
            nxt = _step(node, step)
            if nxt is None:
                return None
            here = (*here, nxt[0])
        return here


def _refs(tree: Any) -> list[Ref]:
    """The references in a parsed expression, left to right."""
    out, todo = [], [tree]
    while todo:
        n = todo.pop()
        if isinstance(n, Ref):
            out.append(n)
        elif isinstance(n, Concat | Arith | Or):
            todo += [n.b, n.a]
    return out


def _step(here: Any, step: str) -> tuple[Any, Any] | None:
    """Spiff ``nextStep``: a map key; on a list ``[n]`` (negative from the end) or the entry
    whose ``name`` (or ``key:value`` selector's key) equals the step. (key, node) or None.
    """
    if isinstance(here, dict):
        return (step, here[step]) if step in here else None
    if isinstance(here, list):
        m = re.fullmatch(r"\[(-?\d+)\]", step)
        if m:
            i = int(m.group(1))
            i = len(here) + i if i < 0 else i
            return (i, here[i]) if 0 <= i < len(here) else None
        key, want = "name", step
        split = step.find(":")
        if split > 0:
            key, want = step[:split], step[split + 1 :]
        for i, entry in enumerate(here):
            if isinstance(entry, dict) and isinstance(entry.get(key), str) and entry[key] == want:
                return i, entry
    return None


__all__ = [
    "RULES_KEY",
    "Document",
    "EvalFailed",
    "ExpressionError",
    "NodeFailed",
    "OwnField",
    "SyntaxProblem",
    "Unsupported",
    "classify",
    "is_expression",
    "parse",
    "show",
]
