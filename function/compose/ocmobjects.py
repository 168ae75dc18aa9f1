"""OCM delivery objects (``delivery.ocm.software/v1alpha1``): Repository, Component, Resource.

They let the OCM controllers verify and track the component in the cluster (signatures,
status) while the function does localization and configuration itself. The Component is
pinned to the version the function resolved, with ``downgradePolicy: Allow``: the claim
already pins the version, so rolling back must not leave the Component stuck. Localized
images are reported in XR status, not as one Resource each.

With ``ocm.verify`` in the policy the function verifies those signatures itself
(compose/integrity.py) and the Component verifies them too (``spec.verify``); the OCM
controller then reports it Ready only for a version whose signatures verify, and the gate
(compose/gates.py) opens only for such a Component reporting the descriptor digest the
function computed.
"""

from __future__ import annotations

import base64
from typing import Any

from function.api.policy import OcmPolicy
from function.compose.context import Context
from function.compose.durations import canonical
from function.ocm.model import ComponentVersion, Resource

API = "delivery.ocm.software/v1alpha1"


def key_repository() -> str:
    """Composition-resource key of the OCM Repository."""
    return "ocm-repository"


def key_component() -> str:
    """Composition-resource key of the OCM Component (the one the gate watches)."""
    return "ocm-component"


def key_resource() -> str:
    """Composition-resource key of the OCM Resource."""
    return "ocm-resource"


def _ocm_config(ctx: Context) -> list[dict[str, Any]]:
    creds = ctx.spec.credentials
    if not (creds and creds.repository):
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "name": ctx.names.repository_secret,
            "policy": "Propagate",
        }
    ]


def verify(policy: OcmPolicy) -> list[dict[str, Any]]:
    """``Component.spec.verify``: the controller base64-decodes ``value``; a Secret holds raw
    bytes.
    """
    out: list[dict[str, Any]] = []
    for v in policy.verify:
        if v.publicKey is not None:
            value = base64.b64encode(v.publicKey.encode()).decode()
            out.append({"signature": v.signature, "value": value})
    return out


#: Identity attributes the OCM toolkit sets itself (``name``) and never takes from
#: ``extraIdentity``; a descriptor that lists it there cannot rename what is tracked.
RESERVED_IDENTITY = frozenset({"name"})


def tracked_identity(ctx: Context, deployable: Resource) -> dict[str, str]:
    """``byReference.resource``: the claim's choice (its name and extraIdentity), completed by
    the selected resource's other extraIdentity attributes so the controller finds exactly it.

    The descriptor is tenant-authored: its attributes were *matched* against the claim to
    select the resource (``function.ocm.select``) and only fill in keys the claim left out;
    ``name`` always comes from the claim, so an ``extraIdentity: {name: ...}`` in the
    descriptor cannot make the OCM controller track (and verify) another resource.
    """
    chosen = ctx.spec.deploy.resource
    identity = {**deployable.extra_identity, **chosen.extraIdentity}
    extra = sorted((k, v) for k, v in identity.items() if k not in RESERVED_IDENTITY)
    return {"name": chosen.name, **dict(extra)}


def build(ctx: Context, cv: ComponentVersion, deployable: Resource) -> dict[str, dict[str, Any]]:
    """The OCM controller's objects (Repository, Component, Resource) for the deployable, so
    the controller verifies what Flux will deploy (the OCM gate waits for the Component).

    Args:
        ctx: The claim's context.
        cv: The resolved component version.
        deployable: The resource Flux deploys.
    """
    # The OCM controller writes spec.interval back as Go prints it (10m -> 10m0s), so compose that.
    interval = canonical(ctx.policy.ocm.interval, "ocm.interval")
    repo_spec: dict[str, Any] = {
        "type": "OCIRegistry",
        "baseUrl": f"{'http' if ctx.repository.plain_http else 'https'}://{ctx.repository.host}",
    }
    if ctx.repository.base.strip("/"):
        repo_spec["subPath"] = ctx.repository.base.strip("/")
    cfg = _ocm_config(ctx)
    repository: dict[str, Any] = {"repositorySpec": repo_spec, "interval": interval}
    component: dict[str, Any] = {
        "repositoryRef": {"name": ctx.names.deployment},
        "component": cv.name,
        "semver": cv.version,
        "downgradePolicy": "Allow",
        "interval": interval,
    }
    if ctx.policy.ocm.verify:
        component["verify"] = verify(ctx.policy.ocm)
    resource: dict[str, Any] = {
        "componentRef": {"name": ctx.names.deployment},
        "resource": {"byReference": {"resource": tracked_identity(ctx, deployable)}},
    }
    if cfg:
        for spec in (repository, component, resource):
            spec["ocmConfig"] = cfg
    ns = ctx.deploy_namespace
    return {
        key_repository(): {
            "apiVersion": API,
            "kind": "Repository",
            "metadata": ctx.meta(ctx.names.deployment, ns),
            "spec": repository,
        },
        key_component(): {
            "apiVersion": API,
            "kind": "Component",
            "metadata": ctx.meta(ctx.names.deployment, ns),
            "spec": component,
        },
        key_resource(): {
            "apiVersion": API,
            "kind": "Resource",
            "metadata": ctx.meta(ctx.names.deployment, ns),
            "spec": resource,
        },
    }
