"""The pure composition core: claim + policy + component data → desired state.

No I/O, no clock, no randomness: everything it needs (the component, the values, what
exists in the cluster) was fetched before it runs, so the same input always gives the same
output, byte for byte, on every replica. It either returns a *complete* desired state or
raises one :class:`function.errors.SackError`; there is no partial result, because a
desired state that leaves something out deletes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from function.api.claim import Spec
from function.api.policy import Policy
from function.cache import Memos
from function.compose import (
    collisions,
    events,
    externalsecrets,
    fetchhosts,
    flux,
    gates,
    images,
    integrity,
    namespaces,
    ocmobjects,
    rbac,
    readiness,
    selfcontained,
    usages,
)
from function.compose.admission import Admission, registry_for
from function.compose.context import Context
from function.compose.identity import Identity
from function.configdata.fluxmutation import FluxMutation, MutationInput, mutate
from function.errors import ComponentError, InvalidClaim
from function.ocm import digests
from function.ocm.access import flux_source
from function.ocm.images import ImageTable, allowlisted, image_table
from function.ocm.model import TYPE_HELM_CHART, TYPE_KUSTOMIZE, Repository, Resource
from function.ocm.source import LoadedComponent, resource_key

IMAGE_TYPES = {"ociImage", "ociArtifact"}


@dataclass(frozen=True)
class CoreInput:
    """Everything one composition needs, decided and fetched before it runs: the admitted
    claim (``admission``), the component with its selected resources (``loaded``) and what
    the cluster holds.
    """

    spec: Spec
    policy: Policy
    identity: Identity
    repository: Repository
    admission: Admission
    loaded: LoadedComponent
    values: Mapping[str, Any] | None = None
    existing_namespaces: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    observed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The XR's status as the last successful reconcile wrote it: what was already reported.
    xr_status: Mapping[str, Any] = field(default_factory=dict)
    # The edge's memo tables (function.cache), passed to every step that memoises; None: none.
    memos: Memos | None = field(default=None, compare=False, repr=False)


Note = events.Note


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
            f"resource {deployable.name} has type {deployable.type}; set flavour to helm or "
            "kustomize",
        )
    if flavour == "kustomize" and spec.deploy.releaseName:
        raise InvalidClaim(
            "spec.deploy.releaseName",
            f"names a Helm release, but resource {deployable.name} is deployed with Kustomize",
        )
    return flavour  # type: ignore[return-value]


def _images(inp: CoreInput, table: ImageTable) -> list[dict[str, Any]]:
    """Status ``images``: every image resource with its localized reference (an image whose
    reference cannot be resolved fails the request, naming it).
    """
    out = []
    for r in inp.loaded.component.descriptor.resources:
        if r.type in IMAGE_TYPES:
            entry = table[resource_key(r)]
            entry.require()
            item: dict[str, Any] = {"resource": r.name, "reference": entry.reference}
            if r.extra_identity:
                item["extraIdentity"] = dict(sorted(r.extra_identity.items()))
            out.append(item)
    return out


def _image_hosts(inp: CoreInput, table: ImageTable) -> list[str]:
    """The registries the images are pulled from (the pull secret's dockerconfigjson hosts)."""
    hosts = {
        table[resource_key(r)].require().host
        for r in inp.loaded.component.descriptor.resources
        if r.type in IMAGE_TYPES
    }
    return sorted(hosts)


def _mutation(
    inp: CoreInput, flavour: str, deployable: Resource, cd: Resource | None, table: ImageTable
) -> FluxMutation:
    if cd is None:
        if inp.values:
            raise InvalidClaim(
                "spec.values",
                f"component {inp.loaded.component.name} ships no ConfigData, so values cannot be "
                "applied",
            )
        return FluxMutation()
    cd_files = inp.loaded.contents.get(resource_key(cd)) or {}
    if len(cd_files) != 1:
        raise ComponentError(
            f"component resource {cd.name}", "the ConfigData content was not loaded"
        )
    (cd_bytes,) = cd_files.values()
    return mutate(
        MutationInput(
            flavour=flavour,  # type: ignore[arg-type]
            configdata=cd_bytes,
            component=inp.loaded.component,
            files=inp.loaded.contents.get(resource_key(deployable)) or {},
            values=inp.values,
            images=table,
            configdata_name=f"ConfigData (resource {cd.name})",
            schema_violations=inp.policy.configData.schemaViolations,
            duplicate_keys=inp.policy.configData.duplicateKeys,
            deployable=deployable.name,
            image_pairs=inp.policy.configData.imagePairs,
        ),
        inp.memos,
    )


def unused_values_note(
    policy: Policy, flavour: str, cd: Resource | None, mutation: FluxMutation
) -> Note | None:
    """One Warning listing the claim values no configuration rule consumes (its own reason,
    so it is deduplicated apart from other warnings); a Fatal when the policy says so.
    """
    if not mutation.unused_values or cd is None:
        return None
    paths = ", ".join(mutation.unused_values)
    what = "chart" if flavour == "helm" else "Kustomize directory"
    message = (
        f"{len(mutation.unused_values)} value(s) reach no configuration rule of ConfigData "
        f"(resource {cd.name}) for the {what}, so they are not applied: {paths} "
        + (f"({mutation.unused_hint}) " if mutation.unused_hint else "")
        + "(status.configData.unusedValues; status.configData.skipped lists the rules for files "
        "outside the deployed resource)"
    )
    if policy.configData.unusedValues == "Fatal":
        raise InvalidClaim(
            "spec.values", message + "; the policy (configData.unusedValues: Fatal) refuses this"
        )
    return Note("Warning", "UnusedValues", f"spec.values: {message}")


def _deployed_version(xr_status: Mapping[str, Any]) -> str | None:
    """``status.deploy.version`` as the last successful reconcile wrote it (None if unknown)."""
    deploy = xr_status.get("deploy")
    version = deploy.get("version") if isinstance(deploy, Mapping) else None
    return version if isinstance(version, str) and version else None


def _json_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))


def compose(inp: CoreInput) -> CoreOutput:
    spec, policy, identity = inp.spec, inp.policy, inp.identity
    deploy_ns, registry = inp.admission.deploy_namespace, inp.admission.registry

    cv = inp.loaded.component
    deployable, cd = inp.loaded.deployable, inp.loaded.configdata
    if deployable is None:
        raise ComponentError(
            f"component {cv.name}:{cv.version}", "no deployable resource was selected"
        )
    # Nothing is composed from a descriptor whose policy signatures do not verify.
    verified = integrity.check(policy, cv, inp.memos)
    # What was read was checked against the resource digests while loading (a mismatch never
    # loads); whether a resource without one may be used is the policy's call.
    digest_notes = [
        Note("Warning", reason, message)
        for reason, message in digests.enforce(
            inp.loaded.digests,
            f"component {cv.name}:{cv.version}",
            require=policy.source.requireDigests,
        )
    ]
    flavour = choose_flavour(spec, deployable)
    ctx = Context(identity, spec, policy, deploy_ns, inp.repository, registry, flavour)

    # Everything Flux, the OCM controller or the function fetches is on the allowlist.
    fetchhosts.check(policy, (deployable, cd), f"component {cv.name}:{cv.version}")
    src = flux_source(
        cv, deployable, flavour, blob_head=inp.loaded.blob_heads.get(resource_key(deployable))
    )
    # ... and nothing inside the deployable makes Flux fetch from anywhere else.
    selfcontained.check(
        flavour,
        inp.loaded.contents.get(resource_key(deployable)) or {},
        spec.deploy.path if flavour == "kustomize" else None,
        f"component {cv.name}:{cv.version} {deployable.describe()}",
        inp.memos,
    )
    # Every image reference is resolved and parsed once, here, and used from this table by
    # status, the pull secrets and the ConfigData engine.
    # References outside the image allowlist become errors here (ocm/images.py).
    table = allowlisted(
        image_table(cv, allow_unpinned=policy.source.allowUnpinnedImages, memos=inp.memos),
        images.allowed_hosts(policy),
        f"component {cv.name}:{cv.version}",
    )
    image_list = _images(inp, table)
    mutation = _mutation(inp, flavour, deployable, cd, table)
    image_hosts = images.pull_secret_hosts(
        spec, policy, _image_hosts(inp, table), inp.repository.host
    )

    # Every desired object enters a map through collisions.merge, which refuses a second
    # object under a key with one Fatal naming both sources: nothing is silently replaced.
    built = collisions.Objects()
    collisions.merge(built, namespaces.build(ctx, inp.existing_namespaces, inp.observed))
    collisions.merge(built, rbac.build(ctx))
    collisions.merge(built, externalsecrets.build(ctx, image_hosts))
    if policy.ocm.enabled:
        gates.check_resolved(cv.version, policy)
        collisions.merge(built, ocmobjects.build(ctx, cv, deployable), "spec.component")
    source_registry = registry_for(
        policy, src.host, plain_http=src.plain_http, where=f"Flux source {src.url[:200]}"
    )
    flux_objs = collisions.Objects()
    collisions.merge(flux_objs, flux.build(ctx, src, source_registry, mutation), "spec.deploy")
    release_key = flux.key_release(flavour)

    everything = built.copy()
    collisions.merge(everything, flux_objs)
    planned = usages.build(ctx, everything, release_key, namespaces.key_deploy())
    usage_source = {u.key: f"the Usage keeping {u.of_key}" for u in planned}
    # Every object this claim can compose, checked once, whatever is withheld this reconcile:
    # a collision is the same Fatal on the first reconcile as on every later one.
    candidates = everything.copy()
    for u in planned:
        collisions.merge(candidates, {u.key: u.obj}, usage_source[u.key])
    collisions.check(candidates)

    # Namespaces first: nothing goes into a Namespace composed here before it is observed.
    waits = gates.namespace_waits(everything, inp.observed)
    desired = built.only({k for k in built if k not in waits})
    # Flux deploys once the gate opens and, the first time, once what must outlive it exists.
    gate = gates.ocm_gate(
        policy,
        inp.observed.get(ocmobjects.key_component()),
        cv.version,
        cv.descriptor.raw,
        verified.normalised,
    )
    protected = [k for k, o in built.items() if o["kind"] in usages.PROTECTED_KINDS]
    ready_to_start = not waits and all(k in inp.observed for k in protected)
    plan = gates.plan_flux(flux_objs, inp.observed, gate, ready_to_start)
    collisions.merge(desired, plan.objects, "spec.deploy")
    # A Usage is composed once its ``of`` exists and its ``by`` is composed; an observed one stays.
    for u in planned:
        exists = u.of_key in desired and u.of_key in inp.observed
        if u.key in inp.observed or (exists and u.by_key in desired):
            collisions.merge(desired, {u.key: u.obj}, usage_source[u.key])
    for key in gates.namespace_waits(desired, inp.observed):  # a Usage goes where its by lives
        del desired[key]

    ready = {k: readiness.is_ready(obj, inp.observed.get(k)) for k, obj in desired.items()}
    blocked = readiness.first_blocker(desired, ready, inp.observed)
    notes: list[Note] = [
        Note("Warning", "AmbiguousNamespacePattern", w) for w in inp.admission.warnings
    ]
    notes.extend(digest_notes)
    notes.extend(Note("Warning", "ConfigDataWarning", w) for w in mutation.warnings)
    if gate.warning:
        notes.append(Note("Warning", "DescriptorDigestUnchecked", gate.warning))
    unused = unused_values_note(policy, flavour, cd, mutation)
    if unused is not None:
        notes.append(unused)
    waited = sorted(set(waits.values()))
    if blocked is not None and blocked.kind == "Namespace" and blocked.name in waited:
        count = sum(1 for ns in waits.values() if ns == blocked.name)
        why = f"not created yet; {count} composed objects wait for it"
        blocked = readiness.Blocker("Namespace", blocked.name, None, "WaitingForNamespace", why)
        why = f"{count} composed objects wait for Namespace {blocked.name}"
        notes.append(Note("Normal", "WaitingForNamespace", why))
    deployed = cv.version if plan.state == "current" else _deployed_version(inp.xr_status)
    if plan.state != "current" and not gate.open:
        if plan.state == "held":
            kept = deployed or "their observed version"
            why = (
                f"Flux objects keep the source and values of {kept} until the OCM Component "
                f"is ready for {cv.version}: {gate.why}"
            )
        else:
            why = f"Flux objects wait for the OCM Component: {gate.why}"
        if not waits:  # while Namespaces are awaited, that is the news
            severity = "Normal" if gate.reason == "WaitingForOCMComponent" else "Warning"
            notes.append(Note(severity, gate.reason, why))
        if blocked is None:
            comp = desired.get(ocmobjects.key_component(), {}).get("metadata", {})
            name, ns = comp.get("name", ""), comp.get("namespace")
            blocked = readiness.Blocker("Component", name, ns, gate.reason, why)
    if blocked is None and plan.state == "withheld":  # defensive: always a blocker above
        kind = flux.kind_of(flavour)
        blocked = readiness.Blocker(kind, ctx.flux_name, deploy_ns, "Creating", "not created yet")

    status: dict[str, Any] = {
        "component": {
            "name": cv.name,
            "constraint": spec.component.version,
            "version": cv.version,
            "descriptorDigest": cv.descriptor_digest,
            **(
                {"normalisedDigest": verified.normalised.to_status()}
                if verified.normalised is not None
                else {}
            ),
            "repository": spec.component.repository,
        },
        "images": image_list,
        "deploy": {
            "namespace": deploy_ns,
            "serviceAccount": ctx.deployer_name,
            "fluxKind": flux.kind_of(flavour),
            "fluxName": ctx.flux_name,
            **({"version": deployed} if deployed else {}),
        },
        "configData": {
            "resource": cd.name if cd else None,
            "substitutions": [
                {
                    "rule": t.rule,
                    "file": t.file,
                    "document": t.document,
                    "path": t.path,
                    "value": _json_value(t.value),
                }
                for t in mutation.trace
            ],
            "skipped": list(mutation.skipped),
            "unusedValues": list(mutation.unused_values),
        },
    }
    pull_secret = flux.pull_secret_trace(ctx, flavour)
    if pull_secret is not None:
        status["deploy"]["pullSecret"] = pull_secret
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
    status["warnings"] = events.current_warnings(notes)
    notes = events.to_emit(notes, blocked, inp.xr_status)
    return CoreOutput(desired, ready, status, notes, blocked is None, blocked)
