"""Deterministic names that fit Kubernetes limits and never collide, and the composition keys.

Names and composition-resource keys are a stable API: renaming means Crossplane deletes the
old object and creates a new one. Every name the function derives ends in ``-<hash>``: 20
base32 characters (100 bits) of SHA-256 over a length-prefixed encoding of *exactly what
distinguishes the object* -- the claim's namespace and name as separate fields (or the XR's
name for an XR without a claim), the object's role, and the namespace or secret it is for.
The readable part in front is only for people and is cut to fit; uniqueness never depends
on it. So two claims, two namespaces or two kinds of object derive the same name only if
SHA-256 truncated to 100 bits collides (docs/decisions.md, "Names": birthday bound 2^50, second
preimage 2^100), and where a collision would hand one claim another's object, the ownership
checks compare the full identity and refuse it.

Composition-resource keys are built so that no two can be equal: fixed keys contain no dot;
keys for objects that exist per target namespace or per secret join their parts with dots
(namespace names have none, so ``<kind>.<namespace>.<secret>`` splits one way only). A joined
key that would not fit is replaced by a form that is *longer than any joined key* (a cut
prefix plus a 100-bit hash of the parts, exactly 253 characters), so the two forms never
meet. Target Namespace keys are ``namespace-<name>``, never cut (a namespace name has at most
63 characters); the old cut form survives only for a Namespace observed under it
(namespaces.py), because a changed key makes Crossplane delete the object.
"""

from __future__ import annotations

import functools
import hashlib
import re

NAMESPACE_MAX = 63
LABEL_VALUE_MAX = 63
NAME_MAX = 63  # every derived object name is a DNS label (Flux copies some into labels)
RELEASE_NAME_MAX = 53
SUBDOMAIN_MAX = 253
HASH_CHARS = 20  # base32: 5 bits each
HASH_BITS = HASH_CHARS * 5
LEGACY_HASH_LEN = 8  # the old 32-bit cut, kept only where an old key must not change

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_CLAIM_NAME = "sack8s.io/claim-name"
LABEL_CLAIM_NAMESPACE = "sack8s.io/claim-namespace"
LABEL_OWNER = "sack8s.io/owner"
LABEL_DEPLOY_NAMESPACE = "sack8s.io/deploy-namespace"
#: On every HelmRelease: the (target namespace, release name) it installs, hashed, so a claim
#: that chooses a release name finds another claim's release of that name (security.md).
LABEL_RELEASE = "sack8s.io/release"
ANNOTATION_CLAIM_NAME = "sack8s.io/claim-name"
ANNOTATION_CLAIM_NAMESPACE = "sack8s.io/claim-namespace"
MANAGED_BY = "function-sack8s"

_DOMAIN = "sack8s/names/v2"


def release_label(target_namespace: str, release_name: str) -> str:
    """The :data:`LABEL_RELEASE` value of one Helm release (its target namespace and name)."""
    return digest("release", target_namespace, release_name)


_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"  # RFC 4648's alphabet, lowercase
_PAIRS = tuple(a + b for a in _BASE32 for b in _BASE32)  # every 10-bit group, two characters
_HEAD_BYTES = -(-HASH_BITS // 8)  # the bytes that hold the first HASH_BITS bits
_SHIFTS = tuple(range(_HEAD_BYTES * 8 - 10, _HEAD_BYTES * 8 - HASH_BITS - 1, -10))


def base32_head(d: bytes) -> str:
    """The first ``HASH_CHARS`` characters of ``base64.b32encode(d).lower()``.

    Every name a fleet's claims derive misses the cache below (~25 a claim), and CPython's
    ``b32encode`` is written in Python: two table lookups per 10 bits cost half as much, and
    tests/test_compose_names.py proves the result equal to ``b32encode``'s.
    """
    n = int.from_bytes(d[:_HEAD_BYTES], "big")
    return "".join([_PAIRS[(n >> s) & 1023] for s in _SHIFTS])


@functools.lru_cache(maxsize=8192)
def digest(*parts: str) -> str:
    """``HASH_CHARS`` base32 characters of SHA-256 over the parts, length-prefixed (injective
    encoding: no choice of parts can shift a boundary).
    """
    h = hashlib.sha256()
    for p in (_DOMAIN, *parts):
        data = p.encode()
        h.update(len(data).to_bytes(4, "big"))
        h.update(data)
    return base32_head(h.digest())


@functools.lru_cache(maxsize=8192)
def readable(text: str) -> str:
    """A DNS-label-safe rendering of ``text`` for the readable part of a name (lossy)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


@functools.lru_cache(maxsize=8192)
def hashed(readable_part: str, hash_: str, limit: int = NAME_MAX) -> str:
    """``<readable>-<hash>`` within ``limit``: only the readable part is ever cut."""
    room = limit - len(hash_) - 1
    head = readable(readable_part)[: max(room, 0)].rstrip("-")
    return f"{head}-{hash_}" if head else hash_


def fit(name: str, limit: int) -> str:
    """``name`` if it fits, else a prefix plus ``-`` plus 8 hex of sha256(name).

    Legacy: only the target Namespace composition keys still use it (they must not change).
    """
    name = name.strip("-.")
    if len(name) <= limit:
        return name
    h = hashlib.sha256(name.encode()).hexdigest()[:LEGACY_HASH_LEN]
    prefix = name[: limit - LEGACY_HASH_LEN - 1].rstrip("-.")
    return f"{prefix}-{h}"


@functools.lru_cache(maxsize=8192)
def label_value(text: str) -> str:
    """A label value for ``text``: itself when it is one, else cut and suffixed with a hash."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    if clean == text and len(text) <= LABEL_VALUE_MAX:
        return text
    return hashed(clean, digest("label", text), LABEL_VALUE_MAX)


KEY_JOINED_MAX = SUBDOMAIN_MAX - HASH_CHARS - 1  # 232: longer joined keys are hashed


def key(*parts: str) -> str:
    """A composition-resource key: a lowercase RFC 1123 subdomain, parts joined with dots.

    Callers pass a fixed kind word first and then names that are DNS labels (namespaces) or
    subdomains (secret names, last): the join is injective. A join longer than
    ``KEY_JOINED_MAX`` becomes its first 232 characters, ``-`` and a 100-bit hash of the
    parts: always exactly 253 characters, so it can never equal a joined key (at most 232),
    and two hashed keys are equal only if SHA-256 cut to 100 bits collides.
    """
    joined = ".".join(parts)
    if len(joined) <= KEY_JOINED_MAX:
        return joined
    head = joined[:KEY_JOINED_MAX]
    if not head[-1].isalnum():  # keep it a subdomain: no label may end in '-' or '.'
        head = head[:-1] + "x"
    return f"{head}-{digest('key', *parts)}"


def legacy_key(kind: str, name: str) -> str:
    """``<kind>-<name>`` cut to 63 with a 32-bit hash, as releases before issue 30 did: only
    to recognise a Namespace observed under it (namespaces.py), never for a new object.
    """
    clean = re.sub(r"[^a-z0-9-]+", "-", f"{kind}-{name}".lower()).strip("-") or "x"
    return fit(clean, 63)


def dns_label(text: str, limit: int = NAMESPACE_MAX) -> str:
    """A DNS-1123 label from arbitrary text (lowercase, [-a-z0-9], fitted with the legacy cut)."""
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    return fit(clean, limit)


def resource_key(*parts: str) -> str:
    """The old dash-joined key (ambiguous: ``a``+``b-c`` equals ``a-b``+``c``); use :func:`key`."""
    return dns_label("-".join(p for p in parts if p), 63)
