"""The pieces the tenancy guarantees rest on: the name hash, composition keys, remote-key syntax,
and the tenant rule for new namespace names (unit level; tests/test_security_tenancy.py attacks
them through RunFunction)."""

from __future__ import annotations

import base64
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import PROFILE

from function.api.policy import DEFAULT_TENANT_PATTERN, Policy
from function.compose import names, remotekeys, tenancy
from function.compose.identity import Identity, identity_of
from function.compose.objectnames import ObjectNames
from function.errors import InvalidPolicy, PolicyViolation

dns_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
dns_subdomain = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,100}[a-z0-9])?", fullmatch=True)


def test_digest_encoding_is_injective_where_joining_is_not() -> None:
    assert names.digest("ab", "c") != names.digest("a", "bc")
    assert names.digest("team", "a-podinfo") != names.digest("team-a", "podinfo")
    assert names.digest("a", "") != names.digest("a")
    assert len(names.digest("x")) * 5 == names.HASH_BITS >= 64
    assert re.fullmatch(r"[a-z2-7]+", names.digest("x"))


@settings(PROFILE)
@given(d=st.binary(min_size=names._HEAD_BYTES, max_size=32))
def test_the_hash_is_base32_of_the_digest(d: bytes) -> None:
    # Names are a stable API: the table-driven encoding must be b32encode's, character for
    # character, or every object a claim composed would be renamed (deleted and created).
    assert names.base32_head(d) == base64.b32encode(d).decode().lower()[: names.HASH_CHARS]


def test_a_known_name_hash_never_changes() -> None:
    # What every release since names v2 derived for this claim's owner label: a change here
    # renames every object of every claim.
    assert names.digest("claim", "team-a", "podinfo", "claim") == "bfpzoucqc6qpnhsg4wrp"


@settings(PROFILE)
@given(a=st.tuples(dns_label, dns_subdomain), b=st.tuples(dns_label, dns_subdomain))
def test_distinct_claims_share_no_derived_name(a, b) -> None:
    if a == b:
        return
    na, nb = (ObjectNames(Identity(ns, n, n, True, ns)) for ns, n in (a, b))
    mine = {na.serviceaccount, na.role("x"), na.pull_secret, na.deployment, na.repository_secret}
    theirs = {nb.serviceaccount, nb.role("x"), nb.pull_secret, nb.deployment, nb.repository_secret}
    assert not mine & theirs
    for name in mine | theirs:
        assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
    assert len(na.deployment) <= names.RELEASE_NAME_MAX


def test_one_claims_objects_of_a_kind_never_share_a_name_across_namespaces() -> None:
    n = ObjectNames(Identity("team-a", "podinfo", "podinfo", True, "team-a"))
    roles = {n.role(ns) for ns in ("a", "b", "deploy", "team-a--web")} | {n.helm_storage_role}
    assert len(roles) == 5
    es = {n.pull_externalsecret(ns) for ns in ("a", "b")} | {
        n.service_externalsecret("a", "db"),
        n.service_externalsecret("b", "db"),
    }
    assert len(es) == 4


def test_keys_cannot_meet() -> None:
    """Fixed keys have no dot; per-namespace keys join DNS labels with dots (no dot inside)."""
    combos = [("a", "b-c"), ("a-b", "c"), ("a", "b.c"), ("a.b", "c")]
    keys = {names.key("externalsecret", ns, s) for ns, s in combos if "." not in ns}
    assert len(keys) == 3
    fixed = {
        "deploy-namespace",
        "serviceaccount-deployer",
        "role-deploy",
        "rolebinding-deploy",
        "externalsecret-repository",
    }
    assert all("." not in k for k in fixed)
    for ns in ("deploy", "repository", "pull", "deployer"):
        assert names.legacy_key("namespace", ns) not in fixed
        assert (
            names.key("role", ns) not in fixed and names.key("externalsecret-pull", ns) not in fixed
        )
    long = names.key("externalsecret", "n" * 63, "s" * 253)
    assert len(long) <= 253 and long != names.key("externalsecret", "n" * 63, "s" * 252 + "t")


@pytest.mark.parametrize(
    "key", ["apps/team-a/db", "apps/team-a/db_v2.prod", "arn:aws:x/team-a/y", "a@b=c+d"]
)
def test_plain_keys_pass(key: str) -> None:
    remotekeys.segments(key, "k")


@pytest.mark.parametrize(
    "key",
    [
        "apps/%2e%2e/x",
        "apps\\x",
        "apps/\x00",
        "apps/a\nb",
        "apps/\t",
        "apps/\uff0e\uff0e/x",
        "apps\uff0fx",
        "apps\u2215x",
        "apps/\u2024",
        "/apps",
        "apps/",
        "apps//x",
        "apps/./x",
        "apps/..",
        "apps/ x",
        "apps/é",
    ],
)
def test_keys_a_prefix_check_cannot_reason_about_are_refused(key: str) -> None:
    with pytest.raises(PolicyViolation):
        remotekeys.segments(key, "k")


def test_prefixes_match_whole_segments() -> None:
    ident = Identity("team", "podinfo", "podinfo", True, "team")
    below = remotekeys.prefix("apps/{claimNamespace}/", ident, "p")
    exact = remotekeys.prefix("apps/{claimNamespace}", ident, "p")
    assert remotekeys.covered(["apps", "team", "db"], below) and not remotekeys.covered(
        ["apps", "team"], below
    )
    assert remotekeys.covered(["apps", "team"], exact) and remotekeys.covered(
        ["apps", "team", "x"], exact
    )
    assert not remotekeys.covered(["apps", "team-a", "db"], exact) and not remotekeys.covered(
        ["apps", "team-a", "db"], below
    )


def _may_create(tenant: str, name: str) -> bool:
    ident = Identity(tenant, "c", "c", True, tenant)
    return bool(tenancy.compiled(DEFAULT_TENANT_PATTERN, ident, "p").fullmatch(name))


def test_every_new_name_has_at_most_one_tenant() -> None:
    """The default tenant pattern cannot be fooled by a hyphen: for every name, at most one of
    these tenants (prefixes of each other) may create it."""
    tenants = ["team", "team-a", "team-a-b", "team--a", "t", "team-b"]
    candidates = {f"{t}--{s}" for t in tenants for s in ("a", "web", "a-b", "b--c")}
    candidates |= {"team-a-web", "team-b-web", "team--a-x", "team-a--b", "team---a"}
    # A tenant's own namespace (team--a, where its claims live) exists: create refuses it as
    # existing-not-owned, existing refuses it without the tenant label; only free names count.
    for name in candidates - set(tenants):
        owners = [t for t in tenants if _may_create(t, name)]
        assert len(owners) <= 1, (name, owners)
    assert _may_create("team-a", "team-a--web") and not _may_create("team", "team-a--web")
    assert not _may_create("team", "team-a") and not _may_create("team", "team-b-web")
    assert not _may_create("team-a", "team-a-b") and not _may_create("team-a", "team--a-x")


@settings(PROFILE)
@given(
    t1=dns_label,
    t2=dns_label,
    suffix=st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8})?", fullmatch=True),
)
def test_tenant_space_is_disjoint(t1: str, t2: str, suffix: str) -> None:
    name = f"{t1}--{suffix}"
    if t1 != t2 and len(name) <= 63:
        assert not _may_create(t2, name) or name == t2


def test_deploy_namespace_pattern_is_reserved() -> None:
    policy = Policy()
    assert tenancy.reserved_pattern(policy) == "sack8s-*"
    # Issue 30: reserved in every mode, a shared deploy namespace included (another
    # Composition in the cluster may use per-claim deploy namespaces).
    assert (
        tenancy.reserved_pattern(Policy.model_validate({"deployNamespace": {"shared": "x"}}))
        == "sack8s-*"
    )


def test_namespaced_xr_and_forged_tenant_labels() -> None:
    """A namespaced XR is the team's object: only its namespace is trusted. A claim's XR never
    honours sack8s.io/tenant (Crossplane copies a claim's labels to its XR)."""
    forged = {
        "metadata": {
            "name": "x",
            "namespace": "team-b",
            "labels": {
                "crossplane.io/claim-namespace": "team-a",
                "crossplane.io/claim-name": "x",
                "sack8s.io/tenant": "team-a",
            },
        },
        "spec": {"claimRef": {"namespace": "team-a", "name": "x"}},
    }
    assert identity_of(forged).tenant == "team-b"
    claim_xr = {
        "metadata": {
            "name": "x-1",
            "labels": {
                "crossplane.io/claim-namespace": "team-b",
                "crossplane.io/claim-name": "x",
                "sack8s.io/tenant": "team-a",
            },
        }
    }
    # Issue 30: crossplane.io/claim-* labels never confer identity; without spec.claimRef
    # this is an XR without a claim, its tenant the sack8s.io/tenant label ops set.
    assert identity_of(claim_xr).tenant == "team-a" and not identity_of(claim_xr).is_claim
    claim_xr["spec"] = {"claimRef": {"namespace": "team-b", "name": "x"}}
    assert identity_of(claim_xr).tenant == "team-b" and identity_of(claim_xr).name == "x"
    ops_xr = {"metadata": {"name": "svc", "labels": {"sack8s.io/tenant": "team-a"}}}
    assert (
        identity_of(ops_xr).tenant == "team-a"
        and identity_of({"metadata": {"name": "svc"}}).tenant == "svc"
    )


def test_label_values_fit() -> None:
    for text in ("x" * 253, "a.b", "a" * 63, "-x-", "x" * 64):
        v = names.label_value(text)
        assert len(v) <= 63 and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", v), v
    assert names.label_value("a" * 63) == "a" * 63
    assert len({names.label_value("x" * 100 + c) for c in "abc"}) == 3


def test_all_pairs_of_a_small_alphabet_are_injective() -> None:
    """Exhaustive over short identities: (namespace, name) pairs whose joined text collides."""
    parts = ["a", "b", "a-b", "b-a", "a-b-a", "ab"]
    seen: dict[str, tuple[str, str]] = {}
    for ns, name in itertools.product(parts, repeat=2):
        n = ObjectNames(Identity(ns, name, name, True, ns))
        for derived in (n.serviceaccount, n.deployment, n.pull_secret):
            assert seen.setdefault(derived, (ns, name)) == (ns, name), derived


# -- issue 30: keys injective by construction; patterns that cannot be ambiguous ---------------


@pytest.mark.parametrize("extra", range(0, 40))
def test_hashed_keys_are_longer_than_any_joined_key(extra: int) -> None:
    """A joined key is at most 232 characters, a hashed one exactly 253: the forms never meet,
    whatever a claim chooses as a secret name (even the text of another secret's hashed key)."""
    secret = "s" * (200 + extra)
    k = names.key("externalsecret", "team-a--web", secret)
    joined = f"externalsecret.team-a--web.{secret}"
    if len(joined) <= names.KEY_JOINED_MAX:
        assert k == joined
    else:
        assert len(k) == 253 and re.fullmatch(
            r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", k
        ), k
        mimic = k[len("externalsecret.team-a--web.") :]
        assert names.key("externalsecret", "team-a--web", mimic) != k
    cut = names.key("externalsecret", "team-a--web", "s" * 204 + ".-x" * 3)
    assert len(cut) == 253 and not cut[: names.KEY_JOINED_MAX].endswith((".", "-"))


def test_namespace_keys_are_the_name_itself() -> None:
    from function.compose import namespaces

    for name in ("podinfo", "n" * 53, "n" * 54, "n" * 63):
        assert namespaces.key_target(name) == f"namespace-{name}"
    long = "team-a--" + "x" * 55
    old = names.legacy_key("namespace", long)
    assert old != f"namespace-{long}"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": long}}
    other = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a--other"}}
    # The old key is kept only for the very Namespace observed under it (else Crossplane
    # would delete it); a key holding another object proves nothing.
    assert namespaces.key_target(long, {old: ns}) == old
    assert namespaces.key_target(long, {old: other}) == f"namespace-{long}"
    assert namespaces.key_target(long, {old: {**ns, "kind": "ConfigMap"}}) == f"namespace-{long}"


UNAMBIGUOUS = [
    r"^{claimNamespace}(--[a-z0-9]+(-[a-z0-9]+)*)?$",  # the default
    r"{claimNamespace}--[a-z]+",
    r"^{claimNamespace}$",
    r"\A{claimNamespace}--.*\Z",
    r"^{claimNamespace}(?:--{claimName}(-[a-z0-9]+)?)?$",
    r"^{claimNamespace}(--a|--b)$",
    r"^{claimNamespace}(--){1,2}x$",
]
AMBIGUOUS = [
    (r"^{claimNamespace}(-[a-z0-9]+)*$", "separator"),  # the old single hyphen
    (r"^{claimNamespace}-.*$", "separator"),
    (r"^{claimNamespace}.*$", "separator"),
    (r"^{claimNamespace}-?-[a-z]+$", "separator"),
    (r"^{claimNamespace}(--a|-b)$", "separator"),
    (r"^{claimNamespace}(--a)?b$", "separator"),
    (r".*{claimNamespace}--x", "does not start"),
    (r"^x-{claimNamespace}--y$", "does not start"),
    (r"^({claimNamespace})--y$", "does not start"),
    (r"^{claimNamespace}--a$|^b$", "does not start"),
    (r"^(?={claimNamespace}){claimNamespace}--a$", "more than once"),
    (r"^[a-z]+--x$", "does not contain"),
]


@pytest.mark.parametrize("pattern", UNAMBIGUOUS)
def test_unambiguous_tenant_patterns_are_accepted(pattern: str) -> None:
    assert tenancy.pattern_ambiguity(pattern, required=True) is None


@pytest.mark.parametrize("pattern, why", AMBIGUOUS)
def test_ambiguous_tenant_patterns_are_named(pattern: str, why: str) -> None:
    problem = tenancy.pattern_ambiguity(pattern, required=True)
    assert problem is not None and why in problem, problem
    policy = Policy.model_validate({"namespaces": {"tenantPattern": pattern}})
    with pytest.raises(InvalidPolicy) as e:
        tenancy.ambiguity_warnings(policy)
    assert str(e.value).startswith("namespaces.tenantPattern: ") and "acceptAmbiguous" in str(
        e.value
    )
    accepted = Policy.model_validate(
        {"namespaces": {"tenantPattern": pattern, "acceptAmbiguousPattern": True}}
    )
    (warning,) = tenancy.ambiguity_warnings(accepted)
    assert "namespaces.tenantPattern" in warning and why in warning


def test_allow_pattern_is_checked_only_where_it_names_the_tenant() -> None:
    assert tenancy.pattern_ambiguity(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", required=False) is None
    assert tenancy.pattern_ambiguity(r"^{claimNamespace}--.*$", required=False) is None
    assert "does not start" in (
        tenancy.pattern_ambiguity(r".*{claimNamespace}.*", required=False) or ""
    )


def test_ambiguous_matches_really_are_ambiguous() -> None:
    """What the check refuses, shown on the compiled patterns: one name, two tenants."""
    for pattern, _ in AMBIGUOUS[:2]:
        rx = {t: re.compile(pattern.replace("{claimNamespace}", t)) for t in ("team", "team-a")}
        assert rx["team"].fullmatch("team-a-x") and rx["team-a"].fullmatch("team-a-x")
    for pattern in UNAMBIGUOUS[:2]:
        rx = {t: re.compile(pattern.replace("{claimNamespace}", t)) for t in ("team", "team-a")}
        assert not (rx["team"].fullmatch("team-a--x") and rx["team-a"].fullmatch("team-a--x"))
