"""Crossplane Usages that order deletion: Flux first, then RBAC and secrets, Namespaces last.

Deleting a claim deletes everything it composed at once unless something orders it. Flux
must go first so helm-controller and kustomize-controller can uninstall and prune *with the
deployer's rights*; those rights (Roles, RoleBindings, the ServiceAccount) and the secrets
must outlive them, and created Namespaces must outlive everything inside them. A
``protection.crossplane.io/v1beta1`` Usage blocks deleting its ``of`` while its ``by``
exists, and lives in the namespace of its ``by``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from function.compose import names
from function.compose.context import Context

API = "protection.crossplane.io/v1beta1"


def _ref(obj: Mapping[str, Any], *, with_namespace: bool) -> dict[str, Any]:
    meta = obj["metadata"]
    ref: dict[str, Any] = {"name": meta["name"]}
    if with_namespace and meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "resourceRef": ref}


def key_usage(key: str) -> str:
    return names.key("usage", key)


def _usage(
    ctx: Context, key: str, of: Mapping[str, Any], by: Mapping[str, Any], reason: str
) -> dict[str, Any]:
    by_ns = by["metadata"].get("namespace")
    name = ctx.names.usage(key, of["kind"])
    return {
        "apiVersion": API,
        "kind": "Usage",
        "metadata": ctx.meta(name, by_ns),
        "spec": {
            "of": _ref(of, with_namespace=True),
            "by": _ref(by, with_namespace=False),
            "reason": reason,
            "replayDeletion": True,
        },
    }


def build(
    ctx: Context, desired: Mapping[str, Mapping[str, Any]], flux_key: str | None
) -> dict[str, dict[str, Any]]:
    """Usages for the resources in ``desired``; ``flux_key`` is the Flux release's key, if
    composed.
    """
    out: dict[str, dict[str, Any]] = {}
    if flux_key and flux_key in desired:
        release = desired[flux_key]
        for key, obj in sorted(desired.items()):
            if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ExternalSecret"):
                out[key_usage(key)] = _usage(
                    ctx,
                    key,
                    obj,
                    release,
                    f"{release['kind']} uninstalls with the deployer's rights and secrets",
                )
    # Namespaces outlive what is inside them: each created target namespace is used by the
    # RoleBinding in it, and the deploy namespace by the deploy ServiceAccount.
    for key, obj in sorted(desired.items()):
        if obj["kind"] != "Namespace":
            continue
        ns = obj["metadata"]["name"]
        user = next(
            (
                o
                for o in (desired[k] for k in sorted(desired))
                if o["metadata"].get("namespace") == ns
                and o["kind"] in ("RoleBinding", "ServiceAccount")
            ),
            None,
        )
        if user is not None:
            out[key_usage(key)] = _usage(
                ctx, key, obj, user, "Namespace outlives what is deployed into it"
            )
    return out
