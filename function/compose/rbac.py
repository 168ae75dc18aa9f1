"""The deploy ServiceAccount and its least-privilege Roles and RoleBindings.

The ServiceAccount lives in the ops-owned deploy namespace (anyone with ``edit`` in a
namespace can impersonate its ServiceAccounts, so never where the service team works). It
gets the policy's deployer rules plus the claim's admitted extra rules in each target
namespace, and, for Helm, rights on Secrets in the deploy namespace where Helm keeps its
release storage. Crossplane must itself hold every permission granted here (RBAC
escalation prevention): see package/crossplane-rbac.yaml.
"""

from __future__ import annotations

from typing import Any

from function.api.claim import PolicyRule
from function.compose import names
from function.compose.context import Context

_RBAC = "rbac.authorization.k8s.io/v1"
_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]


def key_serviceaccount() -> str:
    return "serviceaccount-deployer"


def key_role(namespace: str | None) -> str:
    return "role-deploy" if namespace is None else names.resource_key("role", namespace)


def key_rolebinding(namespace: str | None) -> str:
    return (
        "rolebinding-deploy" if namespace is None else names.resource_key("rolebinding", namespace)
    )


def _rule(r: PolicyRule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiGroups": list(r.apiGroups),
        "resources": list(r.resources),
        "verbs": list(r.verbs),
    }
    if r.resourceNames:
        out["resourceNames"] = list(r.resourceNames)
    return out


def _role_pair(
    ctx: Context, namespace: str, rules: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    role = {
        "apiVersion": _RBAC,
        "kind": "Role",
        "metadata": ctx.meta(ctx.deployer_name, namespace),
        "rules": rules,
    }
    binding = {
        "apiVersion": _RBAC,
        "kind": "RoleBinding",
        "metadata": ctx.meta(ctx.deployer_name, namespace),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": ctx.deployer_name,
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": ctx.deployer_name, "namespace": ctx.deploy_namespace}
        ],
    }
    return role, binding


def build(ctx: Context) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {
        key_serviceaccount(): {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": ctx.meta(ctx.deployer_name, ctx.deploy_namespace),
            "automountServiceAccountToken": False,
        }
    }
    rules = [_rule(r) for r in ctx.policy.rbac.deployerRules]
    extra = [_rule(r) for r in (ctx.spec.rbac.extraRules if ctx.spec.rbac else [])]
    for ns in ctx.targets:
        role, binding = _role_pair(ctx, ns.name, rules + extra)
        out[key_role(ns.name)] = role
        out[key_rolebinding(ns.name)] = binding
    if ctx.flavour == "helm":
        # Helm keeps release state as Secrets in storageNamespace (the deploy namespace).
        storage = [{"apiGroups": [""], "resources": ["secrets"], "verbs": list(_RW)}]
        role, binding = _role_pair(ctx, ctx.deploy_namespace, storage)
        out[key_role(None)] = role
        out[key_rolebinding(None)] = binding
    return out
