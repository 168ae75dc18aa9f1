"""Namespaces: the ops-owned deploy namespace and the claim's target namespaces.

``create`` composes a Namespace and refuses to take over one that exists and is not this
claim's (Crossplane would otherwise silently adopt it); ``adopt`` takes one over where policy
allows; ``existing`` composes nothing and only requires it to exist. Created namespaces carry
the policy's Pod Security Admission labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from function.compose import names
from function.compose.context import Context
from function.errors import PolicyViolation

PSA_PREFIX = "pod-security.kubernetes.io/"


def key_deploy() -> str:
    return "namespace-deploy"


def key_target(name: str) -> str:
    return names.resource_key("namespace", name)


def _namespace(ctx: Context, name: str) -> dict[str, Any]:
    labels = ctx.labels()
    for k, v in sorted(ctx.policy.namespaces.podSecurity.items()):
        labels[PSA_PREFIX + k] = v
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def owned_by(ctx: Context, obj: Mapping[str, Any] | None) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(names.LABEL_OWNER) == ctx.identity.labels()[names.LABEL_OWNER]


def build(
    ctx: Context,
    existing: Mapping[str, Mapping[str, Any] | None],
    observed: Mapping[str, Any],
) -> dict[str, dict[str, Any]]:
    """Namespace objects by composition-resource name.

    ``existing`` maps a namespace name to the live object read as a required resource (None
    when it does not exist, missing when not yet known); ``observed`` holds what this XR
    already composes, which always counts as ours.
    """
    out: dict[str, dict[str, Any]] = {}
    if ctx.owns_deploy_namespace:
        out[key_deploy()] = _namespace(ctx, ctx.deploy_namespace)
    for i, ns in enumerate(ctx.targets):
        key = key_target(ns.name)
        live = existing.get(ns.name)
        if ns.mode == "existing":
            if ns.name in existing and live is None:
                raise PolicyViolation(
                    f"spec.namespaces[{i}]",
                    f"namespace {ns.name!r} does not exist (mode existing composes no Namespace)",
                )
            continue
        if (
            ns.mode == "create"
            and live is not None
            and key not in observed
            and not owned_by(ctx, live)
        ):
            raise PolicyViolation(
                f"spec.namespaces[{i}]",
                f"namespace {ns.name!r} already exists and is not owned by this claim; "
                "use mode existing (or adopt, where policy allows)",
            )
        other = ((live or {}).get("metadata") or {}).get("labels", {}).get(names.LABEL_OWNER)
        if ns.mode == "adopt" and other and key not in observed and not owned_by(ctx, live):
            raise PolicyViolation(
                f"spec.namespaces[{i}]",
                f"namespace {ns.name!r} is owned by another claim ({other}); it cannot be adopted",
            )
        out[key] = _namespace(ctx, ns.name)
    return out
