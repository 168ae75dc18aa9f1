"""The tenancy model: which namespaces a claim may reach (docs/security.md, "Tenancy").

A claim's *tenant* is its own namespace (identity.py). A namespace belongs to a tenant by
one of two rules, neither of which a hyphen can fool:

- it exists and is the tenant's own namespace, or carries the policy's tenant label
  (``sack8s.io/tenant``) with the tenant as its value -- ops hand namespaces out by
  labelling them, the function labels the namespaces a claim creates, and a team holding
  ``edit`` cannot change a Namespace's labels. Exact string equality: ``team`` is not
  ``team-a``.
- it does not exist yet and its name matches the policy's ``tenantPattern``: always
  ``{claimNamespace}`` first, then nothing or the separator ``--`` (:func:`pattern_ambiguity`
  refuses any other pattern unless ops accept it), and no tenant containing ``--`` creates by
  pattern -- so a name's tenant is everything before its first ``--``, exactly one
  (``team-a--web`` is ``team-a``'s, never ``team``'s).

What each mode may touch follows: ``existing`` only a namespace that exists and is the
tenant's; ``create`` only a free name in the tenant's pattern (or a namespace this claim
already owns); ``adopt`` (where ops allow it) only an existing namespace of the tenant that no
other claim owns and that is not the claim's own namespace (adopting means deleting with the
claim) -- or, for a free name, what ``create`` may. Names matching the deploy-namespace pattern
are reserved in every mode: no claim may create or use them, so none can squat a deploy
namespace another claim will need.

The checks that need only names (forbidden, reserved, the deploy namespace, the claim's own
namespace) run at admission, before anything is fetched; those that need the live Namespace
(read as a required resource) or what this XR already composes run when the Namespaces are
composed -- including the tenant pattern, so a namespace an earlier release created for the
claim under other rules stays the claim's (upgrades) when that is *proven* (its marks, or
Crossplane's controller reference, on the object itself: namespaces.observed_own), while any
*new* name must fit.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import re
import re._constants as _c
from collections.abc import Mapping
from typing import Any

from function.api.claim import Spec
from function.api.policy import DEFAULT_FORBIDDEN, Policy
from function.compose import names
from function.compose.identity import LABEL_XR_TENANT, Identity, owner_of
from function.errors import InvalidClaim, InvalidPolicy, PolicyViolation

# typeshed has no stub for the private re._parser: imported by name, its functions are Any.
_parser = importlib.import_module("re._parser")


def compiled(pattern: str, identity: Identity, field: str) -> re.Pattern[str]:
    """``pattern`` with ``{claimNamespace}`` (the tenant) and ``{claimName}`` filled in, escaped."""
    text = pattern.replace("{claimNamespace}", re.escape(identity.tenant)).replace(
        "{claimName}", re.escape(identity.name)
    )
    try:
        return re.compile(text)
    except re.error as e:
        raise InvalidPolicy(field, f"is not a valid regular expression: {e}") from None


SEPARATOR = "--"
_MARK = "\x00"  # stands for {claimNamespace} while a pattern is parsed


def _starts(seq: list[Any], text: str) -> bool:
    """Whether every string the parsed regex ``seq`` matches starts with ``text`` (a sound
    under-approximation: anything it cannot decide is False).
    """
    if not text:
        return True
    if not seq:
        return False
    op, av = seq[0]
    if op is _c.LITERAL:
        return chr(av) == text[0] and _starts(seq[1:], text[1:])
    if op is _c.SUBPATTERN:
        return _starts([*av[-1], *seq[1:]], text)
    if op is _c.BRANCH:
        return all(_starts([*b, *seq[1:]], text) for b in av[1])
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) and av[0] >= 1:
        return _starts(list(av[2]), text)
    return False


@functools.lru_cache(maxsize=256)  # a pure function of the policy's pattern: once each
def pattern_ambiguity(pattern: str, *, required: bool) -> str | None:
    """Why ``pattern`` could let one namespace name fit two tenants (None: it cannot).

    Unambiguous means: ``{claimNamespace}`` exactly once, at the very start of every match,
    followed by nothing or by the separator ``--``. Tenants never contain ``--`` where names
    are created by pattern (:func:`check_live`), so a name's tenant is everything before its
    first ``--``: exactly one. The check reads the parsed regex and accepts only what it can
    prove; ``required``: the pattern must mention ``{claimNamespace}`` (tenantPattern).
    """
    count = pattern.count("{claimNamespace}")
    example = "'^{claimNamespace}(--[a-z0-9]+(-[a-z0-9]+)*)?$'"
    if count == 0:
        if not required:
            return None
        return (
            "does not contain {claimNamespace}, so every tenant may create the same names "
            f"(write it as {example})"
        )
    if count > 1:
        return "contains {claimNamespace} more than once"
    text = pattern.replace("{claimNamespace}", _MARK).replace("{claimName}", "x")
    try:
        items = list(_parser.parse(text))
    except re.error:
        return None  # not a regex at all: compiled() names that error
    while items and items[0] in ((_c.AT, _c.AT_BEGINNING), (_c.AT, _c.AT_BEGINNING_STRING)):
        items = items[1:]
    if not items or items[0] != (_c.LITERAL, 0):
        return (
            "does not start with {claimNamespace}, so a name's tenant is not its first part "
            f"and one name can fit two tenants (write it as {example})"
        )
    rest = items[1:]
    while rest and rest[-1] in ((_c.AT, _c.AT_END), (_c.AT, _c.AT_END_STRING)):
        rest = rest[:-1]
    if not rest or _starts(rest, SEPARATOR):
        return None
    op, av = rest[0]
    if (
        len(rest) == 1
        and op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT)
        and (av[0], av[1]) == (0, 1)
        and _starts(list(av[2]), SEPARATOR)
    ):
        return None
    return (
        f"does not follow {{claimNamespace}} with the separator {SEPARATOR!r}, so tenant 'team' "
        f"could create names of tenant 'team-a' ('team-a-x' fits both; write it as {example})"
    )


def ambiguity_warnings(policy: Policy) -> list[str]:
    """Refuse an ambiguous tenantPattern or allowPattern, or -- where ops accepted it with
    ``namespaces.acceptAmbiguousPattern`` -- the Warning every claim carries.
    """
    out = []
    nsp = policy.namespaces
    for field, pattern, required in (
        ("namespaces.tenantPattern", nsp.tenantPattern, True),
        ("namespaces.allowPattern", nsp.allowPattern, False),
    ):
        problem = pattern_ambiguity(pattern, required=required)
        if problem is None:
            continue
        if not nsp.acceptAmbiguousPattern:
            raise InvalidPolicy(
                field,
                f"{pattern[:120]!r} {problem}; set namespaces.acceptAmbiguousPattern: true to "
                "accept it anyway (every claim then carries a Warning)",
            )
        out.append(
            f"input {field}: {pattern[:120]!r} {problem}; accepted by "
            "namespaces.acceptAmbiguousPattern, so namespace names may be shared between tenants"
        )
    return out


def forbidden_pattern(policy: Policy, name: str) -> str | None:
    """The first forbidden-namespace pattern (built-in or the policy's) ``name`` matches, or
    None: no claim may reach such a namespace.
    """
    for pattern in [*DEFAULT_FORBIDDEN, *policy.namespaces.forbidden]:
        if fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def reserved_pattern(policy: Policy) -> str | None:
    """The deploy-namespace pattern as a glob (``sack8s-*``): names no claim may target.

    Reserved in every mode, ``deployNamespace.shared`` included: another Composition in the
    same cluster may use per-claim deploy namespaces, and a name squatted here would make it
    refuse its claim.
    """
    return policy.deployNamespace.pattern.replace("{claim}", "*")


def is_home(identity: Identity, name: str) -> bool:
    """The claim's own namespace (where it lives: its team holds ``edit`` there)."""
    return identity.is_claim and name == identity.namespace


def check_names(spec: Spec, policy: Policy, identity: Identity, deploy_ns: str) -> list[str]:
    """Everything decidable from names alone, for every target namespace; returns the
    Warnings of an ambiguous pattern ops accepted.
    """
    allow = compiled(policy.namespaces.allowPattern, identity, "namespaces.allowPattern")
    compiled(
        policy.namespaces.tenantPattern, identity, "namespaces.tenantPattern"
    )  # a bad policy fails first
    warnings = ambiguity_warnings(policy)
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
    return warnings


def _not_in_space(name: str, identity: Identity, policy: Policy) -> str:
    return (
        f"namespace {name!r} is not a name tenant {identity.tenant or '(none)'!r} may create "
        f"(namespaces.tenantPattern {policy.namespaces.tenantPattern!r})"
    )


def _separator_tenant(name: str, identity: Identity, policy: Policy) -> str:
    return (
        f"namespace {name!r} cannot be created: tenant {identity.tenant!r} contains the "
        f"separator {SEPARATOR!r}, so every name in its pattern would also be tenant "
        f"{identity.tenant.split(SEPARATOR)[0]!r}'s; ops create the namespace and label it "
        f"{policy.namespaces.tenantLabel}={identity.tenant}, then the claim uses mode existing"
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
    proven: set[str],
) -> None:
    """The checks that need the live Namespace; ``existing`` maps a name to the object (None:
    it does not exist; missing: not known yet). ``proven``: the names this XR composed before
    *with proof* -- the Namespace observed under its key has that name and this claim's full
    ownership marks (namespaces.observed_own); a live Namespace carrying them counts too.
    Anything else is checked as a new name.
    """
    # Compiled only for a name not yet ours: in steady state every name is proven, and a
    # fleet's per-claim patterns would only churn re's own cache of 512.
    tenant_names: re.Pattern[str] | None = None
    for i, ns in enumerate(spec.namespaces):
        where = f"spec.namespaces[{i}]"
        live = existing.get(ns.name)
        known = ns.name in existing
        ours = ns.name in proven or identity.owns(live)
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
            if SEPARATOR in identity.tenant:
                raise PolicyViolation(f"{where}.name", _separator_tenant(ns.name, identity, policy))
            if tenant_names is None:
                tenant_names = compiled(
                    policy.namespaces.tenantPattern, identity, "namespaces.tenantPattern"
                )
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


def check_xr_tenant(
    identity: Identity, policy: Policy, existing: Mapping[str, Mapping[str, Any] | None]
) -> None:
    """A claimless XR's ``sack8s.io/tenant`` label must name a namespace that exists and is
    that tenant's: not forbidden, not a deploy namespace, not labelled for another tenant.
    A label alone never makes a tenant (defence in depth: only ops create such XRs).
    """
    if not identity.tenant_from_label:
        return
    name, where = identity.tenant, f"metadata.labels[{LABEL_XR_TENANT}]"
    hit = forbidden_pattern(policy, name)
    if hit:
        raise PolicyViolation(where, f"tenant {name!r} is forbidden by policy (matches {hit!r})")
    if name not in existing:
        return  # not read yet (requirements.py asks for it)
    live = existing[name]
    if live is None:
        raise PolicyViolation(where, f"tenant namespace {name!r} does not exist")
    labels = _labels(live)
    other = labels.get(policy.namespaces.tenantLabel)
    if labels.get(names.LABEL_DEPLOY_NAMESPACE) or (other is not None and other != name):
        raise PolicyViolation(
            where, f"namespace {name!r} is not tenant {name!r}'s: {_whose(live, policy)}"
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
