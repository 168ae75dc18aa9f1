"""Who a composite resource belongs to: the claim's namespace and name, when there is one.

A claim creates its XR with a random suffix, so names derived from the XR name would change
if the XR were ever re-created. Crossplane records the claim in ``spec.claimRef`` (legacy
XRs) and in the ``crossplane.io/claim-*`` labels; only without either do we fall back to
the XR name (a v2 cluster-scoped XR created directly by ops).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from function.compose import names


@dataclass(frozen=True)
class Identity:
    namespace: str  # "" for an XR without a claim
    name: str
    xr_name: str
    is_claim: bool

    @property
    def base(self) -> str:
        """``<claim namespace>-<claim name>``, or the XR name."""
        return f"{self.namespace}-{self.name}" if self.namespace else self.name

    def labels(self) -> dict[str, str]:
        out = {
            names.LABEL_MANAGED_BY: names.MANAGED_BY,
            names.LABEL_CLAIM_NAME: names.label_value(self.name),
            names.LABEL_OWNER: names.label_value(self.base),
        }
        if self.namespace:
            out[names.LABEL_CLAIM_NAMESPACE] = names.label_value(self.namespace)
        return out

    def describe(self) -> str:
        return f"claim {self.namespace}/{self.name}" if self.is_claim else f"XR {self.xr_name}"


def identity_of(xr: Mapping[str, Any]) -> Identity:
    meta = xr.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    xr_name = str(meta.get("name") or "")
    labels = meta.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    spec = xr.get("spec")
    ref = (spec if isinstance(spec, Mapping) else {}).get("claimRef") or {}
    if isinstance(ref, Mapping) and ref.get("name") and ref.get("namespace"):
        return Identity(str(ref["namespace"]), str(ref["name"]), xr_name, is_claim=True)
    if labels.get("crossplane.io/claim-name") and labels.get("crossplane.io/claim-namespace"):
        return Identity(
            str(labels["crossplane.io/claim-namespace"]),
            str(labels["crossplane.io/claim-name"]),
            xr_name,
            is_claim=True,
        )
    return Identity("", xr_name, xr_name, is_claim=False)
