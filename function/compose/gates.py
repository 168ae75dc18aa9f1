"""What waits for what before it is composed, and what a closed gate keeps as it is.

Crossplane applies the desired objects of one reconcile without ordering and has no
depends-on, so the function withholds what cannot work yet and never drops what already
runs (a dropped object is deleted):

* **Namespaces first.** A namespaced object that goes into a Namespace this XR creates is
  composed only once that Namespace is observed; otherwise every first reconcile ends in
  ``namespaces "…" not found``. An object already observed is always kept, even while its
  Namespace is (transiently) missing from observed state.
* **The OCM gate.** Flux objects deploy only what the OCM controllers vouch for: the
  Component Ready, at the version the function resolved, reconciled at its current
  generation, with ``ocm.verify`` verifying every policy signature, and reporting in
  ``status.component.digest`` the normalised digest of the very descriptor the function read
  (a tag moved between the two reads closes it). No digest, or one the function cannot
  compute: closed with ``ocm.verify``, a Warning without. Until then Flux
  objects are not composed (first deployment) or keep the source digest and values they
  were observed with (every later version change), so a new chart or new values never reach
  Flux before the Component does.
* **A version the controller accepts.** The OCM controller refuses a ``spec.semver`` that
  Masterminds/semver can parse neither as a version nor as a constraint (a terminal error),
  so a gate waiting for it would never open: that is a Fatal at admission instead.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from function.api.claim import Spec
from function.api.policy import Policy
from function.compose import flux, ocmobjects, readiness
from function.errors import ComponentError, InvalidClaim
from function.ocm import normalisation, versions

# Observed objects whose spec (and generation) the core reads: the Flux objects it may hold,
# the OCM Component whose verify configuration the gate checks.
OBSERVED_SPEC_KEYS = frozenset(
    {
        flux.key_source(),
        flux.key_release("helm"),
        flux.key_release("kustomize"),
        ocmobjects.key_component(),
    }
)

# What a closed gate keeps as observed: everything that follows from the component version.
HELD_FIELDS = {
    "OCIRepository": ("url", "ref", "layerSelector"),
    "HelmRelease": ("values",),
    "Kustomization": ("patches",),
}

# Masterminds/semver v3 NewVersion (CoerceNewVersion, the default), which the OCM controller's
# fast path uses for a pinned spec.semver: loose, leading zeros allowed in major.minor.patch.
_CONTROLLER_VERSION = re.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?"
    r"(-([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?"
    r"(\+([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?"
)
_UINT64 = 2**64


def controller_accepts(version: str) -> bool:
    """Whether the OCM controller reads ``version`` as one version (and reports it as written)."""
    m = _CONTROLLER_VERSION.fullmatch(version or "")
    if not m:
        return False
    if any(int(g.lstrip(".")) >= _UINT64 for g in m.group(1, 2, 3) if g):
        return False
    for part in (m.group(5) or "").split(".") if m.group(5) else ():
        if part.isdigit() and len(part) > 1 and part[0] == "0":
            return False  # validatePrerelease: a numeric identifier must not start with 0
    return True


def check_version(spec: Spec, policy: Policy) -> None:
    """Admission: with OCM objects composed, the version must be one the controller can reach."""
    if not policy.ocm.enabled:
        return
    text = spec.component.version.strip()
    if controller_accepts(text) or versions.is_exact(text):
        return
    try:
        versions.parse_constraint(text, where="spec.component.version")
    except ComponentError:
        raise InvalidClaim(
            "spec.component.version",
            f"{text[:80]!r} is neither a semantic version nor a version range; the OCM "
            "controller refuses such a Component.spec.semver as a terminal error, so the "
            "deployment could never become ready (use a version such as 1.2.3 or a range such "
            "as >=1.2 <2)",
        ) from None


def check_resolved(version: str, policy: Policy) -> None:
    """After resolution: the version composed into Component.spec.semver must be readable."""
    if policy.ocm.enabled and not controller_accepts(version):
        raise InvalidClaim(
            "spec.component.version",
            f"resolves to {version[:80]!r}, which the OCM controller cannot read as a version "
            "(Component.spec.semver); pin a semantic version",
        )


# --------------------------------------------------------------------------- Namespaces first


def namespace_waits(
    objects: Mapping[str, Mapping[str, Any]], observed: Mapping[str, Any]
) -> dict[str, str]:
    """Keys of the namespaced objects to withhold, each with the Namespace it waits for.

    Only Namespaces composed here count (an ``existing`` or shared namespace was checked or is
    ops-owned); an object already observed is never withheld.
    """
    created = {o["metadata"]["name"]: k for k, o in objects.items() if o["kind"] == "Namespace"}
    missing = {name for name, key in created.items() if key not in observed}
    if not missing:
        return {}
    return {
        k: o["metadata"]["namespace"]
        for k, o in objects.items()
        if o["metadata"].get("namespace") in missing and k not in observed
    }


# --------------------------------------------------------------------------- the OCM gate


@dataclass(frozen=True)
class Gate:
    """Whether the OCM gate lets Flux deploy this version, and if not, why (``reason``, the
    event and blocker reason); ``warning`` when it opens without checking the digest.
    """

    open: bool
    why: str = ""
    reason: str = "WaitingForOCMComponent"
    warning: str = ""


def _digest_gate(
    policy: Policy,
    reported: Any,
    raw: Mapping[str, Any] | None,
    known: normalisation.NormalisedDigest | None,
) -> Gate:
    """Open only when the Component verified the descriptor the function read: its
    ``status.component.digest`` equals the function's digest in the same algorithm.
    """
    strict = bool(policy.ocm.verify)
    have = isinstance(reported, Mapping) and reported.get("value")
    norm = str(reported.get("normalisationAlgorithm") or "") if have else ""
    hash_name = (
        normalisation.canonical_hash(str(reported.get("hashAlgorithm") or "")) if have else None
    )
    if not have or normalisation.canonical_algorithm(norm) is None or hash_name is None:
        what = (
            "reports no descriptor digest (status.component.digest)"
            if not have
            else f"reports its descriptor digest in {reported.get('hashAlgorithm')!s:.40} "
            f"{norm:.60}, which the function cannot compute"
        )
        if strict:
            return Gate(
                False,
                f"the OCM Component {what}; with ocm.verify the gate stays closed",
                "DescriptorDigestUnknown",
            )
        return Gate(
            True,
            warning=f"the OCM Component {what}: the gate cannot tell whether the controller "
            "verified the descriptor the function read",
        )
    algo = normalisation.canonical_algorithm(norm)
    try:
        if (
            known is not None
            and known.hash_algorithm == hash_name
            and normalisation.canonical_algorithm(known.normalisation_algorithm) == algo
        ):
            mine = known.value  # computed once per descriptor (compose/integrity.py)
        else:
            mine = normalisation.digest(raw or {}, norm, hash_name).value
    except normalisation.NormalisationError as e:
        if strict:
            why = f"the function cannot normalise the descriptor: {e}"
            return Gate(False, why, "DescriptorDigestUnknown")
        return Gate(True, warning=f"the function cannot normalise the descriptor: {e}")
    theirs = str(reported.get("value")).lower()
    if mine != theirs:
        return Gate(
            False,
            f"descriptor digest mismatch: the OCM Component verified {hash_name} {norm} "
            f"{theirs[:128]}, the function read {mine} (the version's descriptor changed "
            "between the two reads)",
            "DescriptorDigestMismatch",
        )
    return Gate(True)


def _has_verify(observed_spec: Any, wanted: list[dict[str, Any]]) -> list[str]:
    seen = observed_spec.get("verify") if isinstance(observed_spec, Mapping) else None
    seen = [v for v in seen if isinstance(v, Mapping)] if isinstance(seen, list) else []
    return [w["signature"] for w in wanted if not any(dict(v) == w for v in seen)]


def ocm_gate(
    policy: Policy,
    observed: Mapping[str, Any] | None,
    version: str,
    descriptor: Mapping[str, Any] | None = None,
    known: normalisation.NormalisedDigest | None = None,
) -> Gate:
    """Whether Flux may deploy ``version`` (whose descriptor the function read as
    ``descriptor``; ``known``: its digest already computed) now, and if not, what is awaited.
    """
    if not (policy.ocm.enabled and policy.ocm.gate):
        return Gate(True)
    if observed is None:
        return Gate(False, "the OCM Component is not created yet")
    cond = readiness.ready_condition(observed) or {}
    if cond.get("status") != "True":
        return Gate(
            False,
            f"the OCM Component is not Ready ({cond.get('reason') or 'no Ready condition yet'})",
        )
    generation = (observed.get("metadata") or {}).get("generation")
    seen_generation = (observed.get("status") or {}).get("observedGeneration")
    if generation is not None and seen_generation is not None and seen_generation != generation:
        return Gate(
            False,
            f"the OCM Component has not reconciled its current spec yet (generation {generation})",
        )
    seen = ((observed.get("status") or {}).get("component") or {}).get("version")
    if seen != version:
        return Gate(False, f"the OCM Component reports version {seen!r}, not {version!r}")
    missing = _has_verify(observed.get("spec"), ocmobjects.verify(policy.ocm))
    if missing:
        return Gate(
            False, f"the OCM Component does not verify signature(s) {', '.join(missing)} yet"
        )
    reported = ((observed.get("status") or {}).get("component") or {}).get("digest")
    return _digest_gate(policy, reported, descriptor, known)


# --------------------------------------------------------------------------- Flux objects


@dataclass(frozen=True)
class FluxPlan:
    """The Flux objects to compose this reconcile, and which state they are in.

    ``state``: ``current`` (what this version deploys), ``held`` (observed, kept at what they
    deploy while the gate is closed), ``withheld`` (not composed yet).
    """

    objects: dict[str, dict[str, Any]]
    state: str


def hold(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` with every version-dependent field as observed (absent where it has none)."""
    out = copy.deepcopy(dict(desired))
    seen = observed.get("spec")
    if not isinstance(seen, Mapping):  # a stub without spec: nothing observed to keep
        return out
    for name in HELD_FIELDS.get(out["kind"], ()):
        if name in seen:
            out["spec"][name] = copy.deepcopy(seen[name])
        else:
            out["spec"].pop(name, None)
    return out


def plan_flux(
    built: Mapping[str, dict[str, Any]],
    observed: Mapping[str, Any],
    gate: Gate,
    ready_to_start: bool,
) -> FluxPlan:
    """What Flux gets: current once the gate is open, observed fields kept while it is closed.

    A first deployment also waits until ``ready_to_start`` (every Namespace and every object
    that must outlive the Flux objects is observed), so their deletion order is in place
    before anything is deployed.
    """
    running = [k for k in built if k in observed]
    if not running:
        if gate.open and ready_to_start:
            return FluxPlan(dict(built), "current")
        return FluxPlan({}, "withheld")
    if gate.open:
        return FluxPlan(dict(built), "current")
    return FluxPlan({k: hold(built[k], observed[k]) for k in running}, "held")
