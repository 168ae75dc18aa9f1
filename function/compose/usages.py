"""Crossplane Usages that order deletion, using only what Crossplane v2.2.4 enforces.

Deleting a claim deletes the XR; Crossplane removes its finalizer and the Kubernetes garbage
collector then deletes every composed object at once. Only Crossplane's Usage webhook orders
that: it refuses to delete an object that a Usage protects (is ``of``), and a composed Usage
is released only once its ``by`` is gone (its owner reference to ``by`` also keeps the
garbage collector off it until then). What v2.2.4 enforces, and what this module uses:

* a namespaced ``Usage`` lives in the namespace of its ``by`` (the API has no namespace for
  ``by``) and protects a namespaced ``of`` in any namespace: the webhook finds it under the
  ``of``'s own namespace (``resourceRef.namespace``; upstream e2e
  ``protection/usage/standalone-namespaced/with-by-across-namespaces``);
* a namespaced Usage of a cluster-scoped object protects nothing (crossplane/crossplane#7249:
  indexed under the Usage's namespace, looked up under ``""``), so none is composed;
* a ``ClusterUsage`` relates two cluster-scoped objects (``by`` has no namespace).

The order (docs/security.md "Deleting a claim"):

1. Flux goes first: nothing protects the HelmRelease or Kustomization, whose finalizer
   uninstalls or prunes with the deployer's rights.
2. The deployer's ServiceAccount, Roles and RoleBindings and every ExternalSecret (pull,
   repository, service secrets) are each ``of`` a Usage ``by`` the Flux release, in the
   deploy namespace: they outlive it wherever they are.
3. A target Namespace the claim created (or adopted) starts terminating at once, but the
   namespace controller cannot finish: the protected objects inside it are refused deletion
   until the Flux release is gone. So each such Namespace outlives the Flux release.
4. The per-claim deploy Namespace is ``of`` a ClusterUsage ``by`` each target Namespace the
   claim composes: it is not even marked for deletion (Helm's release storage, the
   ServiceAccount, the Flux objects stay intact) until those have gone, after Flux.

Not enforceable in v2.2.4: Helm's release storage Secrets (written by helm-controller,
composed by nobody) where their namespace terminates at once: a per-claim deploy Namespace
when the claim composes no target Namespace (every target ``existing``), or, with a shared
deploy namespace, a created first target Namespace (where Helm's storage then lives). The
protected objects there still outlive the Flux release (namespace finalization waits for
them); the storage may not (docs/security.md, "Deleting a claim").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from function.compose import names
from function.compose.context import Context

API = "protection.crossplane.io/v1beta1"

# What must outlive the Flux release: the deployer's identity and rights, and the secrets.
PROTECTED_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ExternalSecret")
CLUSTER_SCOPED_KINDS = ("Namespace", "ClusterUsage")


@dataclass(frozen=True)
class Planned:
    """A Usage or ClusterUsage, with the composition-resource names of its ``of`` and ``by``."""

    key: str
    obj: dict[str, Any]
    of_key: str
    by_key: str


def _ref(obj: Mapping[str, Any], *, with_namespace: bool) -> dict[str, Any]:
    meta = obj["metadata"]
    ref: dict[str, Any] = {"name": meta["name"]}
    if with_namespace and meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "resourceRef": ref}


def key_usage(key: str) -> str:
    """Composition-resource key of the Usage protecting the object under ``key``."""
    return names.key("usage", key)


def key_cluster_usage(by_key: str) -> str:
    """Composition-resource key of the ClusterUsage ``by`` the Namespace under ``by_key``."""
    return names.key("clusterusage", by_key)


def _usage(
    ctx: Context, of: Mapping[str, Any], by: Mapping[str, Any], reason: str, *, key: str | None
) -> dict[str, Any]:
    """A Usage of ``of`` (composition key ``key``) in the namespace of ``by``; with no
    ``key``, a ClusterUsage relating two cluster-scoped objects.
    """
    if key is None:
        kind, meta = "ClusterUsage", ctx.meta(ctx.names.cluster_usage(by["metadata"]["name"]))
    else:
        name = ctx.names.usage(key, of["kind"])
        kind, meta = "Usage", ctx.meta(name, by["metadata"]["namespace"])
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": meta,
        "spec": {
            "of": _ref(of, with_namespace=key is not None),
            "by": _ref(by, with_namespace=False),
            "reason": reason,
            "replayDeletion": True,
        },
    }


def build(
    ctx: Context,
    objects: Mapping[str, Mapping[str, Any]],
    release_key: str,
    deploy_namespace_key: str,
) -> list[Planned]:
    """Every Usage the objects call for (the core decides which are composed this reconcile)."""
    out: list[Planned] = []
    release = objects.get(release_key)
    if release is not None:
        reason = f"{release['kind']} uninstalls with the deployer's rights and secrets"
        for key, obj in sorted(objects.items()):
            if obj["kind"] in PROTECTED_KINDS:
                out.append(
                    Planned(
                        key_usage(key),
                        _usage(ctx, obj, release, reason, key=key),
                        key,
                        release_key,
                    )
                )
    deploy = objects.get(deploy_namespace_key)
    if deploy is not None:
        for key, obj in sorted(objects.items()):
            if obj["kind"] == "Namespace" and key != deploy_namespace_key:
                reason = (
                    "the deploy namespace (Helm storage, deployer) outlives the target namespaces"
                )
                out.append(
                    Planned(
                        key_cluster_usage(key),
                        _usage(ctx, deploy, obj, reason, key=None),
                        deploy_namespace_key,
                        key,
                    )
                )
    return out
