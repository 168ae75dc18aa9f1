"""The pure composition core: claim + policy + component data → desired state.

No I/O, no clock, no randomness: everything it needs (the component, the values, what
exists in the cluster) was fetched before it runs, so the same input always gives the same
output, byte for byte, on every replica. It either returns a *complete* desired state or
raises one :class:`function.errors.SackError`; there is no partial result, because a
desired state that leaves something out deletes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    status,
    usages,
)
from function.compose.admission import Admission, registry_for
from function.compose.context import Context
from function.compose.identity import Identity
from function.configdata.fluxmutation import FluxMutation, MutationInput, mutate
from function.errors import ComponentError, InvalidClaim
from function.ocm import digests
from function.ocm.access import FLAVOUR_OF_TYPE, Flavour, FluxSource, flux_source
from function.ocm.images import ImageTable, allowlisted, image_table
from function.ocm.model import Repository, Resource
from function.ocm.source import LoadedComponent, resource_key


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
    """One composition: the complete desired state, which of it is ready, the XR status, the
    notes to send as events and the object that blocks readiness (None when all is ready).
    """

    resources: dict[str, dict[str, Any]]
    ready: dict[str, bool]
    status: dict[str, Any]
    notes: list[Note]
    all_ready: bool
    blocked_by: readiness.Blocker | None


def choose_flavour(spec: Spec, deployable: Resource) -> Flavour:
    """How the deployable is deployed: the claim's ``spec.deploy.flavour``, else what its
    resource type says; a claim that contradicts the type is refused rather than guessed.

    Raises:
        InvalidClaim: naming ``spec.deploy.flavour`` or ``spec.deploy.releaseName``.
    """
    by_type = FLAVOUR_OF_TYPE.get(deployable.type)
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
    return flavour


def _image_hosts(inp: CoreInput, table: ImageTable) -> list[str]:
    """The registries the images are pulled from (the pull secret's dockerconfigjson hosts)."""
    hosts = {
        table[resource_key(r)].require().host
        for r in inp.loaded.component.descriptor.resources
        if r.type in status.IMAGE_TYPES
    }
    return sorted(hosts)


def _mutation(
    inp: CoreInput, flavour: Flavour, deployable: Resource, cd: Resource | None, table: ImageTable
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
            flavour=flavour,
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


def _checked_source(
    inp: CoreInput, deployable: Resource, cd: Resource | None, flavour: Flavour, where: str
) -> FluxSource:
    """The Flux source of the deployable, once everything it makes anyone fetch is allowed."""
    # Everything Flux, the OCM controller or the function fetches is on the allowlist.
    fetchhosts.check(inp.policy, (deployable, cd), where)
    key = resource_key(deployable)
    src = flux_source(
        inp.loaded.component, deployable, flavour, blob_head=inp.loaded.blob_heads.get(key)
    )
    # ... and nothing inside the deployable makes Flux fetch from anywhere else.
    selfcontained.check(
        flavour,
        inp.loaded.contents.get(key) or {},
        inp.spec.deploy.path if flavour == "kustomize" else None,
        f"{where} {deployable.describe()}",
        inp.memos,
    )
    return src


def _build(
    inp: CoreInput,
    ctx: Context,
    deployable: Resource,
    src: FluxSource,
    mutation: FluxMutation,
    image_hosts: list[str],
) -> tuple[collisions.Objects, collisions.Objects]:
    """Every object this claim composes: the Flux objects apart, since the OCM gate decides
    on them alone.
    """
    policy, cv = inp.policy, inp.loaded.component
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
    return built, flux_objs


def _usage_source(u: usages.Planned) -> str:
    return f"the Usage keeping {u.of_key}"


def _usages(
    ctx: Context, built: collisions.Objects, flux_objs: collisions.Objects
) -> list[usages.Planned]:
    """The Usages that keep what must outlive the deployment, checked with every object."""
    everything = built.copy()
    collisions.merge(everything, flux_objs)
    planned = usages.build(ctx, everything, flux.key_release(ctx.flavour), namespaces.key_deploy())
    # Every object this claim can compose, checked once, whatever is withheld this reconcile:
    # a collision is the same Fatal on the first reconcile as on every later one.
    candidates = everything.copy()
    for u in planned:
        collisions.merge(candidates, {u.key: u.obj}, _usage_source(u))
    collisions.check(candidates)
    return planned


def _withhold(
    inp: CoreInput,
    built: collisions.Objects,
    flux_objs: collisions.Objects,
    planned: list[usages.Planned],
    verified: integrity.Integrity,
) -> tuple[collisions.Objects, dict[str, str], gates.Gate, gates.FluxPlan]:
    """What is composed this reconcile: everything but what waits (compose/gates.py).

    Returns:
        The desired objects, the withheld keys with the Namespace each waits for, the OCM
        gate and what it made of the Flux objects.
    """
    cv, observed = inp.loaded.component, inp.observed
    # Namespaces first: nothing goes into a Namespace composed here before it is observed.
    waits = gates.namespace_waits({**built, **flux_objs}, observed)
    desired = built.only({k for k in built if k not in waits})
    # Flux deploys once the gate opens and, the first time, once what must outlive it exists.
    gate = gates.ocm_gate(
        inp.policy,
        observed.get(ocmobjects.key_component()),
        cv.version,
        cv.descriptor.raw,
        verified.normalised,
    )
    protected = [k for k, o in built.items() if o["kind"] in usages.PROTECTED_KINDS]
    ready_to_start = not waits and all(k in observed for k in protected)
    plan = gates.plan_flux(flux_objs, observed, gate, ready_to_start)
    collisions.merge(desired, plan.objects, "spec.deploy")
    # A Usage is composed once its ``of`` exists and its ``by`` is composed; an observed one stays.
    for u in planned:
        exists = u.of_key in desired and u.of_key in observed
        if u.key in observed or (exists and u.by_key in desired):
            collisions.merge(desired, {u.key: u.obj}, _usage_source(u))
    for key in gates.namespace_waits(desired, observed):  # a Usage goes where its by lives
        del desired[key]
    return desired, waits, gate, plan


def compose(inp: CoreInput) -> CoreOutput:
    """Compose one claim: the complete desired state, its readiness, status and notes.

    Each step below either returns data or raises one :class:`function.errors.SackError`;
    the order of the steps is the order in which a bad input is reported.

    Args:
        inp: The admitted claim, the policy, the loaded component and what the cluster holds.

    Returns:
        The desired objects with their readiness, the XR status and the notes to emit.
    """
    spec, policy, cv = inp.spec, inp.policy, inp.loaded.component
    deployable, cd = inp.loaded.deployable, inp.loaded.configdata
    where = f"component {cv.name}:{cv.version}"
    if deployable is None:
        raise ComponentError(where, "no deployable resource was selected")
    # Nothing is composed from a descriptor whose policy signatures do not verify.
    verified = integrity.check(policy, cv, inp.memos)
    # What was read was checked against the resource digests while loading (a mismatch never
    # loads); whether a resource without one may be used is the policy's call.
    digest_warnings = digests.enforce(
        inp.loaded.digests, where, require=policy.source.requireDigests
    )
    flavour = choose_flavour(spec, deployable)
    deploy_ns = inp.admission.deploy_namespace
    ctx = Context(
        inp.identity, spec, policy, deploy_ns, inp.repository, inp.admission.registry, flavour
    )
    src = _checked_source(inp, deployable, cd, flavour, where)
    # Every image reference is resolved and parsed once, here, and used from this table by
    # status, the pull secrets and the ConfigData engine.
    # References outside the image allowlist become errors here (ocm/images.py).
    table = allowlisted(
        image_table(cv, allow_unpinned=policy.source.allowUnpinnedImages, memos=inp.memos),
        images.allowed_hosts(policy),
        f"component {cv.name}:{cv.version}",
    )
    image_list = status.images(cv.descriptor.resources, table)
    mutation = _mutation(inp, flavour, deployable, cd, table)
    image_hosts = images.pull_secret_hosts(
        spec, policy, _image_hosts(inp, table), inp.repository.host
    )
    built, flux_objs = _build(inp, ctx, deployable, src, mutation, image_hosts)
    planned = _usages(ctx, built, flux_objs)
    desired, waits, gate, plan = _withhold(inp, built, flux_objs, planned, verified)

    ready = {k: readiness.is_ready(obj, inp.observed.get(k)) for k, obj in desired.items()}
    notes = status.findings(ctx, inp.admission.warnings, digest_warnings, mutation, cd, gate)
    deployed = status.deployed_version(plan, cv.version, inp.xr_status)
    first = readiness.first_blocker(desired, ready, inp.observed)
    blocked, waiting = status.blocker(first, ctx, waits, plan, gate, desired, cv.version, deployed)
    notes.extend(waiting)
    normalised = verified.normalised
    xr_status = status.build(
        ctx, cv, normalised, image_list, deployed, cd, mutation, blocked, notes
    )
    emit = events.to_emit(notes, blocked, inp.xr_status)
    return CoreOutput(desired, ready, xr_status, emit, blocked is None, blocked)
