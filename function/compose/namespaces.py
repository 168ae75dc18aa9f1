"""Namespaces: the ops-owned deploy namespace and the claim's target namespaces.

``create`` composes a Namespace and refuses to take over one that exists and is not this
claim's (Crossplane would otherwise silently adopt it); ``adopt`` takes one over where policy
allows and only what the claim's tenant owns; ``existing`` composes nothing and only requires
it to exist and be the tenant's (tenancy.py). Created and adopted namespaces carry the
policy's Pod Security Admission labels and the tenant label; the deploy namespace carries
``sack8s.io/deploy-namespace`` and never a tenant label, so no claim can ever reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from function.compose import names, tenancy
from function.compose.context import Context

PSA_PREFIX = "pod-security.kubernetes.io/"


def key_deploy() -> str:
    return "deploy-namespace"


def key_target(name: str) -> str:
    # The old key form on purpose: a changed key would make Crossplane delete the team's
    # namespace on upgrade. A target namespace is a DNS label, so it can never equal
    # key_deploy() (which no longer starts with "namespace-").
    return names.legacy_key("namespace", name)


def _namespace(ctx: Context, name: str, extra: Mapping[str, str]) -> dict[str, Any]:
    meta = ctx.meta(name)
    labels = meta["labels"]
    labels.update(extra)
    for k, v in sorted(ctx.policy.namespaces.podSecurity.items()):
        labels[PSA_PREFIX + k] = v
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def owned_by(ctx: Context, obj: Mapping[str, Any] | None) -> bool:
    return ctx.identity.owns(obj)


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
    tenancy.check_live(ctx.spec, ctx.policy, ctx.identity, existing, set(observed), key_target)
    out: dict[str, dict[str, Any]] = {}
    if ctx.owns_deploy_namespace:
        tenancy.check_deploy_namespace(
            ctx.identity,
            ctx.deploy_namespace,
            existing.get(ctx.deploy_namespace),
            observed=key_deploy() in observed,
        )
        out[key_deploy()] = _namespace(
            ctx, ctx.deploy_namespace, {names.LABEL_DEPLOY_NAMESPACE: "true"}
        )
    tenant = {ctx.policy.namespaces.tenantLabel: ctx.identity.tenant}
    for ns in ctx.targets:
        if ns.mode != "existing":
            out[key_target(ns.name)] = _namespace(ctx, ns.name, tenant)
    return out
