"""Durations in the one spelling the consuming controllers write back.

ESO and the OCM controller decode ``refreshInterval``/``interval`` into a Go
``time.Duration`` (``metav1.Duration``) and, when they update the object, encode it again
with ``Duration.String()``: ``1h`` comes back as ``1h0m0s`` (``reference/observed.md`` items
4 and 8). The controller then owns the field, the next apply of ``1h`` bumps the generation
and the two fight. Composing the canonical spelling from the start leaves nothing to rewrite,
whatever the policy wrote. Flux keeps what it is sent, so the canonical form is merely
consistent there. (Both checked against ESO v0.20.4 and source-controller v1.9.3 by the e2e
suite, ``test_what_the_controllers_write_back_is_the_composed_spelling``.)

This is Go's ``time.ParseDuration`` and ``Duration.String()`` on integer nanoseconds, so the
result is exactly what a Go controller would print. Hand-written because ``durationpy``
(0.11) does not print Go's spelling: ``1h`` stays ``1h`` (Go: ``1h0m0s``), ``1.5ms`` becomes
``1ms500us``, zero ``0`` (Go: ``0s``), and it parses through float microseconds and accepts
units Go refuses (``3d``).
"""

from __future__ import annotations

import re

from function.errors import InvalidPolicy

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]+)")
_MAX = 2**63 - 1  # time.Duration is an int64 of nanoseconds
_MS = 1_000_000


def parse(text: str) -> int:
    """Nanoseconds of a Go duration (``1h30m``, ``1.5h``, ``90s``, ``0``); ValueError if not one."""
    s = text
    sign = 1
    if s[:1] in ("-", "+"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError("empty")
    total = 0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or not (m.group(1) or m.group(2)):
            raise ValueError(f"no number at {s[pos:]!r}")
        whole, frac, unit = m.group(1) or "0", m.group(2) or "", m.group(3)
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r}")
        scale = _UNITS[unit]
        # Go truncates the fraction's contribution towards zero, in nanoseconds.
        total += int(whole) * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        if total > _MAX:
            raise ValueError("out of range")
        pos = m.end()
    return sign * total


def go_string(ns: int) -> str:
    """Go's ``time.Duration(ns).String()``."""
    if ns == 0:
        return "0s"
    neg = ns < 0
    u = -ns if neg else ns
    if u < 1_000_000_000:  # below a second: one unit, with a fraction
        for unit, scale in (("ns", 1), ("µs", 1_000), ("ms", 1_000_000)):
            if u < scale * 1000:
                out = _fraction(u, scale) + unit
                break
    else:
        hours, rest = divmod(u, _UNITS["h"])
        minutes, rest = divmod(rest, _UNITS["m"])
        out = _fraction(rest, _UNITS["s"]) + "s"
        if hours or minutes:
            out = f"{minutes}m{out}"
        if hours:
            out = f"{hours}h{out}"
    return f"-{out}" if neg else out


def _fraction(value: int, scale: int) -> str:
    whole, frac = divmod(value, scale)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def canonical(text: str, where: str) -> str:
    """What a Go controller writes back for a positive duration the policy gave at ``where``.

    Refused, naming the field: anything ``time.ParseDuration`` refuses, zero or negative
    values, and a finer grain than a millisecond (Flux's CRDs accept only ms, s, m and h).
    """
    try:
        ns = parse(str(text))
    except ValueError as e:
        raise InvalidPolicy(
            where, f"{str(text)[:40]!r} is not a duration such as 30s, 10m or 1h30m ({e})"
        ) from None
    if ns <= 0:
        raise InvalidPolicy(where, f"{text!r} must be a positive duration")
    if ns % _MS:
        raise InvalidPolicy(where, f"{text!r} is finer than a millisecond")
    return go_string(ns)
