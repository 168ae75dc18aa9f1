"""Checks a claim against the ops policy before anything is composed.

This is where the threat model is enforced (docs/security.md): a claim is written by a
service team and may be hostile, the policy is written by ops. Each check raises one
:class:`PolicyViolation` naming the claim field and the policy rule it breaks. Nothing
here trusts a claim to limit itself.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

from function.api.claim import PolicyRule, Spec, StoreRef
from function.api.policy import DEFAULT_FORBIDDEN, Policy, RegistryPolicy, SecretStorePolicy
from function.compose import gates
from function.compose.identity import Identity
from function.compose.names import NAMESPACE_MAX, fit
from function.errors import InvalidClaim, InvalidPolicy, PolicyViolation
from function.ocm.model import Repository

FORBIDDEN_VERBS = {"*", "escalate", "bind", "impersonate"}
FORBIDDEN_RESOURCES = {
    "*",
    "namespaces",
    "serviceaccounts/token",
    "roles",
    "rolebindings",
    "clusterroles",
    "clusterrolebindings",
    "nodes",
    "nodes/proxy",
    "certificatesigningrequests/approval",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
}


def deploy_namespace(policy: Policy, identity: Identity) -> str:
    if not identity.base:
        raise InvalidClaim(
            "metadata.name", "the XR has no name to derive the composed objects' names from"
        )
    if policy.deployNamespace.shared:
        if (
            not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", policy.deployNamespace.shared)
            or len(policy.deployNamespace.shared) > NAMESPACE_MAX
        ):
            raise InvalidPolicy(
                "deployNamespace.shared",
                f"{policy.deployNamespace.shared[:80]!r} is not a namespace name",
            )
        return policy.deployNamespace.shared
    try:
        raw = policy.deployNamespace.pattern.format(claim=identity.base)
    except (KeyError, IndexError, ValueError) as e:
        raise InvalidPolicy(
            "deployNamespace.pattern", f"only {{claim}} may be used ({e})"
        ) from None
    clean = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    if not clean:
        raise InvalidPolicy(
            "deployNamespace.pattern",
            f"{policy.deployNamespace.pattern!r} gives no usable namespace name",
        )
    return fit(clean, NAMESPACE_MAX)


def forbidden_pattern(policy: Policy, name: str) -> str | None:
    for pattern in [*DEFAULT_FORBIDDEN, *policy.namespaces.forbidden]:
        if fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def check_namespaces(spec: Spec, policy: Policy, deploy_ns: str) -> None:
    try:
        allow = re.compile(policy.namespaces.allowPattern)
    except re.error as e:
        raise InvalidPolicy(
            "namespaces.allowPattern", f"is not a valid regular expression: {e}"
        ) from None
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
        if ns.mode == "adopt" and not policy.namespaces.allowAdopt:
            raise PolicyViolation(
                f"spec.namespaces[{i}].mode",
                f"adopting namespace {ns.name!r} is not allowed by policy (namespaces.allowAdopt)",
            )
    hit = forbidden_pattern(policy, deploy_ns)
    if hit:
        raise InvalidPolicy(
            "deployNamespace", f"deploy namespace {deploy_ns!r} is forbidden (matches {hit!r})"
        )


def registry_for(policy: Policy, host: str, *, plain_http: bool, where: str) -> RegistryPolicy:
    """The policy entry for ``host``; refuses hosts ops did not list and plain HTTP ops did not
    allow.
    """
    for entry in policy.registries:
        if entry.host.lower() == host.lower():
            if plain_http and not entry.plainHTTP:
                raise PolicyViolation(
                    where, f"plain HTTP to {host} is not allowed by policy (registries[].plainHTTP)"
                )
            return entry
    allowed = ", ".join(sorted(r.host for r in policy.registries)) or "none"
    raise PolicyViolation(
        where, f"registry {host!r} is not in the policy allowlist (allowed: {allowed})"
    )


def _store(policy: Policy, ref: StoreRef, where: str) -> SecretStorePolicy:
    for s in policy.secretStores:
        if s.name == ref.name and s.kind == ref.kind:
            return s
    raise PolicyViolation(
        where, f"{ref.kind} {ref.name!r} is not in the policy's allowed secret stores"
    )


def check_remote_key(
    policy: Policy, identity: Identity, ref: StoreRef, key: str, where: str, store_where: str
) -> None:
    store = _store(policy, ref, store_where)
    if ".." in key.split("/") or "//" in key:
        raise PolicyViolation(where, f"remote key {key!r} may not contain '..' or '//' segments")
    prefixes = [
        p.replace("{claimNamespace}", identity.namespace).replace("{claimName}", identity.name)
        for p in store.remoteKeyPrefixes
    ]
    if not any(key.startswith(p) for p in prefixes):
        shown = ", ".join(repr(p) for p in prefixes) or "none"
        raise PolicyViolation(
            where,
            f"remote key {key!r} is outside the prefixes allowed for store {ref.name!r} ({shown})",
        )


def check_secrets(spec: Spec, policy: Policy, identity: Identity) -> None:
    targets = {ns.name for ns in spec.namespaces}
    seen: set[tuple[str, str]] = set()
    for i, s in enumerate(spec.secrets):
        base = f"spec.secrets[{i}]"
        ns = s.namespace or spec.primary_namespace
        if ns not in targets:
            raise PolicyViolation(
                f"{base}.namespace", f"namespace {ns!r} is not one of the claim's target namespaces"
            )
        if (ns, s.name) in seen:
            raise PolicyViolation(f"{base}.name", f"secret {ns}/{s.name} is listed twice")
        seen.add((ns, s.name))
        if not s.data and not s.dataFrom:
            raise PolicyViolation(base, "a secret needs at least one data or dataFrom entry")
        _store(policy, s.storeRef, f"{base}.storeRef")
        for j, d in enumerate(s.data):
            check_remote_key(
                policy,
                identity,
                s.storeRef,
                d.remoteRef.key,
                f"{base}.data[{j}].remoteRef.key",
                f"{base}.storeRef",
            )
        for j, d in enumerate(s.dataFrom):
            check_remote_key(
                policy, identity, s.storeRef, d.key, f"{base}.dataFrom[{j}].key", f"{base}.storeRef"
            )
    creds = spec.credentials
    for field in ("pull", "repository"):
        c = getattr(creds, field) if creds else None
        if c is None:
            continue
        base = f"spec.credentials.{field}"
        check_remote_key(
            policy,
            identity,
            c.storeRef,
            c.remoteRef.key,
            f"{base}.remoteRef.key",
            f"{base}.storeRef",
        )


def _covered(rule: PolicyRule, allowed: Iterable[PolicyRule]) -> bool:
    for a in allowed:
        if not set(rule.apiGroups) <= set(a.apiGroups):
            continue
        if not set(rule.resources) <= set(a.resources):
            continue
        if not set(rule.verbs) <= set(a.verbs):
            continue
        if a.resourceNames and not (
            rule.resourceNames and set(rule.resourceNames) <= set(a.resourceNames)
        ):
            continue
        return True
    return False


def check_rule_safe(rule: PolicyRule, where: str, error: type[Exception]) -> None:
    bad_verbs = sorted(set(rule.verbs) & FORBIDDEN_VERBS)
    if bad_verbs:
        raise error(where, f"verbs {bad_verbs} are never granted (they widen access)")
    bad = sorted(set(rule.resources) & FORBIDDEN_RESOURCES)
    if bad:
        raise error(where, f"resources {bad} are never granted (they widen access)")
    if "*" in rule.apiGroups:
        raise error(where, "apiGroups '*' is never granted; name the groups")
    if "rbac.authorization.k8s.io" in rule.apiGroups:
        raise error(where, "RBAC kinds are never granted to the deployer")


def check_rbac(spec: Spec, policy: Policy) -> None:
    for i, rule in enumerate(policy.rbac.deployerRules):
        check_rule_safe(rule, f"input rbac.deployerRules[{i}]", InvalidPolicy)
    extra = spec.rbac.extraRules if spec.rbac else []
    for i, rule in enumerate(extra):
        where = f"spec.rbac.extraRules[{i}]"
        check_rule_safe(rule, where, PolicyViolation)
        if not _covered(rule, policy.rbac.allowedExtraRules):
            raise PolicyViolation(
                where,
                "rule "
                f"{{apiGroups: {rule.apiGroups}, resources: {rule.resources}, "
                f"verbs: {rule.verbs}}} "
                "is not covered by the policy's rbac.allowedExtraRules",
            )


@dataclass(frozen=True)
class Admission:
    """What admitting a claim decided, carried forward to composition (never decided twice)."""

    deploy_namespace: str
    registry: RegistryPolicy  # the policy entry for the component repository's host


def admit(spec: Spec, policy: Policy, identity: Identity, repository: Repository) -> Admission:
    """Every policy check, before anything is fetched or composed: the deploy namespace and registry
    entry.
    """
    gates.check_version(spec, policy)
    deploy_ns = deploy_namespace(policy, identity)
    check_namespaces(spec, policy, deploy_ns)
    registry = registry_for(
        policy, repository.host, plain_http=repository.plain_http, where="spec.component.repository"
    )
    check_secrets(spec, policy, identity)
    check_rbac(spec, policy)
    return Admission(deploy_ns, registry)
