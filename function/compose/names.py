"""Deterministic names that fit Kubernetes limits, and the labels tying objects to a claim.

Names and composition-resource names are a stable API: renaming means Crossplane deletes
the old object and creates a new one. They derive only from the claim's namespace and name
(never the XR name, which carries a random suffix when a claim creates it), and are cut to
fit with a hash of the full name only when a limit would be crossed, so short names stay
readable and long ones stay unique.
"""

from __future__ import annotations

import hashlib
import re

NAMESPACE_MAX = 63
LABEL_VALUE_MAX = 63
RELEASE_NAME_MAX = 53
SUBDOMAIN_MAX = 253
HASH_LEN = 8

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_CLAIM_NAME = "sack8s.io/claim-name"
LABEL_CLAIM_NAMESPACE = "sack8s.io/claim-namespace"
LABEL_OWNER = "sack8s.io/owner"
MANAGED_BY = "function-sack8s"


def fit(name: str, limit: int) -> str:
    """``name`` if it fits, else a prefix plus ``-`` plus 8 hex of sha256(name)."""
    name = name.strip("-.")
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:HASH_LEN]
    prefix = name[: limit - HASH_LEN - 1].rstrip("-.")
    return f"{prefix}-{digest}"


def dns_label(text: str, limit: int = NAMESPACE_MAX) -> str:
    """A DNS-1123 label from arbitrary text (lowercase, [-a-z0-9], fitted)."""
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    return fit(clean, limit)


def label_value(text: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return fit(clean, LABEL_VALUE_MAX).strip("-._")


def resource_key(*parts: str) -> str:
    """A composition-resource name: lowercase, dash-joined, at most 63 characters."""
    return dns_label("-".join(p for p in parts if p), 63)
