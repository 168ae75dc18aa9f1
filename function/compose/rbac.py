"""The deploy ServiceAccount and its least-privilege Roles and RoleBindings.

The ServiceAccount lives in the ops-owned deploy namespace (anyone with ``edit`` in a
namespace can impersonate its ServiceAccounts, so never where the service team works). It
gets the policy's deployer rules plus the claim's admitted extra rules in each target
namespace, and, for Helm, rights on Secrets where Helm keeps its release storage: the
per-claim deploy namespace (only this claim's Secrets live there), or -- with a shared deploy
namespace, where a Secret right would reach every other claim's credentials and release
state, and ``resourceNames`` cannot restrict ``create`` -- the claim's first target namespace.
No deployer gets any right in a shared deploy namespace. Each Role and RoleBinding has its
own name (objectnames.py): Crossplane v2.2.4 cannot tell same-named objects in two namespaces
apart. Crossplane must itself hold every permission granted here (RBAC escalation
prevention): see package/crossplane-rbac.yaml.
"""

from __future__ import annotations

from typing import Any

from function.compose import collisions, names
from function.compose.context import Context

_RBAC = "rbac.authorization.k8s.io/v1"
_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]


def key_serviceaccount() -> str:
    """Composition-resource key of the deployer ServiceAccount."""
    return "serviceaccount-deployer"


def key_role(namespace: str | None) -> str:
    """Composition-resource key of the deployer Role in ``namespace`` (None: Helm's storage)."""
    return "role-deploy" if namespace is None else names.key("role", namespace)


def key_rolebinding(namespace: str | None) -> str:
    """Composition-resource key of the RoleBinding beside :func:`key_role`."""
    return "rolebinding-deploy" if namespace is None else names.key("rolebinding", namespace)


def storage_rule() -> dict[str, Any]:
    """Helm's release storage: Secrets in its storage namespace."""
    return {"apiGroups": [""], "resources": ["secrets"], "verbs": list(_RW)}


def _role_pair(
    ctx: Context, name: str, namespace: str, rules: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    role = {
        "apiVersion": _RBAC,
        "kind": "Role",
        "metadata": ctx.meta(name, namespace),
        "rules": rules,
    }
    binding = {
        "apiVersion": _RBAC,
        "kind": "RoleBinding",
        "metadata": ctx.meta(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": ctx.names.serviceaccount,
                "namespace": ctx.deploy_namespace,
            }
        ],
    }
    return role, binding


def build(ctx: Context) -> collisions.Objects:
    """The deployer: a ServiceAccount without a token, and in every target namespace a Role
    with the policy's rules and the claim's extra rules, bound to it; with Helm, the rights on
    its release storage Secrets (in the deploy namespace, or the first target namespace).

    Returns:
        The objects by composition-resource key.
    """
    out = collisions.objects(
        (
            key_serviceaccount(),
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": ctx.meta(ctx.names.serviceaccount, ctx.deploy_namespace),
                "automountServiceAccountToken": False,
            },
            "the deployer",
        )
    )
    rules = [r.to_rbac() for r in ctx.policy.rbac.deployerRules]
    extra = [r.to_rbac() for r in (ctx.spec.rbac.extraRules if ctx.spec.rbac else [])]
    helm = ctx.flavour == "helm"
    storage = ctx.helm_storage_namespace
    for i, ns in enumerate(ctx.targets):
        granted = rules + extra
        if helm and ns.name == storage and storage_rule() not in granted:
            granted = [*granted, storage_rule()]
        role, binding = _role_pair(ctx, ctx.names.role(ns.name), ns.name, granted)
        where = f"spec.namespaces[{i}]"
        collisions.merge(out, {key_role(ns.name): role, key_rolebinding(ns.name): binding}, where)
    if helm and storage == ctx.deploy_namespace:
        # Helm keeps release state as Secrets in storageNamespace: the per-claim deploy namespace.
        role, binding = _role_pair(ctx, ctx.names.helm_storage_role, storage, [storage_rule()])
        where = "Helm's release storage"
        collisions.merge(out, {key_role(None): role, key_rolebinding(None): binding}, where)
    return out
