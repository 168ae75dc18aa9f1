"""Who a composite resource belongs to: the claim's namespace and name, and its tenant.

A claim creates its XR with a random suffix, so names derived from the XR name would change
if the XR were ever re-created. Crossplane records the claim in ``spec.claimRef`` (legacy
XRs), which only Crossplane's claim controller writes; only without it do we fall back to
the XR name (a v2 cluster-scoped XR created directly by ops). The ``crossplane.io/claim-*``
labels never count: they are plain labels, and whoever writes the XR writes them.

The *tenant* decides which namespaces a composite may reach (docs/security.md, "Tenancy"): a
claim's tenant is always its own namespace -- nothing the claim writes can change that,
because Crossplane copies a claim's labels to its XR. A namespaced XR is treated as a claim
in its namespace (everything on it is the team's, so only ``metadata.namespace`` is
trusted). An XR without a claim can only be created by ops; its tenant is the value of its
``sack8s.io/tenant`` label (ops acting for a team) -- which must name an existing namespace
that is that tenant's (tenancy.check_xr_tenant) -- or else its own name.

Ownership marks carry the identity as separate fields: the exact claim namespace and name
in annotations (labels cannot hold a 253-character name), and a 100-bit digest of both in
the ``sack8s.io/owner`` label for selection. :meth:`Identity.owns` compares all of them, so a
digest collision is refused, never shared.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from function.compose import names
from function.errors import InvalidClaim

LABEL_XR_TENANT = "sack8s.io/tenant"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Identity:
    """Who a composite belongs to: the claim (or the XR without one) and its tenant."""

    namespace: str  # "" for an XR without a claim
    name: str
    xr_name: str
    is_claim: bool
    tenant: str = ""  # "" only for an XR without a claim whose name is no DNS label: owns nothing
    tenant_from_label: bool = False  # a claimless XR's tenant named by its sack8s.io/tenant label
    uid: str = ""  # the XR's metadata.uid: Crossplane's controller reference on what it composed

    # The identity is frozen, so what is derived from it alone is derived once per instance
    # (every composed object's metadata reads the labels, annotations and digests).
    @functools.cached_property
    def _parts(self) -> tuple[str, ...]:
        return ("claim", self.namespace, self.name) if self.namespace else ("xr", self.name)

    def parts(self) -> tuple[str, ...]:
        """What names are derived from: the claim namespace and name as separate fields."""
        return self._parts

    def digest(self, *role: str) -> str:
        """A 100-bit digest of this identity and ``role``: the hash in every derived name."""
        return names.digest(*self._parts, *role)

    @functools.cached_property
    def claim_id(self) -> str:
        """The ``sack8s.io/owner`` label value: selects what this claim composed."""
        return self.digest("claim")

    @functools.cached_property
    def _labels(self) -> dict[str, str]:
        out = {
            names.LABEL_MANAGED_BY: names.MANAGED_BY,
            names.LABEL_CLAIM_NAME: names.label_value(self.name),
            names.LABEL_OWNER: self.claim_id,
        }
        if self.namespace:
            out[names.LABEL_CLAIM_NAMESPACE] = names.label_value(self.namespace)
        return out

    @functools.cached_property
    def _annotations(self) -> dict[str, str]:
        out = {names.ANNOTATION_CLAIM_NAME: self.name}
        if self.namespace:
            out[names.ANNOTATION_CLAIM_NAMESPACE] = self.namespace
        return out

    def labels(self) -> dict[str, str]:
        """Ownership labels: managed-by, the claim's name (cut to fit a label) and owner digest
        (a new dict each call: callers add to it).
        """
        return dict(self._labels)

    def annotations(self) -> dict[str, str]:
        """The exact claim namespace and name, which labels cannot always hold (a new dict)."""
        return dict(self._annotations)

    def owns(self, obj: Mapping[str, Any] | None) -> bool:
        """Whether a live object was composed for exactly this identity (all marks agree)."""
        meta = (obj or {}).get("metadata") or {}
        labels = meta.get("labels") or {}
        ann = meta.get("annotations") or {}
        return (
            labels.get(names.LABEL_OWNER) == self.claim_id
            and ann.get(names.ANNOTATION_CLAIM_NAME) == self.name
            and ann.get(names.ANNOTATION_CLAIM_NAMESPACE) == (self.namespace or None)
        )

    def controls(self, obj: Mapping[str, Any] | None) -> bool:
        """Whether Crossplane's controller reference on ``obj`` names this XR (by uid): the
        ownership mark of objects composed before the function wrote its own marks. Only
        Crossplane sets it, and it refuses to apply onto an object another controller holds.
        """
        if not self.uid:
            return False
        refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
        return any(
            isinstance(r, Mapping) and r.get("controller") is True and r.get("uid") == self.uid
            for r in refs
        )

    def describe(self) -> str:
        """``claim ns/name`` or ``XR name``, for messages."""
        return f"claim {self.namespace}/{self.name}" if self.is_claim else f"XR {self.xr_name}"


def owner_of(obj: Mapping[str, Any] | None) -> str | None:
    """The claim a live object says it belongs to, for messages (``ns/name``, or None)."""
    meta = (obj or {}).get("metadata") or {}
    ann = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    if ann.get(names.ANNOTATION_CLAIM_NAME):
        ns = ann.get(names.ANNOTATION_CLAIM_NAMESPACE)
        return (
            f"{ns}/{ann[names.ANNOTATION_CLAIM_NAME]}"
            if ns
            else f"XR {ann[names.ANNOTATION_CLAIM_NAME]}"
        )
    owner = labels.get(names.LABEL_OWNER)
    return str(owner) if owner else None


def _xr_tenant(labels: Mapping[str, Any], xr_name: str) -> str:
    raw = labels.get(LABEL_XR_TENANT)
    if raw is None:
        return xr_name if _DNS_LABEL.match(xr_name) and len(xr_name) <= 63 else ""
    if not isinstance(raw, str) or not _DNS_LABEL.match(raw) or len(raw) > 63:
        raise InvalidClaim(
            f"metadata.labels[{LABEL_XR_TENANT}]", f"{str(raw)[:80]!r} is not a namespace name"
        )
    return raw


def identity_of(xr: Mapping[str, Any]) -> Identity:
    """The identity of an observed composite: its claim (``spec.claimRef``, or its own namespace
    for a namespaced XR), else the XR itself with the tenant its ``sack8s.io/tenant`` label
    names.

    Raises:
        InvalidClaim: when the ``sack8s.io/tenant`` label names no namespace.
    """
    meta = xr.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    xr_name = str(meta.get("name") or "")
    uid = str(meta.get("uid") or "")
    labels = meta.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    if meta.get("namespace"):
        ns = str(meta["namespace"])
        return Identity(ns, xr_name, xr_name, is_claim=True, tenant=ns, uid=uid)
    spec = xr.get("spec")
    ref = (spec if isinstance(spec, Mapping) else {}).get("claimRef") or {}
    if isinstance(ref, Mapping) and ref.get("name") and ref.get("namespace"):
        ns = str(ref["namespace"])
        return Identity(ns, str(ref["name"]), xr_name, is_claim=True, tenant=ns, uid=uid)
    return Identity(
        "",
        xr_name,
        xr_name,
        is_claim=False,
        tenant=_xr_tenant(labels, xr_name),
        tenant_from_label=labels.get(LABEL_XR_TENANT) is not None,
        uid=uid,
    )
