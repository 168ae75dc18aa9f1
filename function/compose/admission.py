"""Checks a claim against the ops policy before anything is composed.

This is where the threat model is enforced (docs/security.md): a claim is written by a
service team and may be hostile, the policy is written by ops. Each check raises one
:class:`PolicyViolation` naming the claim field and the policy rule it breaks. Nothing
here trusts a claim to limit itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from function.api.claim import PolicyRule, Spec, StoreRef
from function.api.policy import Policy, RegistryPolicy, SecretStorePolicy
from function.compose import gates, names, remotekeys, tenancy
from function.compose.identity import Identity
from function.compose.objectnames import ObjectNames
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


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
HELM_STORAGE_PREFIX = "sh.helm.release.v1."


def deploy_namespace(policy: Policy, identity: Identity) -> str:
    """The claim's deploy namespace: the policy's pattern with ``{claim}`` replaced by
    ``<claim namespace>-<claim name>`` (cut to fit) and a 100-bit hash of the identity.
    """
    if not identity.name:
        raise InvalidClaim(
            "metadata.name", "the XR has no name to derive the composed objects' names from"
        )
    shared = policy.deployNamespace.shared
    if shared:
        if not _DNS_LABEL.match(shared) or len(shared) > names.NAMESPACE_MAX:
            raise InvalidPolicy(
                "deployNamespace.shared", f"{shared[:80]!r} is not a namespace name"
            )
        return shared
    pattern = policy.deployNamespace.pattern
    if pattern.count("{claim}") != 1 or re.search(r"[{}]", pattern.replace("{claim}", "")):
        raise InvalidPolicy(
            "deployNamespace.pattern",
            f"{pattern[:80]!r} must contain {{claim}} exactly once and no other placeholder",
        )
    head, tail = pattern.split("{claim}")
    h = identity.digest("deploy-namespace")
    room = names.NAMESPACE_MAX - len(head) - len(tail) - len(h) - 1
    if room < 0:
        raise InvalidPolicy(
            "deployNamespace.pattern",
            f"{pattern[:80]!r} leaves no room for the claim's hash in 63 characters",
        )
    readable = names.readable(
        f"{identity.namespace}-{identity.name}" if identity.namespace else identity.name
    )
    readable = readable[:room].rstrip("-")
    name = f"{head}{readable}-{h}{tail}" if readable else f"{head}{h}{tail}"
    if not _DNS_LABEL.match(name):
        raise InvalidPolicy(
            "deployNamespace.pattern", f"{pattern[:80]!r} gives no usable namespace name ({name!r})"
        )
    return name


forbidden_pattern = tenancy.forbidden_pattern


def owned_deploy_namespace(policy: Policy, identity: Identity) -> str | None:
    """The deploy namespace when the claim composes it (None with a shared one)."""
    return None if policy.deployNamespace.shared else deploy_namespace(policy, identity)


def check_namespaces(
    spec: Spec, policy: Policy, deploy_ns: str, identity: Identity | None = None
) -> list[str]:
    """Name-only tenancy checks (tenancy.py); the live ones run when Namespaces are composed.
    Returns the Warnings of an ambiguous namespace pattern ops accepted.
    """
    warnings = tenancy.check_names(
        spec, policy, identity or Identity("", "", "", is_claim=False), deploy_ns
    )
    hit = tenancy.forbidden_pattern(policy, deploy_ns)
    if hit:
        raise InvalidPolicy(
            "deployNamespace", f"deploy namespace {deploy_ns!r} is forbidden (matches {hit!r})"
        )
    return warnings


_OCI_TYPES = {"oci", "ociregistry"}
REPOSITORY_FORM = (
    "must be an OCI registry reference (oci::https://registry.example.com/path, "
    "https://registry.example.com/path or registry.example.com/path); a claim cannot name a local "
    "path or another repository type"
)


def oci_repository_reference(text: str, where: str = "spec.component.repository") -> str:
    """The claim's repository spelled as an explicit OCI reference (``oci::...``), decided on
    the text alone: anything else is one message, before any path could be looked at.
    """
    rest = text.strip()
    if "::" in rest:
        typ, rest = rest.split("::", 1)
        if typ.strip().lower() not in _OCI_TYPES:
            raise PolicyViolation(where, REPOSITORY_FORM)
    scheme, sep, body = rest.partition("://")
    if not sep:
        scheme, body = "", rest
    elif scheme.lower() not in ("http", "https", "oci"):
        raise PolicyViolation(where, REPOSITORY_FORM)
    host = body.split("/", 1)[0]
    registry_like = "." in host or ":" in host or host == "localhost" or host.startswith("[")
    if not host or host.startswith((".", "~", "-")) or not (scheme or registry_like):
        raise PolicyViolation(where, REPOSITORY_FORM)
    return f"oci::{rest}"


_PATH_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")


def check_deploy_path(spec: Spec) -> None:
    """``deploy.path`` stays inside the deployable: relative, plain segments, no ``..``."""
    path = spec.deploy.path
    body = path[2:] if path.startswith("./") else ("" if path == "." else path)
    body = body[:-1] if body.endswith("/") and body != "/" else body
    if not body:
        return
    for seg in body.split("/"):
        if not _PATH_SEGMENT.match(seg) or seg in (".", ".."):
            raise PolicyViolation(
                "spec.deploy.path",
                f"{path[:80]!r} must be a path inside the deployed resource: relative, segments "
                "of letters, digits, '.', '_' and '-', no '..' or empty segments, no backslashes "
                "or control characters",
            )


def check_release_name(spec: Spec, identity: Identity) -> None:
    """A release name the claim chooses must not go into the claim's own namespace: ops may hand
    that namespace to another tenant as well (``sack8s.io/tenant``), whose claims could name
    the same release there (docs/security.md, "Helm release names").
    """
    if (
        spec.deploy.releaseName
        and identity.is_claim
        and spec.primary_namespace == identity.namespace
    ):
        raise PolicyViolation(
            "spec.deploy.releaseName",
            f"release {spec.deploy.releaseName!r} would go into the claim's own namespace "
            f"{identity.namespace!r}, where a claim of another tenant the namespace is handed to "
            "could choose the same name: deploy it to a namespace of the tenant (first entry of "
            "spec.namespaces), or leave releaseName unset",
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
    """A secret-store key the claim names: the store must be one the policy allows and the key
    must lie under one of its ``remoteKeyPrefixes`` (whole segments), or a tenant could read
    another tenant's secrets.

    Args:
        policy: The ops policy (its ``secretStores``).
        identity: The claim's identity (prefixes may name its tenant and name).
        ref: The store the claim names.
        key: The remote key.
        where: The claim field holding the key, named in the error.
        store_where: The claim field naming the store.

    Raises:
        PolicyViolation: naming ``where`` (or ``store_where``) and the allowed prefixes.
    """
    store = _store(policy, ref, store_where)
    parts = remotekeys.segments(key, where)
    allowed = [
        remotekeys.prefix(p, identity, f"input secretStores[{store.name}].remoteKeyPrefixes")
        for p in store.remoteKeyPrefixes
    ]
    if not any(remotekeys.covered(parts, a) for a in allowed):
        shown = (
            ", ".join(
                repr("/".join(segs) + ("/" if below else "")) for segs, below in allowed if segs
            )
            or "none"
        )
        raise PolicyViolation(
            where,
            f"remote key {key!r} is outside the prefixes allowed for store {ref.name!r} ({shown})",
        )


def _check_ref_fields(ref: object, where: str) -> None:
    for attr in ("property", "version"):
        value = getattr(ref, attr, None)
        if value:
            remotekeys.check_text(value, f"{where}.{attr}")


def check_secrets(spec: Spec, policy: Policy, identity: Identity) -> None:
    """The claim's service secrets and credentials: each secret in a target namespace, listed
    once, named neither like the pull Secret nor like Helm's release state, and every remote
    key under a prefix its store allows.

    Raises:
        PolicyViolation: naming the first offending claim field.
    """
    targets = {ns.name for ns in spec.namespaces}
    seen: set[tuple[str, str]] = set()
    pull_secret = (
        ObjectNames(identity).pull_secret if spec.credentials and spec.credentials.pull else None
    )
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
        if s.name == pull_secret:
            raise PolicyViolation(
                f"{base}.name",
                f"secret {ns}/{s.name} is the image pull secret the function composes",
            )
        if s.name.startswith(HELM_STORAGE_PREFIX):
            raise PolicyViolation(
                f"{base}.name",
                f"secret names starting with {HELM_STORAGE_PREFIX!r} are Helm's release state",
            )
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
            _check_ref_fields(d.remoteRef, f"{base}.data[{j}].remoteRef")
        for j, ref in enumerate(s.dataFrom):
            check_remote_key(
                policy,
                identity,
                s.storeRef,
                ref.key,
                f"{base}.dataFrom[{j}].key",
                f"{base}.storeRef",
            )
            _check_ref_fields(ref, f"{base}.dataFrom[{j}]")
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
        _check_ref_fields(c.remoteRef, f"{base}.remoteRef")
        for attr in ("usernameProperty", "passwordProperty"):
            remotekeys.check_text(getattr(c, attr), f"{base}.{attr}")


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
    """Refuse an RBAC rule that would widen access whatever the policy says (wildcards,
    escalate/bind/impersonate, RBAC kinds, Namespace or token access).

    Args:
        rule: A policy rule or a claim's extra rule.
        where: The field holding it, named in the error.
        error: ``InvalidPolicy`` for the policy's own rules, ``PolicyViolation`` for a claim's.
    """
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
    """The deployer's rights: the policy's rules are safe, and each of the claim's extra rules
    is safe and covered by a rule the policy allows.

    Raises:
        InvalidPolicy: for an unsafe policy rule.
        PolicyViolation: naming ``spec.rbac.extraRules[i]``.
    """
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
    # Warnings every composition of this claim carries (an ambiguous pattern ops accepted).
    warnings: tuple[str, ...] = ()


def admit(spec: Spec, policy: Policy, identity: Identity, repository: Repository) -> Admission:
    """Every policy check, before anything is fetched or composed: the deploy namespace and registry
    entry.
    """
    gates.check_version(spec, policy)
    deploy_ns = deploy_namespace(policy, identity)
    warnings = check_namespaces(spec, policy, deploy_ns, identity)
    registry = registry_for(
        policy, repository.host, plain_http=repository.plain_http, where="spec.component.repository"
    )
    check_deploy_path(spec)
    check_release_name(spec, identity)
    check_secrets(spec, policy, identity)
    check_rbac(spec, policy)
    return Admission(deploy_ns, registry, tuple(warnings))
