"""The pure composition core: claim + policy + component data → desired state.

No I/O, no clock, no randomness: everything it needs (the component, the values, what
exists in the cluster) was fetched before it runs, so the same input always gives the same
output, byte for byte, on every replica. It either returns a *complete* desired state or
raises one :class:`function.errors.SackError`; there is no partial result, because a
desired state that leaves something out deletes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Mapping

from function.api.claim import Spec
from function.api.policy import Policy
from function.compose import (
    admission,
    collisions,
    externalsecrets,
    flux,
    images,
    namespaces,
    ocmobjects,
    rbac,
    readiness,
    usages,
)
from function.compose.context import Context
from function.compose.identity import Identity
from function.configdata.deploy import FluxMutation, mutation_for
from function.errors import ComponentError, InvalidClaim
from function.ocm.access import flux_source
from function.ocm.model import TYPE_CONFIGDATA, TYPE_HELM_CHART, TYPE_KUSTOMIZE, Repository, Resource
from function.ocm.select import find_by_type, find_resource
from function.ocm.source import LoadedComponent, resource_key

IMAGE_TYPES = {"ociImage", "ociArtifact"}


@dataclass(frozen=True)
class CoreInput:
    spec: Spec
    policy: Policy
    identity: Identity
    repository: Repository
    loaded: LoadedComponent
    values: Mapping[str, Any] | None = None
    existing_namespaces: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    observed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Note:
    severity: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class CoreOutput:
    resources: dict[str, dict[str, Any]]
    ready: dict[str, bool]
    status: dict[str, Any]
    notes: list[Note]
    all_ready: bool
    blocked_by: readiness.Blocker | None


def choose_flavour(spec: Spec, deployable: Resource) -> Literal["helm", "kustomize"]:
    by_type = {TYPE_HELM_CHART: "helm", TYPE_KUSTOMIZE: "kustomize"}.get(deployable.type)
    wanted = spec.deploy.flavour
    if wanted and by_type and wanted != by_type:
        raise InvalidClaim(
            "spec.deploy.flavour",
            f"flavour {wanted} does not fit resource {deployable.name} of type {deployable.type}",
        )
    flavour = wanted or by_type
    if flavour is None:
        raise InvalidClaim(
            "spec.deploy.flavour",
            f"resource {deployable.name} has type {deployable.type}; set flavour to helm or kustomize",
        )
    return flavour  # type: ignore[return-value]


def select_resources(spec: Spec, loaded: LoadedComponent) -> tuple[Resource, Resource | None]:
    """The deployable and the ConfigData resource (None when the component ships none)."""
    d = loaded.component.descriptor
    deployable = find_resource(
        d, spec.deploy.resource.name, spec.deploy.resource.extraIdentity, where="spec.deploy.resource"
    )
    if spec.configData is not None:
        cd = find_resource(d, spec.configData.name, spec.configData.extraIdentity, where="spec.configData")
    else:
        count = sum(1 for r in d.resources if r.type == TYPE_CONFIGDATA)
        cd = find_by_type(d, TYPE_CONFIGDATA, where="spec.configData") if count else None
    return deployable, cd


def _images(inp: CoreInput) -> list[dict[str, Any]]:
    cv = inp.loaded.component
    locate = _locate(inp.policy)
    out = []
    for r in cv.descriptor.resources:
        if r.type in IMAGE_TYPES:
            entry: dict[str, Any] = {"resource": r.name, "reference": locate(cv, r)}
            if r.extra_identity:
                entry["extraIdentity"] = dict(sorted(r.extra_identity.items()))
            out.append(entry)
    return out


def _locate(policy: Policy) -> partial[str]:
    """Every image reference the function writes, refused outside the image allowlist (images.py)."""
    return partial(
        images.allowed_reference, allow_unpinned=policy.source.allowUnpinnedImages, hosts=images.allowed_hosts(policy)
    )


def _mutation(inp: CoreInput, flavour: str, deployable: Resource, cd: Resource | None) -> FluxMutation:
    if cd is None:
        if inp.values:
            raise InvalidClaim(
                "spec.values", f"component {inp.loaded.component.name} ships no ConfigData, so values cannot be applied"
            )
        return FluxMutation()
    cd_files = inp.loaded.contents.get(resource_key(cd)) or {}
    if len(cd_files) != 1:
        raise ComponentError(f"component resource {cd.name}", "the ConfigData content was not loaded")
    (cd_bytes,) = cd_files.values()
    files = inp.loaded.contents.get(resource_key(deployable)) or {}
    return mutation_for(
        flavour,  # type: ignore[arg-type]
        cd_bytes,
        inp.loaded.component,
        files,
        inp.values,
        configdata_name=f"ConfigData (resource {cd.name})",
        locate=_locate(inp.policy),
    )


def _gate_open(inp: CoreInput, ctx: Context) -> tuple[bool, str]:
    if not (inp.policy.ocm.enabled and inp.policy.ocm.gate):
        return True, ""
    obs = inp.observed.get(ocmobjects.key_component())
    if obs is None:
        return False, "the OCM Component is not created yet"
    cond = readiness.ready_condition(obs) or {}
    if cond.get("status") != "True":
        return False, f"the OCM Component is not Ready ({cond.get('reason') or 'no Ready condition yet'})"
    seen = ((obs.get("status") or {}).get("component") or {}).get("version")
    if seen != inp.loaded.component.version:
        return False, f"the OCM Component reports version {seen!r}, not {inp.loaded.component.version!r}"
    return True, ""


def _json_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))


def compose(inp: CoreInput) -> CoreOutput:
    spec, policy, identity = inp.spec, inp.policy, inp.identity
    deploy_ns, registry = admission.admit(spec, policy, identity, inp.repository.host, inp.repository.plain_http)

    cv = inp.loaded.component
    deployable, cd = select_resources(spec, inp.loaded)
    flavour = choose_flavour(spec, deployable)
    ctx = Context(identity, spec, policy, deploy_ns, inp.repository, registry, flavour)

    src = flux_source(cv, deployable, flavour, blob_head=inp.loaded.blob_heads.get(resource_key(deployable)))
    image_list = _images(inp)
    mutation = _mutation(inp, flavour, deployable, cd)
    image_hosts = images.pull_secret_hosts(
        spec, policy, (images.host_of(i["reference"], "image") for i in image_list), inp.repository.host
    )

    desired: dict[str, dict[str, Any]] = {}
    collisions.merge(desired, namespaces.build(ctx, inp.existing_namespaces, inp.observed))
    collisions.merge(desired, rbac.build(ctx))
    collisions.merge(desired, externalsecrets.build(ctx, image_hosts))
    if policy.ocm.enabled:
        collisions.merge(desired, ocmobjects.build(ctx, cv, deployable))

    notes: list[Note] = [Note("Warning", "ConfigDataWarning", w) for w in mutation.warnings]
    flux_objs = flux.build(ctx, src, mutation)
    gate_open, why = _gate_open(inp, ctx)
    already = any(k in inp.observed for k in flux_objs)
    flux_key: str | None = flux.key_release(flavour)
    if gate_open or already:
        collisions.merge(desired, flux_objs)
    else:
        flux_key = None
        notes.append(Note("Normal", "WaitingForOCMComponent", f"Flux objects wait for the OCM Component: {why}"))
    # Usages are built as if the Flux release were composed; while it is withheld, only the
    # ones already observed stay (never dropped because a dependency is not ready).
    for key, usage in usages.build(ctx, {**desired, **flux_objs}, flux.key_release(flavour)).items():
        if flux_key is not None or key in inp.observed or usage["spec"]["by"]["kind"] != flux.kind_of(flavour):
            collisions.merge(desired, {key: usage})
    collisions.check(desired)

    ready = {k: readiness.is_ready(obj, inp.observed.get(k)) for k, obj in desired.items()}
    blocked = readiness.first_blocker(desired, ready, inp.observed)
    if blocked is None and flux_key is None:
        comp = desired.get(ocmobjects.key_component(), {}).get("metadata", {})
        blocked = readiness.Blocker("Component", comp.get("name", ""), comp.get("namespace"), "WaitingForOCMComponent", why)

    status: dict[str, Any] = {
        "component": {
            "name": cv.name,
            "constraint": spec.component.version,
            "version": cv.version,
            "descriptorDigest": cv.descriptor_digest,
            "repository": spec.component.repository,
        },
        "images": image_list,
        "deploy": {
            "namespace": deploy_ns,
            "serviceAccount": ctx.deployer_name,
            "fluxKind": flux.kind_of(flavour),
            "fluxName": ctx.flux_name,
        },
        "configData": {
            "resource": cd.name if cd else None,
            "substitutions": [
                {"rule": t.rule, "file": t.file, "document": t.document, "path": t.path, "value": _json_value(t.value)}
                for t in mutation.trace
            ],
            "skipped": list(mutation.skipped),
        },
    }
    if blocked is not None:
        status["blockedBy"] = {
            k: v
            for k, v in (
                ("kind", blocked.kind),
                ("name", blocked.name),
                ("namespace", blocked.namespace),
                ("reason", blocked.reason),
                ("message", blocked.message),
            )
            if v is not None
        }
    if cd is None:
        del status["configData"]["resource"]
    return CoreOutput(desired, ready, status, notes, blocked is None, blocked)
