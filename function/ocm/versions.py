"""Choosing a component version from a constraint, the way Flux users already write them.

Claims say ``version: 6.2.0`` or ``version: ">=6.2.0 <7.0.0"``. Flux (and Helm) users know the
Masterminds/semver constraint syntax, so that is what is accepted here, with the same
pre-release rule: a pre-release version is only a candidate when the constraint (the
``||`` alternative in question) itself names a pre-release. Tags that are not semantic
versions are ignored for ranges, but an exact string still matches them.

Supported: exact ``6.2.0``/``v6.2.0``; comparisons ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``
(``=<``, ``=>``); ``~6.2`` (``~>``), ``^6``; wildcards ``6.x``, ``6.2.*``, ``*``; partial versions
``6.2``; hyphen ranges ``6.2 - 6.4``; AND by comma or space, OR by ``||``. Highest match wins.

Hand-written because no Python library speaks Masterminds: ``semver`` (3.1) matches one
comparison, no ranges; ``node-semver`` (0.9) is npm's grammar, which has no ``!=`` or ``=<``
and admits a pre-release only beside a comparator of the same ``major.minor.patch``
(``>=6.2.0-0 <7`` never picks ``6.4.0-beta.1``, Masterminds and Flux do).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import total_ordering

from function.errors import ComponentError

_SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_PARTIAL = re.compile(
    r"^v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_TERM = re.compile(r"^(!=|>=|=>|<=|=<|~>|[=<>~^])?\s*(\S+)$")
MAX_SHOWN = 10
MAX_CONSTRAINT_LEN = 256


@total_ordering
@dataclass(frozen=True)
class SemVer:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()

    def _key(self) -> tuple:
        # A release sorts after its pre-releases; numeric identifiers sort below alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def __lt__(self, other: SemVer) -> bool:
        return self._key() < other._key()

    @property
    def core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)


def parse_semver(text: str) -> SemVer | None:
    """A strict semantic version (optional leading ``v``), or ``None``."""
    m = _SEMVER.match(text.strip()) if isinstance(text, str) else None
    if not m:
        return None
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return SemVer(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre)


def is_exact(constraint: str) -> bool:
    """True when ``constraint`` names one version (``6.2.0``, ``v6.2.0``, ``=6.2.0``)."""
    c = constraint.strip()
    return parse_semver(c[1:] if c.startswith("=") else c) is not None


# A comparator: (op, version) with op in == != > >= < <=.
_Cmp = tuple[str, SemVer]


@dataclass(frozen=True)
class _Group:
    """An AND of comparators (one ``||`` alternative)."""

    cmps: tuple[_Cmp, ...]
    excludes: tuple[tuple[_Cmp, ...], ...]  # each: an AND range that must NOT match (for != x.y.*)
    allow_pre: bool

    def matches(self, v: SemVer) -> bool:
        if v.prerelease and not self.allow_pre:
            return False
        if not all(_cmp(v, op, w) for op, w in self.cmps):
            return False
        return not any(all(_cmp(v, op, w) for op, w in ex) for ex in self.excludes)


def _cmp(v: SemVer, op: str, w: SemVer) -> bool:
    if op == "==":
        return v == w
    if op == "!=":
        return v != w
    if op == ">":
        return v > w
    if op == ">=":
        return v >= w
    if op == "<":
        return v < w
    if op == "<=":
        return v <= w
    raise AssertionError(op)  # pragma: no cover


def _floor(major: int, minor: int = 0, patch: int = 0) -> SemVer:
    # The lowest version of a range *including its pre-releases* (x.y.z-0).
    return SemVer(major, minor, patch, ("0",))


def _partial(text: str, where: str, constraint: str) -> tuple[list[int], tuple[str, ...]]:
    """Numbers given before the first wildcard, plus a pre-release (only on full versions)."""
    m = _PARTIAL.match(text)
    if not m:
        raise ComponentError(
            where, f"version constraint {constraint!r}: {text[:60]!r} is not a version"
        )
    nums: list[int] = []
    for g in m.groups()[:3]:
        if g is None or g in ("x", "X", "*"):
            break
        nums.append(int(g))
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    if pre and len(nums) != 3:
        raise ComponentError(
            where, f"version constraint {constraint!r}: a pre-release needs a full version"
        )
    return nums, pre


def _upper(nums: list[int]) -> SemVer:
    """Exclusive upper bound of the wildcard range ``nums.*``."""
    if len(nums) == 1:
        return _floor(nums[0] + 1)
    if len(nums) == 2:
        return _floor(nums[0], nums[1] + 1)
    return _floor(nums[0], nums[1], nums[2] + 1)


_COMPARISONS = {"=", "!=", ">", ">=", "<", "<="}
_EMPTY_WITH_STAR = {"!=", ">", "<"}  # != *, > * and < * match nothing
# A comparison with a partial version compares with the range it stands for (6.2: 6.2.*):
# above it, from it, below it, up to its end (= and != take the range itself).
_PARTIAL_BOUND: dict[str, Callable[[list[int]], _Cmp]] = {
    ">": lambda nums: (">=", _upper(nums)),
    ">=": lambda nums: (">=", _floor(*nums)),
    "<": lambda nums: ("<", _floor(*nums)),
    "<=": lambda nums: ("<", _upper(nums)),
}


def _term(
    op: str, text: str, where: str, constraint: str
) -> tuple[list[_Cmp], list[tuple[_Cmp, ...]], bool]:
    nums, pre = _partial(text, where, constraint)
    has_pre = bool(pre)
    op = {"=>": ">=", "=<": "<=", "~>": "~", "": "=", "==": "="}.get(op, op)
    if len(nums) == 3:
        exact = SemVer(nums[0], nums[1], nums[2], pre)
    if op in _COMPARISONS:
        if not nums:
            return ([("<", _floor(0))] if op in _EMPTY_WITH_STAR else []), [], has_pre
        if len(nums) == 3:
            return [("==" if op == "=" else op, exact)], [], has_pre
        inside = ((">=", _floor(*nums)), ("<", _upper(nums)))
        if op == "=":
            return list(inside), [], has_pre
        if op == "!=":
            return [], [inside], has_pre
        return [_PARTIAL_BOUND[op](nums)], [], has_pre
    if op == "~":
        if not nums:
            return [], [], has_pre
        low = exact if len(nums) == 3 else _floor(*nums)
        high = _floor(nums[0] + 1) if len(nums) == 1 else _floor(nums[0], nums[1] + 1)
        return [(">=", low), ("<", high)], [], has_pre
    if op == "^":
        if not nums:
            return [], [], has_pre
        low = exact if len(nums) == 3 else _floor(*nums)
        if nums[0] > 0 or len(nums) == 1:
            high = _floor(nums[0] + 1)
        elif len(nums) == 2 or nums[1] > 0:
            high = _floor(0, nums[1] + 1)
        else:
            high = _floor(0, 0, nums[2] + 1)
        return [(">=", low), ("<", high)], [], has_pre
    raise ComponentError(
        where, f"version constraint {constraint!r}: unknown operator {op!r}"
    )  # pragma: no cover


def parse_constraint(constraint: str, *, where: str) -> tuple[_Group, ...]:
    """Parse a Masterminds-style constraint into OR-ed AND-groups."""
    if not isinstance(constraint, str) or not constraint.strip():
        raise ComponentError(where, "version constraint is empty")
    if len(constraint) > MAX_CONSTRAINT_LEN:
        raise ComponentError(
            where, f"version constraint is longer than {MAX_CONSTRAINT_LEN} characters"
        )
    groups: list[_Group] = []
    for written in constraint.split("||"):
        alt = written.strip()
        if not alt:
            raise ComponentError(
                where, f"version constraint {constraint!r}: empty alternative around '||'"
            )
        cmps: list[_Cmp] = []
        excludes: list[tuple[_Cmp, ...]] = []
        allow_pre = False
        hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", alt)
        if hyphen:
            terms = [(">=", hyphen.group(1)), ("<=", hyphen.group(2))]
        else:
            # Join operators to their version ("> = 1.0" is not supported; ">= 1.0" is).
            tokens = re.sub(r"(!=|>=|=>|<=|=<|~>|[=<>~^])\s+", r"\1", alt.replace(",", " ")).split()
            terms = []
            for tok in tokens:
                m = _TERM.match(tok)
                if not m:
                    raise ComponentError(
                        where, f"version constraint {constraint!r}: cannot parse {tok[:60]!r}"
                    )
                terms.append((m.group(1) or "", m.group(2)))
        for op, text in terms:
            c, ex, pre = _term(op, text, where, constraint)
            cmps.extend(c)
            excludes.extend(ex)
            allow_pre = allow_pre or pre
        groups.append(_Group(tuple(cmps), tuple(excludes), allow_pre))
    return tuple(groups)


def satisfies(version: str, constraint: str, *, where: str) -> bool:
    """True when ``version`` (a tag) satisfies ``constraint``."""
    c = constraint.strip()
    if version == c:
        return True
    v = parse_semver(version)
    if v is None:
        return False
    return any(g.matches(v) for g in parse_constraint(c, where=where))


def pick_version(available: list[str], constraint: str, *, where: str) -> str:
    """The highest version in ``available`` that satisfies ``constraint``.

    An exact constraint (``6.2.0`` or ``v6.2.0``) matches the tag with or without ``v``; a tag
    equal to the constraint string always matches. Errors list what is available (highest
    first, at most 10).
    """
    c = (constraint or "").strip()
    if c and c in available:
        return c
    groups = parse_constraint(c, where=where)
    candidates: list[tuple[SemVer, str]] = []
    for tag in available:
        v = parse_semver(tag)
        if v is not None and any(g.matches(v) for g in groups):
            candidates.append((v, tag))
    if not candidates:
        valid = sorted(
            ((parse_semver(t), t) for t in set(available) if parse_semver(t)), reverse=True
        )
        shown = [t for _, t in valid[:MAX_SHOWN]]
        more = f" and {len(valid) - MAX_SHOWN} more" if len(valid) > MAX_SHOWN else ""
        ignored = len(set(available)) - len(valid)
        note = f"; {ignored} non-semver tag(s) ignored" if ignored else ""
        raise ComponentError(
            where,
            f"no version satisfies {c!r} (available: {', '.join(shown) or 'none'}{more}{note})",
        )
    # Highest wins; ties (build metadata, v-prefix) broken by the tag string for determinism.
    return max(candidates, key=lambda vt: (vt[0]._key(), vt[1]))[1]


def choose(available: tuple[str, ...], constraint: str, previous: str | None, where: str) -> str:
    """The sticky choice: the highest match, unless ``previous`` (resolved last time) still
    satisfies the constraint and is not older than it; a version never moves backwards.
    """
    picked = pick_version(list(available), constraint, where=where)
    if previous and satisfies(previous, constraint, where=where):
        p, n = parse_semver(previous), parse_semver(picked)
        if p is not None and n is not None and not (p < n):
            return previous
    return picked
