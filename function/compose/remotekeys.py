r"""Remote keys a claim may read from a secret store: a syntax a prefix check can reason about.

Stores resolve keys their own way -- Vault puts them in a URL path (``%2e%2e`` becomes ``..``),
some providers treat ``\\`` as a separator, Unicode look-alikes of ``.`` and ``/`` normalise
(NFKC) into the real thing, a NUL or newline ends the key early. A textual ``startswith``
cannot know which, so instead of normalising for every store we accept only what means the
same to all of them: plain ASCII segments (letters, digits, ``- _ . + = @ :``) joined by
``/``, none empty, none ``.`` or ``..``. Prefixes are then compared in whole segments, so
``apps/team`` never covers ``apps/team-a/db``.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from function.compose.identity import Identity
from function.errors import InvalidPolicy, PolicyViolation

_SEGMENT = re.compile(r"^[A-Za-z0-9_.+=@:-]+$")
_ALLOWED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+=@:-/")
RULE = (
    "plain ASCII segments (letters, digits, - _ . + = @ :) joined by '/', none empty, '.' or '..'"
)


def _describe(ch: str) -> str:
    if ch == "%":
        return "a percent-escape ('%')"
    if ch == "\\":
        return "a backslash"
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"the control character U+{ord(ch):04X}"
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


@functools.lru_cache(maxsize=4096)
def _parts(key: str) -> tuple[str, ...] | tuple[int, str]:
    """The key's segments, or (position, problem) for the first thing wrong with it."""
    for i, ch in enumerate(key):
        if ch not in _ALLOWED:
            return (i, ch)
    return tuple(key.split("/"))


def segments(key: str, where: str, error: type[Exception] = PolicyViolation) -> list[str]:
    """The key's segments; one error naming the first thing a prefix check cannot reason about."""
    got = _parts(key)
    if got and isinstance(got[0], int):
        i, ch = got
        raise error(
            where, f"remote key contains {_describe(ch)} at position {i}; keys must be {RULE}"
        )
    parts = list(got)
    if any(p == "" for p in parts):
        raise error(
            where,
            f"remote key {key!r} has an empty segment (leading, trailing or double '/'); "
            f"keys must be {RULE}",
        )
    if any(p in (".", "..") for p in parts):
        raise error(where, f"remote key {key!r} may not contain '.' or '..' segments")
    if not all(_SEGMENT.match(p) for p in parts):  # pragma: no cover - covered by _ALLOWED
        raise error(where, f"remote key {key!r} is not {RULE}")
    return parts


def prefix(template: str, identity: Identity, where: str) -> tuple[list[str], bool]:
    """An allowed prefix, placeholders filled: (segments, whether only keys *below* it count)."""
    text = template.replace("{claimNamespace}", identity.tenant).replace(
        "{claimName}", identity.name
    )
    below = text.endswith("/")
    body = text[:-1] if below else text
    try:
        return segments(body, where, InvalidPolicy), below
    except InvalidPolicy:
        if not identity.tenant and "{claimNamespace}" in template:
            return [], below  # an XR without a tenant: a tenant prefix covers nothing
        raise


def covered(parts: list[str], allowed: tuple[list[str], bool]) -> bool:
    """Whether key segments ``parts`` lie under an allowed prefix (whole segments only).

    Args:
        parts: The key's segments.
        allowed: A prefix's segments and whether only keys strictly below it are allowed.
    """
    segs, below = allowed
    if not segs:
        return False
    if below:
        return len(parts) > len(segs) and parts[: len(segs)] == segs
    return parts[: len(segs)] == segs


def check_text(value: str, where: str) -> None:
    """Fields next to the key (property, version): no control characters."""
    for i, ch in enumerate(value):
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            raise PolicyViolation(
                where, f"contains the control character U+{ord(ch):04X} at position {i}"
            )
