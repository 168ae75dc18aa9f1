"""Flux objects: an OCIRepository pinned by digest, and a HelmRelease or a Kustomization.

Every field follows ``packaging.md``: the source is pinned with ``ref.digest`` (a tag would
resolve the OCM index to the descriptor manifest), always has a ``layerSelector``, and is
``insecure`` only for hosts the policy marks plain-HTTP (``insecure`` also turns TLS
verification off, so it is never a claim's choice). Both consumers live next to their source
in the deploy namespace (``--no-cross-namespace-refs``) and impersonate the deploy
ServiceAccount (``--default-service-account``). Values and patches come from the ConfigData
engine unchanged; the function only adds the image pull secret. Durations are composed in Go's
spelling (``10m0s``), like every other controller-read duration (``durations``).
"""

from __future__ import annotations

import json
from typing import Any

from function.api.policy import RegistryPolicy
from function.compose import names
from function.compose.context import Context
from function.compose.durations import canonical
from function.configdata import paths
from function.configdata.fluxmutation import FluxMutation
from function.ocm.access import FluxSource

SOURCE_API = "source.toolkit.fluxcd.io/v1"
HELM_API = "helm.toolkit.fluxcd.io/v2"
KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"

# Where a pod template sits in each workload kind, for the pull-secret patch.
_POD_SPEC_PATHS = {
    "Deployment": ("apps", "spec", "template", "spec"),
    "StatefulSet": ("apps", "spec", "template", "spec"),
    "DaemonSet": ("apps", "spec", "template", "spec"),
    "ReplicaSet": ("apps", "spec", "template", "spec"),
    "Job": ("batch", "spec", "template", "spec"),
    "CronJob": ("batch", "spec", "jobTemplate", "spec", "template", "spec"),
}


def key_source() -> str:
    """Composition-resource key of the OCIRepository."""
    return "flux-ocirepository"


def key_release(flavour: str) -> str:
    """Composition-resource key of the HelmRelease or Kustomization."""
    return "flux-helmrelease" if flavour == "helm" else "flux-kustomization"


def kind_of(flavour: str) -> str:
    """The Flux kind that deploys ``flavour``."""
    return "HelmRelease" if flavour == "helm" else "Kustomization"


def source(ctx: Context, src: FluxSource, entry: RegistryPolicy) -> dict[str, Any]:
    """The OCIRepository, with the TLS settings of ``entry``: the policy entry for the host its
    URL names (core.py looks it up with ``admission.registry_for``).

    The source is where the function read (the component's own repository), so that entry is
    the admitted one; it is looked up by the URL's host all the same, so no setting of one
    host (``insecure``, the CA, the repository credential) can ever be applied to another.
    """
    spec: dict[str, Any] = {
        "interval": canonical(ctx.policy.flux.sourceInterval, "flux.sourceInterval"),
        "url": src.url,
        "ref": {"digest": src.digest},
        "layerSelector": {"mediaType": src.layer_media_type, "operation": src.layer_operation},
    }
    if entry.plainHTTP and src.plain_http:
        spec["insecure"] = True
    creds = ctx.spec.credentials
    if creds and creds.repository and src.host.lower() == ctx.repository.host.lower():
        spec["secretRef"] = {"name": ctx.names.repository_secret}
    if entry.certSecretName and not spec.get("insecure"):
        spec["certSecretRef"] = {"name": entry.certSecretName}
    return {
        "apiVersion": SOURCE_API,
        "kind": "OCIRepository",
        "metadata": ctx.meta(ctx.names.deployment, ctx.deploy_namespace),
        "spec": spec,
    }


def helm_release(ctx: Context, mutation: FluxMutation) -> dict[str, Any]:
    """The HelmRelease: the chart from the OCIRepository, the ConfigData's values (plus the pull
    Secret where the policy says), installed as the deployer into the first target namespace.
    """
    f = ctx.policy.flux
    values: dict[str, Any] = json.loads(json.dumps(dict(mutation.helm_values)))
    creds = ctx.spec.credentials
    if creds and creds.pull:
        where = paths.dotted(ctx.policy.rbac.helmPullSecretsPath)
        paths.set_value(values, where, [{"name": ctx.names.pull_secret}], clear=True)
    install: dict[str, Any] = {"strategy": {"name": f.install.strategy}, "crds": f.install.crds}
    if f.install.disableWait:
        install["disableWait"] = True
    if f.install.remediation:
        install["remediation"] = {"retries": f.install.remediation.retries}
    upgrade: dict[str, Any] = {"strategy": {"name": f.upgrade.strategy}, "crds": f.upgrade.crds}
    if f.upgrade.remediation:
        upgrade["remediation"] = {"retries": f.upgrade.remediation.retries}
    spec: dict[str, Any] = {
        "interval": canonical(f.interval, "flux.interval"),
        "timeout": canonical(f.timeout, "flux.timeout"),
        "chartRef": {"kind": "OCIRepository", "name": ctx.names.deployment},
        "releaseName": ctx.release_name,
        "targetNamespace": ctx.primary_namespace,
        "storageNamespace": ctx.helm_storage_namespace,
        "serviceAccountName": ctx.names.serviceaccount,
        "driftDetection": {"mode": f.driftDetection},
        "install": install,
        "upgrade": upgrade,
    }
    if values:
        spec["values"] = values
    meta = ctx.meta(ctx.names.deployment, ctx.deploy_namespace)
    # what a claim choosing a release name looks for (docs/security.md, "Helm release names")
    meta["labels"][names.LABEL_RELEASE] = names.release_label(
        ctx.primary_namespace, ctx.release_name
    )
    return {"apiVersion": HELM_API, "kind": "HelmRelease", "metadata": meta, "spec": spec}


def _pull_secret_patches(ctx: Context) -> list[dict[str, Any]]:
    patches = []
    for kind, (group, *path) in _POD_SPEC_PATHS.items():
        body: dict[str, Any] = {"imagePullSecrets": [{"name": ctx.names.pull_secret}]}
        for step in reversed(path):
            body = {step: body}
        doc = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "not-used"}, **body}
        patches.append(
            {"patch": json.dumps(doc, sort_keys=True), "target": {"group": group, "kind": kind}}
        )
    return patches


def pull_secret_trace(ctx: Context, flavour: str) -> dict[str, Any] | None:
    """Where the function itself wrote the pull secret's name into the Flux object.

    ConfigData substitutions are traced rule by rule in ``status.configData``; this is the one
    value the policy, not a rule, writes, so it gets its own entry in ``status.deploy``.
    """
    creds = ctx.spec.credentials
    if not (creds and creds.pull):
        return None
    if flavour == "helm":
        written = [f"HelmRelease spec.values.{ctx.policy.rbac.helmPullSecretsPath}"]
    else:
        written = [
            f"Kustomization spec.patches: {kind} {'.'.join(path)}.imagePullSecrets"
            for kind, (_group, *path) in _POD_SPEC_PATHS.items()
        ]
    return {
        "name": ctx.names.pull_secret,
        "namespaces": [ns.name for ns in ctx.spec.namespaces],
        "writtenTo": written,
    }


def kustomization(ctx: Context, mutation: FluxMutation) -> dict[str, Any]:
    """The Kustomization: the directory from the OCIRepository with the ConfigData's patches
    (plus the pull Secret on every pod spec), applied as the deployer.
    """
    f = ctx.policy.flux
    patches = [dict(p) for p in mutation.kustomize_patches]
    creds = ctx.spec.credentials
    if creds and creds.pull:
        patches.extend(_pull_secret_patches(ctx))
    spec: dict[str, Any] = {
        "interval": canonical(f.interval, "flux.interval"),
        "retryInterval": canonical(f.retryInterval, "flux.retryInterval"),
        "timeout": canonical(f.timeout, "flux.timeout"),
        "sourceRef": {"kind": "OCIRepository", "name": ctx.names.deployment},
        "path": ctx.spec.deploy.path,
        "prune": f.prune,
        "wait": f.wait,
        "targetNamespace": ctx.primary_namespace,
        "serviceAccountName": ctx.names.serviceaccount,
    }
    if patches:
        spec["patches"] = patches
    return {
        "apiVersion": KUSTOMIZE_API,
        "kind": "Kustomization",
        "metadata": ctx.meta(ctx.names.deployment, ctx.deploy_namespace),
        "spec": spec,
    }


def build(
    ctx: Context, src: FluxSource, entry: RegistryPolicy, mutation: FluxMutation
) -> dict[str, dict[str, Any]]:
    """The Flux objects of one claim: the OCIRepository and the release of ``ctx.flavour``.

    Args:
        ctx: The claim's context.
        src: Where the deployable lives (url, digest, layer).
        entry: The policy entry for the source's host (TLS settings).
        mutation: What the ConfigData engine made of the claim's values.
    """
    release = helm_release(ctx, mutation) if ctx.flavour == "helm" else kustomization(ctx, mutation)
    return {key_source(): source(ctx, src, entry), key_release(ctx.flavour): release}
