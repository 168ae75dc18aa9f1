"""What one reconcile reports: the XR status, the object that blocks readiness, and the notes.

The status is built from :class:`function.api.claim.Status`, the very model ``sack8s xrd``
generates the XRD schema from, so a field the function writes is always one the schema
declares (the API server would prune any other), and mypy checks every field name here. The
dump leaves out what is None or unset, so a key is written exactly when this module gives it
a value, in the model's field order: the output stays byte for byte the same on every replica.

Notes are the findings Crossplane turns into events (:mod:`function.compose.events` decides
which of them are new); the blocker is the one object the ``DeploymentReady`` condition and
``status.blockedBy`` name (:mod:`function.compose.readiness`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from function.api.claim import (
    Spec,
    Status,
    StatusBlocked,
    StatusComponent,
    StatusDeploy,
    StatusDigest,
    StatusImage,
    StatusPullSecret,
    StatusWarning,
)
from function.api.policy import Policy
from function.compose import events, flux, ocmobjects, readiness
from function.compose.context import Context
from function.compose.events import Note, Severity
from function.compose.gates import FluxPlan, Gate
from function.configdata.fluxmutation import FluxMutation
from function.errors import InvalidClaim
from function.ocm.images import ImageTable
from function.ocm.model import ComponentVersion, Resource
from function.ocm.normalisation import NormalisedDigest
from function.ocm.source import resource_key

__all__ = [
    "IMAGE_TYPES",
    "blocker",
    "build",
    "deployed_version",
    "findings",
    "images",
    "unused_values_note",
]

# Resource types that are images: listed in status and pulled with the pull secret.
IMAGE_TYPES = {"ociImage", "ociArtifact"}


def images(resources: Iterable[Resource], table: ImageTable) -> list[StatusImage]:
    """Status ``images``: every image resource with its localized reference.

    An image whose reference cannot be resolved fails the request here, naming it, so a
    status never lists an image the cluster could not pull.

    Args:
        resources: The component's resources, in descriptor order.
        table: The allowlisted image table of the component.

    Returns:
        One entry per image resource, in descriptor order.
    """
    out = []
    for r in resources:
        if r.type in IMAGE_TYPES:
            entry = table[resource_key(r)]
            entry.require()
            fields: dict[str, Any] = {"resource": r.name, "reference": entry.reference}
            if r.extra_identity:
                fields["extraIdentity"] = dict(sorted(r.extra_identity.items()))
            out.append(StatusImage(**fields))
    return out


def unused_values_note(
    policy: Policy, flavour: str, cd: Resource | None, mutation: FluxMutation
) -> Note | None:
    """One Warning listing the claim values no configuration rule consumes.

    It has its own reason, so it is deduplicated apart from other warnings.

    Raises:
        InvalidClaim: when the policy makes unused values Fatal.
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


def findings(
    ctx: Context,
    admission_warnings: Iterable[str],
    digest_warnings: Iterable[tuple[str, str]],
    mutation: FluxMutation,
    cd: Resource | None,
    gate: Gate,
) -> list[Note]:
    """The Warnings that still compose, in the order they are reported.

    Unused values are Fatal where the policy says so: that is decided here, after everything
    else composed, as it always was (image-pair defects are settled in ``mutate``).

    Args:
        ctx: The claim's context (the policy, the flavour).
        admission_warnings: Ambiguous namespace patterns found at admission.
        digest_warnings: ``(reason, message)`` of the resource digest checks.
        mutation: The ConfigData result (its warnings, unused values).
        cd: The ConfigData resource, if the component ships one.
        gate: The OCM gate (its warning when the descriptor digest goes unchecked).

    Returns:
        Warning notes, in a fixed order.
    """
    policy = ctx.policy
    notes = [Note("Warning", "AmbiguousNamespacePattern", w) for w in admission_warnings]
    notes.extend(Note("Warning", reason, message) for reason, message in digest_warnings)
    notes.extend(Note("Warning", "ConfigDataWarning", w) for w in mutation.warnings)
    if gate.warning:
        notes.append(Note("Warning", "DescriptorDigestUnchecked", gate.warning))
    unused = unused_values_note(policy, ctx.flavour, cd, mutation)
    if unused is not None:
        notes.append(unused)
    return notes


def deployed_version(plan: FluxPlan, version: str, xr_status: Mapping[str, Any]) -> str | None:
    """The version the Flux objects carry: this one once they are current, else the one the
    last successful reconcile reported in ``status.deploy.version`` (None if unknown).
    """
    if plan.state == "current":
        return version
    deploy = xr_status.get("deploy")
    previous = deploy.get("version") if isinstance(deploy, Mapping) else None
    return previous if isinstance(previous, str) and previous else None


def blocker(
    first: readiness.Blocker | None,
    ctx: Context,
    waits: Mapping[str, str],
    plan: FluxPlan,
    gate: Gate,
    desired: Mapping[str, Mapping[str, Any]],
    version: str,
    deployed: str | None,
) -> tuple[readiness.Blocker | None, list[Note]]:
    """The one object that blocks readiness, and the notes saying what is awaited.

    The first composed object that is not ready (``first``) is replaced by what it waits for
    when the function withholds objects: a Namespace not observed yet, or the OCM Component
    the Flux objects wait for. While Namespaces are awaited, that is the only news.

    Args:
        first: The first not-ready composed object in deployment order.
        ctx: The claim's context (Flux object name and kind, deploy namespace).
        waits: Withheld object keys → the Namespace each waits for.
        plan: What the OCM gate made of the Flux objects.
        gate: The OCM gate.
        desired: The objects composed this reconcile.
        version: The resolved component version.
        deployed: The version the Flux objects carry (:func:`deployed_version`).

    Returns:
        The blocker (None when everything is ready) and the Normal/Warning notes about it.
    """
    blocked, notes = first, list[Note]()
    waited = sorted(set(waits.values()))
    if blocked is not None and blocked.kind == "Namespace" and blocked.name in waited:
        count = sum(1 for ns in waits.values() if ns == blocked.name)
        why = f"not created yet; {count} composed objects wait for it"
        blocked = readiness.Blocker("Namespace", blocked.name, None, "WaitingForNamespace", why)
        why = f"{count} composed objects wait for Namespace {blocked.name}"
        notes.append(Note("Normal", "WaitingForNamespace", why))
    if plan.state != "current" and not gate.open:
        if plan.state == "held":
            kept = deployed or "their observed version"
            why = (
                f"Flux objects keep the source and values of {kept} until the OCM Component "
                f"is ready for {version}: {gate.why}"
            )
        else:
            why = f"Flux objects wait for the OCM Component: {gate.why}"
        if not waits:  # while Namespaces are awaited, that is the news
            severity: Severity = "Normal" if gate.reason == "WaitingForOCMComponent" else "Warning"
            notes.append(Note(severity, gate.reason, why))
        if blocked is None:
            comp = desired.get(ocmobjects.key_component(), {}).get("metadata", {})
            name, ns = comp.get("name", ""), comp.get("namespace")
            blocked = readiness.Blocker("Component", name, ns, gate.reason, why)
    if blocked is None and plan.state == "withheld":  # defensive: always a blocker above
        kind, ns = flux.kind_of(ctx.flavour), ctx.deploy_namespace
        blocked = readiness.Blocker(kind, ctx.names.deployment, ns, "Creating", "not created yet")
    return blocked, notes


def _json_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))


def _component(
    spec: Spec, cv: ComponentVersion, normalised: NormalisedDigest | None
) -> StatusComponent:
    return StatusComponent(
        name=cv.name,
        constraint=spec.component.version,
        version=cv.version,
        descriptorDigest=cv.descriptor_digest,
        normalisedDigest=StatusDigest(**normalised.to_status()) if normalised is not None else None,
        repository=spec.component.repository,
    )


def _deploy(ctx: Context, deployed: str | None) -> StatusDeploy:
    pull_secret = flux.pull_secret_trace(ctx, ctx.flavour)
    return StatusDeploy(
        namespace=ctx.deploy_namespace,
        serviceAccount=ctx.names.serviceaccount,
        fluxKind=flux.kind_of(ctx.flavour),
        fluxName=ctx.names.deployment,
        version=deployed or None,
        pullSecret=StatusPullSecret(**pull_secret) if pull_secret is not None else None,
    )


#: Keyword arguments of every status dump: None means "not reported"; exclude_unset leaves out
#: an image's empty extraIdentity.
_DUMP: dict[str, Any] = {"by_alias": True, "exclude_none": True, "exclude_unset": True}


def _configdata_dumped(cd: Resource | None, mutation: FluxMutation) -> dict[str, Any]:
    """``status.configData`` as written: exactly ``StatusConfigData(...).model_dump(**_DUMP)``
    of the resource's name and the mutation's trace, skipped rules and unused values, built
    directly (tests/test_status_configdata.py proves it equal over generated mutations).

    A fleet's claims each have their own values, so the dump is never shared: building ~20
    substitution models and dumping them cost ~0.2 ms a claim, ten times the plain dict.
    """
    out: dict[str, Any] = {}
    if cd is not None:
        out["resource"] = cd.name
    out["substitutions"] = [
        {
            "rule": t.rule,
            "file": t.file,
            "document": t.document,
            "path": t.path,
            "value": _json_value(t.value),
        }
        for t in mutation.trace
    ]
    out["skipped"] = list(mutation.skipped)
    out["unusedValues"] = list(mutation.unused_values)
    return out


def _blocked(b: readiness.Blocker) -> StatusBlocked:
    return StatusBlocked(
        kind=b.kind, name=b.name, namespace=b.namespace, reason=b.reason, message=b.message
    )


def build(
    ctx: Context,
    cv: ComponentVersion,
    normalised: NormalisedDigest | None,
    image_list: list[StatusImage],
    deployed: str | None,
    cd: Resource | None,
    mutation: FluxMutation,
    blocked: readiness.Blocker | None,
    notes: list[Note],
) -> dict[str, Any]:
    """The XR status of this reconcile, as the XRD's ``status`` schema declares it.

    Args:
        ctx: The claim's context (spec, deploy namespace, object names).
        cv: The resolved component version.
        normalised: The normalised descriptor digest the OCM gate compares, if computed.
        image_list: Status ``images`` (:func:`images`).
        deployed: The version the Flux objects carry (:func:`deployed_version`).
        cd: The ConfigData resource, if the component ships one.
        mutation: The ConfigData result (substitutions, skipped rules, unused values).
        blocked: The object blocking readiness (:func:`blocker`), None when ready.
        notes: Every note of this reconcile: its Warnings become ``status.warnings``.

    Returns:
        The ``status`` object of the desired XR.
    """
    status = Status(
        component=_component(ctx.spec, cv, normalised),
        images=image_list,
        deploy=_deploy(ctx, deployed),
        blockedBy=_blocked(blocked) if blocked is not None else None,
        warnings=[StatusWarning(**w) for w in events.current_warnings(notes)],
    )
    dumped = status.model_dump(**_DUMP)
    # configData (unset above, so left out) goes in at its place in the model's field order.
    dumped["configData"] = _configdata_dumped(cd, mutation)
    return {f: dumped[f] for f in Status.model_fields if f in dumped}
