"""The tests' view of :mod:`function.settle` (the cluster stand-in ``render --settle`` uses).

``converge`` keeps the tests' shape: every render in order and the XR with its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from function.render import Rendered
from function.settle import READY_AT, keys, settle, with_status
from function.settle import converge as _converge

__all__ = ["READY_AT", "converge", "keys", "settle", "with_status"]


async def converge(
    xr: Mapping[str, Any], policy: Mapping[str, Any], *, rounds: int = 8, **kw: Any
) -> tuple[list[Rendered], dict[str, Any]]:
    """Reconcile until nothing new is composed; every render in order, and the XR with its status."""
    out = await _converge(xr, policy, rounds=rounds, **kw)
    return out.renders, out.xr
