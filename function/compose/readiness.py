"""Readiness of composed resources from observed state, and the one blocking object.

Crossplane counts a composed resource ready only when the function says so. Kinds with a
``Ready`` condition (ExternalSecret, OCM and Flux objects, Usages) are ready when it is
True; kinds without one (Namespace, ServiceAccount, Role, RoleBinding) when they exist.

Condition contract (documented in docs/service-team.md): the XR carries a ``DeploymentReady``
condition; when False, its reason and ``status.blockedBy`` name the first composed object,
in deployment order, that is not ready, with that object's own Ready reason and message; or,
while the function withholds objects, what they wait for (``WaitingForNamespace``,
``WaitingForOCMComponent``: compose/gates.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Ready once they exist (no Ready condition); also the first kinds of the deployment order.
NO_READY_CONDITION = ("Namespace", "ServiceAccount", "Role", "RoleBinding")

# The OCM and Flux controllers' kinds, each waiting for the one before (a HelmRelease or a
# Kustomization last); their status also reports observedGeneration (edge/settle.py).
OCM_AND_FLUX = (
    "Repository",
    "Component",
    "Resource",
    "OCIRepository",
    "HelmRelease",
    "Kustomization",
)

# Deployment order: what has to be ready first is reported first.
ORDER = [*NO_READY_CONDITION, "ExternalSecret", *OCM_AND_FLUX, "Usage", "ClusterUsage"]


@dataclass(frozen=True)
class Blocker:
    """The object that keeps the XR from being ready, with its Ready reason and message."""

    kind: str
    name: str
    namespace: str | None
    reason: str
    message: str


def ready_condition(observed: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ``Ready`` condition of an observed object, if it has one."""
    for c in ((observed or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c
    return None


def is_ready(desired: Mapping[str, Any], observed: Mapping[str, Any] | None) -> bool:
    """Whether an observed object counts as ready: it exists, and its Ready condition is True
    where its kind has one.
    """
    if observed is None:
        return False
    if desired["kind"] in NO_READY_CONDITION:
        return True
    cond = ready_condition(observed)
    return bool(cond and cond.get("status") == "True")


def blocker(desired: Mapping[str, Any], observed: Mapping[str, Any] | None) -> Blocker:
    """Why one composed object is not ready: ``Creating`` until observed, else its own Ready
    reason and message (cut to 500 characters).
    """
    meta = desired["metadata"]
    if observed is None:
        return Blocker(
            desired["kind"], meta["name"], meta.get("namespace"), "Creating", "not created yet"
        )
    cond = ready_condition(observed) or {}
    reason = str(cond.get("reason") or "NotReady")
    message = str(cond.get("message") or "no Ready condition yet")[:500]
    return Blocker(desired["kind"], meta["name"], meta.get("namespace"), reason, message)


def first_blocker(
    desired: Mapping[str, Mapping[str, Any]],
    ready: Mapping[str, bool],
    observed: Mapping[str, Mapping[str, Any]],
) -> Blocker | None:
    """The first not-ready object in deployment order (:data:`ORDER`, then key), or None."""
    pending = [k for k in desired if not ready.get(k)]
    if not pending:
        return None
    rank = {kind: i for i, kind in enumerate(ORDER)}
    pending.sort(key=lambda k: (rank.get(desired[k]["kind"], len(ORDER)), k))
    key = pending[0]
    return blocker(desired[key], observed.get(key))
