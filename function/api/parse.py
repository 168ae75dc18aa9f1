"""The request's documents as models: the function input as a Policy, the XR spec as a Spec.

Shared by the gRPC edge and the CLI (``sack8s xrd --policy``), so a policy file is read
the same way everywhere. Invalid input is one error naming the first invalid field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from function.api.claim import Spec
from function.api.policy import Policy
from function.errors import InvalidClaim, InvalidPolicy, SackError

# Fields Crossplane itself keeps in an XR's spec; they are not part of our API.
CROSSPLANE_SPEC_FIELDS = {
    "claimRef",
    "compositionRef",
    "compositionSelector",
    "compositionRevisionRef",
    "compositionUpdatePolicy",
    "compositeDeletePolicy",
    "resourceRefs",
    "writeConnectionSecretToRef",
    "publishConnectionDetailsTo",
    "environmentConfigRefs",
    "crossplane",
}


def pydantic_error(e: ValidationError, prefix: str, error: type[SackError]) -> SackError:
    """One error naming the first invalid field path (all of them, when short)."""
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in err["loc"]).replace(
            ".[", "["
        )
        parts.append((f"{prefix}.{loc}" if loc else prefix, err["msg"]))
    where, msg = parts[0]
    more = "; ".join(f"{w}: {m}" for w, m in parts[1:])
    return error(where, msg + (f" (also {more})" if more else ""))


def parse_policy(raw: Mapping[str, Any] | None) -> Policy:
    """The function input as a Policy; no input at all is the default (safe) policy.

    Raises:
        InvalidPolicy: naming the first invalid field under ``input``.
    """
    try:
        return Policy.model_validate(dict(raw or {}))
    except ValidationError as e:
        raise pydantic_error(e, "input", InvalidPolicy) from None


def parse_spec(xr: Mapping[str, Any]) -> Spec:
    """The XR's spec as a Spec, without the fields Crossplane itself keeps there.

    Raises:
        InvalidClaim: naming the first invalid field under ``spec``.
    """
    raw = xr.get("spec") or {}
    if not isinstance(raw, Mapping):
        raise InvalidClaim("spec", f"must be an object, got {type(raw).__name__}")
    spec = {k: v for k, v in raw.items() if k not in CROSSPLANE_SPEC_FIELDS}
    try:
        return Spec.model_validate(spec)
    except ValidationError as e:
        raise pydantic_error(e, "spec", InvalidClaim) from None
