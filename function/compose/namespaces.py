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

from function.compose import collisions, names, tenancy
from function.compose.context import Context

PSA_PREFIX = "pod-security.kubernetes.io/"


def key_deploy() -> str:
    """Composition-resource key of the per-claim deploy Namespace."""
    return "deploy-namespace"


def key_target(name: str, observed: Mapping[str, Any] | None = None) -> str:
    """``namespace-<name>``, never cut: one key per namespace name, by construction.

    Releases before issue 30 cut keys of names over 53 characters to 63 with a 32-bit hash
    (two such names could share one key). A Namespace still observed under its old key keeps
    it -- a changed key makes Crossplane delete the object -- but only when the object there
    *is* that Namespace (kind and name); a key that merely exists proves nothing. A target
    namespace is a DNS label, so no key here equals key_deploy().
    """
    fresh = f"namespace-{name}"
    old = names.legacy_key("namespace", name)
    if old != fresh and observed is not None and is_object(observed.get(old), "Namespace", name):
        return old
    return fresh


def is_object(obj: Any, kind: str, name: str) -> bool:
    """Whether ``obj`` is the ``kind`` named ``name`` (the identity part of ownership proof)."""
    if not isinstance(obj, Mapping) or obj.get("kind") != kind:
        return False
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and meta.get("name") == name


def observed_own(ctx: Context, observed: Mapping[str, Any], key: str, kind: str, name: str) -> bool:
    """The object observed under ``key`` is this claim's ``kind`` ``name``: kind and name
    agree, and so do all ownership marks (owner label, claim namespace and name annotations)
    -- or, for an object composed before the function wrote them, Crossplane's controller
    reference names this XR. Anything less -- a key that exists, an object of another name
    under it -- proves nothing.
    """
    obj = observed.get(key)
    return is_object(obj, kind, name) and (ctx.identity.owns(obj) or ctx.identity.controls(obj))


def _namespace(ctx: Context, name: str, extra: Mapping[str, str]) -> dict[str, Any]:
    meta = ctx.meta(name)
    labels = meta["labels"]
    labels.update(extra)
    for k, v in sorted(ctx.policy.namespaces.podSecurity.items()):
        labels[PSA_PREFIX + k] = v
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def owned_by(ctx: Context, obj: Mapping[str, Any] | None) -> bool:
    """Whether a live Namespace was composed for this very claim."""
    return ctx.identity.owns(obj)


def build(
    ctx: Context,
    existing: Mapping[str, Mapping[str, Any] | None],
    observed: Mapping[str, Any],
) -> collisions.Objects:
    """Namespace objects by composition-resource name.

    ``existing`` maps a namespace name to the live object read as a required resource (None
    when it does not exist, missing when not yet known); ``observed`` holds what this XR
    already composes: an object there counts as ours only with proof (:func:`observed_own`).
    Every object goes through ``collisions.merge``: two targets whose keys met would be one
    Fatal naming both, never one Namespace written over another.
    """
    keys = {ns.name: key_target(ns.name, observed) for ns in ctx.targets}
    proven = {
        ns.name
        for ns in ctx.targets
        if observed_own(ctx, observed, keys[ns.name], "Namespace", ns.name)
    }
    tenancy.check_xr_tenant(ctx.identity, ctx.policy, existing)
    tenancy.check_live(ctx.spec, ctx.policy, ctx.identity, existing, proven)
    out = collisions.Objects()
    if ctx.owns_deploy_namespace:
        tenancy.check_deploy_namespace(
            ctx.identity,
            ctx.deploy_namespace,
            existing.get(ctx.deploy_namespace),
            observed=observed_own(ctx, observed, key_deploy(), "Namespace", ctx.deploy_namespace),
        )
        collisions.merge(
            out,
            {
                key_deploy(): _namespace(
                    ctx, ctx.deploy_namespace, {names.LABEL_DEPLOY_NAMESPACE: "true"}
                )
            },
            "the deploy namespace",
        )
    tenant = {ctx.policy.namespaces.tenantLabel: ctx.identity.tenant}
    for i, ns in enumerate(ctx.targets):
        if ns.mode != "existing":
            collisions.merge(
                out,
                {keys[ns.name]: _namespace(ctx, ns.name, tenant)},
                f"spec.namespaces[{i}]",
            )
    return out
