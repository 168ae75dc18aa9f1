"""A cluster that does what it is told, for renders: every composed object exists and is Ready.

Stands in for Crossplane applying a render and the controllers settling it, so tests (and
examples/observed/make-observed.py) can follow a claim through its reconciles: Namespaces
first, then what goes into them, then the Flux objects once the gate opens, then the Usages.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from function.render import Rendered, render

READY_AT = "2026-12-01T00:00:00Z"
NO_READY_CONDITION = ("Namespace", "ServiceAccount", "Role", "RoleBinding")


def digest_of(rendered: Rendered) -> Mapping[str, Any] | None:
    """The normalised descriptor digest the function reported for a render."""
    return ((rendered.xr.get("status") or {}).get("component") or {}).get("normalisedDigest")


def settle(
    resources: Iterable[Mapping[str, Any]], digest: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The objects as the API server and their controllers would report them once settled.

    ``digest``: the normalised descriptor digest the OCM controller computes for the version
    (it reports it in ``status.component.digest``; the function reports the same value in the
    XR's ``status.component.normalisedDigest``).
    """
    out = []
    for obj in resources:
        o = copy.deepcopy(dict(obj))
        o["metadata"]["generation"] = 1
        if o["kind"] not in NO_READY_CONDITION:
            o["status"] = {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Ready",
                        "message": "Ready",
                        "lastTransitionTime": READY_AT,
                    }
                ],
            }
            if (
                o["kind"] == "Component"
            ):  # the OCM controller: Ready for the generation it reconciled
                o["status"]["observedGeneration"] = 1
                o["status"]["component"] = {
                    "component": o["spec"]["component"],
                    "version": o["spec"]["semver"],
                    "repositorySpec": {
                        "type": "OCIRegistry",
                        "baseUrl": "http://127.0.0.1:5000",
                        "subPath": "source",
                    },
                }
                if digest is not None:
                    o["status"]["component"]["digest"] = dict(digest)
        out.append(o)
    return out


def reporting(
    observed: Iterable[Mapping[str, Any]], descriptor: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``observed`` with the OCM Component reporting ``descriptor``'s normalised digest, as
    the controller does once it has read that descriptor (another component than the one the
    observed files were made for).
    """
    from function.ocm import normalisation

    out = copy.deepcopy([dict(o) for o in observed])
    for o in out:
        if o["kind"] == "Component":
            o["status"]["component"]["digest"] = normalisation.digest(
                descriptor, normalisation.V4ALPHA1
            ).to_status()
    return out


def keys(rendered: Rendered) -> list[str]:
    return [
        r["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        for r in rendered.resources
    ]


def with_status(xr: Mapping[str, Any], rendered: Rendered) -> dict[str, Any]:
    """The XR as the next request observes it: the status the last reconcile wrote."""
    out = copy.deepcopy(dict(xr))
    out["status"] = copy.deepcopy(
        {k: v for k, v in (rendered.xr.get("status") or {}).items() if k != "conditions"}
    )
    return out


async def converge(
    xr: Mapping[str, Any], policy: Mapping[str, Any], *, rounds: int = 8, **kw: Any
) -> tuple[list[Rendered], dict[str, Any]]:
    """Reconcile until nothing new is composed; every render in order, and the XR with its status."""
    xr = copy.deepcopy(dict(xr))
    out = await render(xr, policy, **kw)
    seen = [out]
    for _ in range(rounds):
        if out.fatal is not None:
            break
        xr = with_status(xr, out)
        again = await render(xr, policy, observed=settle(out.resources, digest_of(out)), **kw)
        seen.append(again)
        if keys(again) == keys(out):
            break
        out = again
    return seen, xr
