"""The tenancy model: which namespaces a claim may reach (docs/security.md, "Tenancy").

A claim's *tenant* is its own namespace (identity.py). A namespace belongs to a tenant by
one of two rules, neither of which a hyphen can fool:

- it exists and is the tenant's own namespace, or carries the policy's tenant label
  (``sack8s.io/tenant``) with the tenant as its value -- ops hand namespaces out by
  labelling them, the function labels the namespaces a claim creates, and a team holding
  ``edit`` cannot change a Namespace's labels. Exact string equality: ``team`` is not
  ``team-a``.
- it does not exist yet and its name matches the policy's ``tenantPattern``; the default,
  ``<tenant>--<suffix>`` with no ``--`` in the suffix, splits every name at its *last*
  ``--``, so each name has exactly one tenant (``team-a--web`` is ``team-a``'s, never
  ``team``'s).

What each mode may touch follows: ``existing`` only a namespace that exists and is the
tenant's; ``create`` only a free name in the tenant's pattern (or a namespace this claim
already owns); ``adopt`` (where ops allow it) only an existing namespace of the tenant that no
other claim owns and that is not the claim's own namespace (adopting means deleting with the
claim) -- or, for a free name, what ``create`` may. Names matching the deploy-namespace pattern
are reserved: no claim may create or use them, so none can squat a deploy namespace another
claim will need.

The checks that need only names (forbidden, reserved, the deploy namespace, the claim's own
namespace) run at admission, before anything is fetched; those that need the live Namespace
(read as a required resource) or what this XR already composes run when the Namespaces are
composed -- including the tenant pattern, so a namespace an earlier release created for the
claim under other rules stays the claim's (upgrades), while any *new* name must fit.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from function.api.claim import Spec
from function.api.policy import DEFAULT_FORBIDDEN, Policy
from function.compose import names
from function.compose.identity import Identity, owner_of
from function.errors import InvalidClaim, InvalidPolicy, PolicyViolation


def compiled(pattern: str, identity: Identity, field: str) -> re.Pattern[str]:
    """``pattern`` with ``{claimNamespace}`` (the tenant) and ``{claimName}`` filled in, escaped."""
    text = pattern.replace("{claimNamespace}", re.escape(identity.tenant)).replace(
        "{claimName}", re.escape(identity.name)
    )
    try:
        return re.compile(text)
    except re.error as e:
        raise InvalidPolicy(field, f"is not a valid regular expression: {e}") from None


def forbidden_pattern(policy: Policy, name: str) -> str | None:
    for pattern in [*DEFAULT_FORBIDDEN, *policy.namespaces.forbidden]:
        if fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def reserved_pattern(policy: Policy) -> str | None:
    """The deploy-namespace pattern as a glob (``sack8s-*``): names no claim may target."""
    if policy.deployNamespace.shared:
        return None
    return policy.deployNamespace.pattern.replace("{claim}", "*")


def is_home(identity: Identity, name: str) -> bool:
    """The claim's own namespace (where it lives: its team holds ``edit`` there)."""
    return identity.is_claim and name == identity.namespace


def check_names(spec: Spec, policy: Policy, identity: Identity, deploy_ns: str) -> None:
    """Everything decidable from names alone, for every target namespace."""
    allow = compiled(policy.namespaces.allowPattern, identity, "namespaces.allowPattern")
    compiled(
        policy.namespaces.tenantPattern, identity, "namespaces.tenantPattern"
    )  # a bad policy fails first
    reserved = reserved_pattern(policy)
    seen: set[str] = set()
    for i, ns in enumerate(spec.namespaces):
        where = f"spec.namespaces[{i}].name"
        if ns.name in seen:
            raise PolicyViolation(where, f"namespace {ns.name!r} is listed twice")
        seen.add(ns.name)
        hit = forbidden_pattern(policy, ns.name)
        if hit:
            raise PolicyViolation(
                where, f"namespace {ns.name!r} is forbidden by policy (matches {hit!r})"
            )
        if not allow.fullmatch(ns.name):
            raise PolicyViolation(
                where,
                f"namespace {ns.name!r} does not match the allowed pattern "
                f"{policy.namespaces.allowPattern!r}",
            )
        if ns.name == deploy_ns:
            raise PolicyViolation(where, f"namespace {ns.name!r} is the ops-owned deploy namespace")
        if reserved and fnmatch.fnmatchcase(ns.name, reserved):
            raise PolicyViolation(
                where,
                f"namespace {ns.name!r} is reserved for deploy namespaces "
                f"(deployNamespace.pattern {reserved!r})",
            )
        if ns.mode == "adopt" and not policy.namespaces.allowAdopt:
            raise PolicyViolation(
                f"spec.namespaces[{i}].mode",
                f"adopting namespace {ns.name!r} is not allowed by policy (namespaces.allowAdopt)",
            )
        if ns.mode != "existing" and is_home(identity, ns.name):
            raise PolicyViolation(
                f"spec.namespaces[{i}].mode",
                f"namespace {ns.name!r} is the claim's own namespace: only mode existing may "
                "use it",
            )


def _not_in_space(name: str, identity: Identity, policy: Policy) -> str:
    return (
        f"namespace {name!r} is not a name tenant {identity.tenant or '(none)'!r} may create "
        f"(namespaces.tenantPattern {policy.namespaces.tenantPattern!r})"
    )


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def belongs(live: Mapping[str, Any], name: str, identity: Identity, policy: Policy) -> bool:
    """An existing namespace is the tenant's: its own namespace, or labelled for it by ops."""
    if _labels(live).get(names.LABEL_DEPLOY_NAMESPACE):
        return False
    if is_home(identity, name):
        return True
    return (
        bool(identity.tenant)
        and _labels(live).get(policy.namespaces.tenantLabel) == identity.tenant
    )


def _whose(live: Mapping[str, Any], policy: Policy) -> str:
    labels = _labels(live)
    if labels.get(names.LABEL_DEPLOY_NAMESPACE):
        return "it is a deploy namespace"
    tenant = labels.get(policy.namespaces.tenantLabel)
    if tenant:
        return f"it belongs to tenant {tenant!r} ({policy.namespaces.tenantLabel})"
    label = policy.namespaces.tenantLabel
    return f"it has no {label} label; ops hand a namespace to a tenant by setting it"


def check_live(
    spec: Spec,
    policy: Policy,
    identity: Identity,
    existing: Mapping[str, Mapping[str, Any] | None],
    observed_keys: set[str],
    key_of: Any,
) -> None:
    """The checks that need the live Namespace; ``existing`` maps a name to the object (None:
    it does not exist; missing: not known yet). Composed earlier (observed) counts as ours.
    """
    tenant_names = compiled(policy.namespaces.tenantPattern, identity, "namespaces.tenantPattern")
    for i, ns in enumerate(spec.namespaces):
        where = f"spec.namespaces[{i}]"
        live = existing.get(ns.name)
        known = ns.name in existing
        ours = key_of(ns.name) in observed_keys or identity.owns(live)
        if ns.mode == "existing":
            if not known:
                continue
            if live is None:
                raise PolicyViolation(
                    where,
                    f"namespace {ns.name!r} does not exist (mode existing composes no Namespace)",
                )
            if not belongs(live, ns.name, identity, policy):
                raise PolicyViolation(
                    where,
                    f"namespace {ns.name!r} is not tenant {identity.tenant or '(none)'!r}'s: "
                    f"{_whose(live, policy)}",
                )
            continue
        if ours:  # composed for this claim before (under whatever rules held then): still ours
            continue
        if live is None:  # a free name (or not known yet): only what the tenant may create
            if not tenant_names.fullmatch(ns.name):
                raise PolicyViolation(f"{where}.name", _not_in_space(ns.name, identity, policy))
            continue
        other = owner_of(live)
        if ns.mode == "create":
            raise PolicyViolation(
                where,
                f"namespace {ns.name!r} already exists and is not owned by this claim"
                + (f" (owned by {other})" if other else "")
                + "; use mode existing for a namespace of your tenant (or adopt, where policy "
                "allows)",
            )
        # adopt
        if not belongs(live, ns.name, identity, policy):
            raise PolicyViolation(
                where,
                f"namespace {ns.name!r} cannot be adopted: it is not tenant "
                f"{identity.tenant!r}'s ({_whose(live, policy)})",
            )
        if other:
            raise PolicyViolation(
                where,
                f"namespace {ns.name!r} is owned by another claim ({other}); it cannot be adopted",
            )


def check_deploy_namespace(
    identity: Identity, deploy_ns: str, live: Mapping[str, Any] | None, *, observed: bool
) -> None:
    """The per-claim deploy namespace is this claim's alone: an existing one composed for
    another identity (a name collision, or a name someone took) is refused, never shared.
    """
    if live is None or observed or identity.owns(live):
        return
    other = owner_of(live)
    raise InvalidClaim(
        "metadata.name",
        f"the deploy namespace {deploy_ns!r} derived from this claim already exists and is not "
        "this claim's" + (f" (it belongs to {other})" if other else "") + "; refusing to share it",
    )
