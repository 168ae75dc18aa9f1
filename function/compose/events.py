"""Which findings become Kubernetes events this reconcile, and which stay in status.

Crossplane turns every Warning and Normal result into an event, and the function runs about
once a minute: a finding returned on every run (a ConfigData warning that holds as long as
the component does) would be re-sent forever and bury everything else. So the function keeps
the current findings in XR status (``status.warnings``, condition ``ConfigDataWarnings``) and
emits an event only for what the XR's observed status does not show yet: a warning when it
first appears or its text changes, a waiting note when what blocks the deployment changes.
The decision is a pure function of the request (the observed XR status), so every replica of
the function answers a request the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from function.compose.readiness import Blocker

Severity = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Note:
    """One finding of a reconcile, sent as an event of its ``severity`` when it is new."""

    severity: Severity
    reason: str
    message: str


def current_warnings(notes: list[Note]) -> list[dict[str, str]]:
    """``status.warnings``: every Warning finding of this reconcile, once each, in order."""
    out: list[dict[str, str]] = []
    for n in notes:
        entry = {"reason": n.reason, "message": n.message}
        if n.severity == "Warning" and entry not in out:
            out.append(entry)
    return out


def _same_blocker(blocked: Blocker | None, previous: Any) -> bool:
    if blocked is None or not isinstance(previous, Mapping):
        return False
    was = (
        previous.get("kind"),
        previous.get("namespace"),
        previous.get("name"),
        previous.get("reason"),
    )
    return was == (blocked.kind, blocked.namespace, blocked.name, blocked.reason)


def to_emit(notes: list[Note], blocked: Blocker | None, previous: Mapping[str, Any]) -> list[Note]:
    """The notes to send as events, given the XR status the last successful reconcile wrote."""
    seen = previous.get("warnings")
    reported = {
        (w.get("reason"), w.get("message"))
        for w in (seen if isinstance(seen, list) else [])
        if isinstance(w, Mapping)
    }
    same_blocker = _same_blocker(blocked, previous.get("blockedBy"))
    out: list[Note] = []
    for n in notes:
        if n.severity == "Warning":
            if (n.reason, n.message) not in reported and n not in out:
                out.append(n)
        elif not same_blocker:
            out.append(n)
    return out
