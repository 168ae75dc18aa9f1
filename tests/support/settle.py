"""The tests' view of :mod:`function.edge.settle` (the cluster stand-in ``render --settle`` uses).

``converge`` keeps the tests' shape: every render in order and the XR with its status.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from function.edge.render import Rendered
from function.edge.settle import READY_AT, keys, settle, with_status
from function.edge.settle import converge as _converge

__all__ = ["READY_AT", "converge", "keys", "reporting", "settle", "with_status"]


async def converge(
    xr: Mapping[str, Any], policy: Mapping[str, Any], *, rounds: int = 8, **kw: Any
) -> tuple[list[Rendered], dict[str, Any]]:
    """Reconcile until nothing new is composed; every render in order, and the XR with its status."""
    out = await _converge(xr, policy, rounds=rounds, **kw)
    return out.renders, out.xr


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
