"""Tenancy invariants every successful render must satisfy (issues 18, 25 and 19.1).

The checks read only what a test already holds -- the XR (or claim) it rendered, the policy
it passed, the Namespaces it offered as required resources -- and the rendered output. They
never ask the product how it derived a name or a rule, so a product bug cannot hide behind
its own answer. What they enforce is the contract in docs/security.md:

- every Role grants only policy rules (the policy's deployer rules, the claim's admitted
  extra rules, and Helm's release storage in the Helm storage namespace only, never in a
  shared deploy namespace);
- every RoleBinding binds only the claim's own deployer ServiceAccount to a composed Role;
- every object lives in the claim's deploy namespace or in one of its tenant's namespaces;
- no two desired objects share (apiVersion, kind, namespace, name), nor (apiVersion, kind,
  name) at all (Crossplane v2.2.4 sorts resourceRefs namespace-blind), nor a
  composition-resource key, and nothing the claim asked for is missing (a key collision that
  overwrote an object would drop it);
- no registry credential is keyed to a host the policy did not name for it, and no image
  comes from a host outside the image allowlist;
- every remote key is plain ASCII under an allowed prefix;
- names fit their Kubernetes limits, carry the claim's full identity, and across renders no
  object identity is claimed by two different claims (a :class:`Ledger`);
- no composition key holds two objects (issue 30): a key observed with one object is never
  desired with another (Crossplane would apply the new one and orphan the old);
- no ownership is claimed on an object the claim did not create (issue 30): a composed
  Namespace that exists already carries this claim's marks, or Crossplane's controller
  reference to this XR, or is adopted (mode adopt, the tenant's, no other claim's marks).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from function.api.policy import DEFAULT_DEPLOYER_RULES

ANNOTATION_KEY = "crossplane.io/composition-resource-name"
LABEL_TENANT_DEFAULT = "sack8s.io/tenant"
LABEL_OWNER = "sack8s.io/owner"
ANN_CLAIM_NAMESPACE = "sack8s.io/claim-namespace"
ANN_CLAIM_NAME = "sack8s.io/claim-name"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
REMOTE_KEY = re.compile(r"^[A-Za-z0-9_.+=@-]+(/[A-Za-z0-9_.+=@-]+)*$")
STORAGE_RULE = (
    ("",),
    ("secrets",),
    ("get", "list", "watch", "create", "update", "patch", "delete"),
)
FLUX_OCM_KINDS = {
    "OCIRepository",
    "HelmRelease",
    "Kustomization",
    "Repository",
    "Component",
    "Resource",
}


def key_of(obj: Mapping[str, Any]) -> str:
    return obj["metadata"]["annotations"][ANNOTATION_KEY]


@dataclass(frozen=True)
class Claim:
    """Who rendered: the claim identity and its tenant, read from the XR as Crossplane sets it
    (``spec.claimRef``; labels never count)."""

    namespace: str | None  # None: an XR without a claim
    name: str
    tenant: str

    @classmethod
    def of(cls, xr: Mapping[str, Any]) -> Claim:
        meta = xr.get("metadata") or {}
        labels = meta.get("labels") or {}
        ref = (xr.get("spec") or {}).get("claimRef") or {}
        if meta.get("namespace"):
            return cls(meta["namespace"], meta["name"], meta["namespace"])
        if ref.get("namespace") and ref.get("name"):
            return cls(ref["namespace"], ref["name"], ref["namespace"])
        # crossplane.io/claim-* labels never confer identity (docs/security.md, "Tenancy").
        return cls(None, meta["name"], labels.get(LABEL_TENANT_DEFAULT) or meta["name"])


@dataclass
class Ledger:
    """Object identities seen across renders, and which claim composed each."""

    objects: dict[tuple[str, str, str, str], tuple[str | None, str]] = field(default_factory=dict)
    owners: dict[str, tuple[str | None, str]] = field(default_factory=dict)

    def record(
        self, claim: Claim, resources: Iterable[Mapping[str, Any]], user_named: set[str]
    ) -> None:
        """``user_named``: Namespaces whose names the claim chose (its targets); every other
        name is derived, and a derived name composed for two claims is a collision."""
        who = (claim.namespace, claim.name)
        for obj in resources:
            meta = obj["metadata"]
            if obj["kind"] == "Namespace" and meta["name"] in user_named:
                continue
            ident = (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])
            prev = self.objects.setdefault(ident, who)
            assert prev == who, (
                f"{ident} is composed for claim {prev} and for claim {who}: names are not injective"
            )
            owner = (meta.get("labels") or {}).get(LABEL_OWNER)
            if owner:
                prev = self.owners.setdefault(owner, who)
                assert prev == who, f"owner label {owner!r} names claim {prev} and claim {who}"


def _ident(o: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = o.get("metadata") or {}
    return (o.get("kind"), meta.get("namespace"), meta.get("name"))


def _marks(o: Mapping[str, Any]) -> tuple[Any, ...]:
    """The ownership marks: owner label, claim namespace and claim name annotations."""
    meta = o.get("metadata") or {}
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    return (labels.get(LABEL_OWNER), ann.get(ANN_CLAIM_NAMESPACE), ann.get(ANN_CLAIM_NAME))


def _controlled(o: Mapping[str, Any], uid: str | None) -> bool:
    refs = (o.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in refs)


def _rule(
    r: Mapping[str, Any],
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    return (
        tuple(r.get("apiGroups") or []),
        tuple(r.get("resources") or []),
        tuple(r.get("verbs") or []),
        tuple(r.get("resourceNames") or []),
    )


def _covered(rule: Mapping[str, Any], allowed: Iterable[Mapping[str, Any]]) -> bool:
    g, res, v, names = _rule(rule)
    for a in allowed:
        ag, ares, av, anames = _rule(a)
        if set(g) <= set(ag) and set(res) <= set(ares) and set(v) <= set(av):
            if not anames or (names and set(names) <= set(anames)):
                return True
    return False


def _substitute(text: str, claim: Claim) -> str:
    return text.replace("{claimNamespace}", claim.tenant).replace("{claimName}", claim.name)


def _under(key: str, prefix: str) -> bool:
    """Whole-segment prefix match: ``apps/team-a`` covers ``apps/team-a/x``, never ``apps/team-ab``."""
    p = prefix.rstrip("/")
    if not p:
        return False
    return (key == p and not prefix.endswith("/")) or key.startswith(p + "/")


def tenant_owns(
    claim: Claim,
    name: str,
    required: Mapping[str, Mapping[str, Any]],
    tenant_label: str,
    tenant_pattern: str | None = None,
) -> bool:
    """The contract's tenant rule, stated independently of the product: a namespace is the
    tenant's when it is the tenant's own namespace, carries the tenant label with the tenant
    as its value, or (not existing yet) is named ``<tenant>--<suffix>`` with no ``--`` in
    the suffix -- or, where ops set their own ``tenantPattern``, fully matches it."""
    if name == claim.tenant:
        return True
    live = required.get(name)
    if live is not None:
        return ((live.get("metadata") or {}).get("labels") or {}).get(tenant_label) == claim.tenant
    if tenant_pattern is not None:
        rx = tenant_pattern.replace("{claimNamespace}", re.escape(claim.tenant)).replace(
            "{claimName}", re.escape(claim.name)
        )
        return re.fullmatch(rx, name) is not None
    head, sep, tail = name.rpartition("--")
    return bool(sep) and head == claim.tenant and bool(DNS_LABEL.match(tail))


def allowed_image_hosts(policy: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(hosts images may come from, hosts a pull credential may be keyed to)."""
    images = policy.get("imageRegistries")
    if images is None:
        hosts = {r["host"].lower() for r in policy.get("registries") or []}
        return hosts, set(hosts)
    return (
        {r["host"].lower() for r in images},
        {r["host"].lower() for r in images if r.get("pullCredential")},
    )


_TEMPLATE_HOST = re.compile(r'"([^"\s]+)" \(dict "username"')
_PICK_HOSTS = re.compile(r"pick \S+ ((?:\"[^\"]+\" ?)+)\)")


def template_hosts(template: str) -> set[str]:
    hosts = set(_TEMPLATE_HOST.findall(template))
    for group in _PICK_HOSTS.findall(template):
        hosts |= set(re.findall(r'"([^"]+)"', group))
    return hosts


def _image_host(reference: str) -> str:
    ref = re.sub(r"^https?://", "", reference)
    first = ref.split("/", 1)[0]
    if "/" not in ref or not (
        "." in first or ":" in first or first == "localhost" or first.startswith("[")
    ):
        return "docker.io"
    return first.lower()


def check_render(
    out: Any,
    xr: Mapping[str, Any],
    policy: Mapping[str, Any],
    *,
    required: Iterable[Mapping[str, Any]] = (),
    ledger: Ledger | None = None,
    observed: Iterable[Mapping[str, Any]] = (),
) -> None:
    """Assert every invariant above on one successful render (``out`` is a ``Rendered``);
    ``observed``: the composed resources the render was given (for the two issue-30 checks).
    """
    assert out.fatal is None, out.fatal.message
    claim = Claim.of(xr)
    spec = dict(xr.get("spec") or {})
    ns_policy = policy.get("namespaces") or {}
    tenant_label = ns_policy.get("tenantLabel") or LABEL_TENANT_DEFAULT
    live = {
        d["metadata"]["name"]: d
        for d in required
        if d.get("kind") == "Namespace" and d.get("apiVersion") == "v1"
    }
    resources = list(out.resources)
    status = out.xr.get("status") or {}
    deploy_ns = (status.get("deploy") or {}).get("namespace")
    shared = (policy.get("deployNamespace") or {}).get("shared")
    assert deploy_ns, "status.deploy.namespace is missing"
    if shared:
        assert deploy_ns == shared
    targets = [t["name"] for t in spec.get("namespaces") or []]

    # -- identities: unique per (gvk, ns, name), per (gvk, name), per key; all within limits.
    keys = [key_of(o) for o in resources]
    assert len(keys) == len(set(keys)), [k for k, n in Counter(keys).items() if n > 1]
    full = Counter(
        (o["apiVersion"], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in resources
    )
    assert all(n == 1 for n in full.values()), [k for k, n in full.items() if n > 1]
    blind = Counter((o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in resources)
    assert all(n == 1 for n in blind.values()), (
        "objects of one apiVersion and kind share a name across namespaces (Crossplane v2.2.4 loops): "
        f"{[k for k, n in blind.items() if n > 1]}"
    )
    for o in resources:
        meta = o["metadata"]
        name = meta["name"]
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), (o["kind"], name)
        if o["kind"] == "Namespace" or o["kind"] in FLUX_OCM_KINDS:
            assert len(name) <= 63 and DNS_LABEL.match(name), (o["kind"], name)
        for k, v in (meta.get("labels") or {}).items():
            assert len(v) <= 63 and LABEL_VALUE.match(v), (o["kind"], name, k, v)
        ann = meta.get("annotations") or {}
        # Ownership carries the full identity, as separate fields.
        assert ann.get(ANN_CLAIM_NAME) == claim.name, (o["kind"], name, ann)
        assert ann.get(ANN_CLAIM_NAMESPACE) == claim.namespace, (o["kind"], name, ann)
        assert (meta.get("labels") or {}).get(LABEL_OWNER), (o["kind"], name)
        if o["kind"] == "HelmRelease":
            assert len(o["spec"]["releaseName"]) <= 53

    # -- no composition key holds two objects; no ownership of what the claim did not create.
    # Observed composed objects: a Namespace, or anything carrying the function's claim
    # annotation (a test's bare status stub of another controller's object is not one).
    seen = {
        key_of(o): o
        for o in observed
        if ANNOTATION_KEY in ((o.get("metadata") or {}).get("annotations") or {})
        and (o.get("kind") == "Namespace" or ANN_CLAIM_NAME in o["metadata"]["annotations"])
    }
    # Checked for the target Namespaces, whose names the claim chooses: a derived object's
    # name is a function of the claim and the policy alone (a policy change that renames the
    # deploy namespace is ops' doing, not a key collision).
    for o in resources:
        before = seen.get(key_of(o))
        if before is not None and o["kind"] == "Namespace" and o["metadata"]["name"] in targets:
            assert _ident(before) == _ident(o), (
                f"composition key {key_of(o)!r} holds {_ident(before)} and {_ident(o)}"
            )
    modes = {t["name"]: t.get("mode", "create") for t in spec.get("namespaces") or []}
    xr_uid = (xr.get("metadata") or {}).get("uid")
    for o in resources:
        if o["kind"] != "Namespace" or o["metadata"]["name"] not in live:
            continue
        name = o["metadata"]["name"]
        before = seen.get(key_of(o))
        if _marks(live[name]) == _marks(o) or (
            before is not None
            and _ident(before) == _ident(o)
            and (_marks(before) == _marks(o) or _controlled(before, xr_uid))
        ):
            continue
        lmeta = live[name].get("metadata") or {}
        other = (lmeta.get("labels") or {}).get(LABEL_OWNER) or (
            lmeta.get("annotations") or {}
        ).get(ANN_CLAIM_NAME)
        assert modes.get(name) == "adopt" and not other, (
            f"Namespace {name} exists, was not created by this claim, and is composed as its own"
        )

    # -- placement: the deploy namespace or the tenant's namespaces; nothing else cluster-scoped.
    for t in targets:
        assert t != deploy_ns, f"target {t} is the deploy namespace"
        assert tenant_owns(claim, t, live, tenant_label, ns_policy.get("tenantPattern")), (
            f"target {t} is not tenant {claim.tenant}'s"
        )
    allowed_ns = {deploy_ns, *targets}
    for o in resources:
        ns = o["metadata"].get("namespace")
        if o["kind"] == "Namespace":
            assert ns is None and o["metadata"]["name"] in allowed_ns, o["metadata"]["name"]
            if o["metadata"]["name"] in targets:
                assert o["metadata"]["labels"].get(tenant_label) == claim.tenant, o["metadata"]
            else:
                assert tenant_label not in o["metadata"]["labels"], (
                    "the deploy namespace must carry no tenant label"
                )
        elif o["kind"] == "ClusterUsage":
            # The one other cluster-scoped kind: it may block the deletion of this claim's
            # deploy namespace until one of its own target namespaces is gone, nothing else.
            of, by = o["spec"]["of"], o["spec"]["by"]
            assert ns is None and of["kind"] == by["kind"] == "Namespace", o["spec"]
            assert of["resourceRef"]["name"] == deploy_ns and not shared, o["spec"]
            assert by["resourceRef"]["name"] in targets, o["spec"]
        else:
            assert ns in allowed_ns, (o["kind"], o["metadata"]["name"], ns)
    if claim.namespace is not None:
        for o in resources:
            if o["kind"] == "Namespace":
                assert o["metadata"]["name"] != claim.namespace, (
                    "a claim composed its own namespace"
                )

    # A reconcile that waits for a Namespace it creates composes only what may exist yet
    # (compose/gates.py: Namespaces first); what goes into them is checked once they exist.
    if (status.get("blockedBy") or {}).get("reason") == "WaitingForNamespace":
        if ledger is not None:
            ledger.record(claim, resources, set(targets))
        return

    # -- RBAC: policy rules only; bindings to the claim's deployer only.
    sas = [o for o in resources if o["kind"] == "ServiceAccount"]
    assert len(sas) == 1 and sas[0]["metadata"]["namespace"] == deploy_ns, [
        s["metadata"] for s in sas
    ]
    deployer = sas[0]["metadata"]["name"]
    rules = policy.get("rbac", {}).get("deployerRules")
    base_rules = rules if rules is not None else [r.model_dump() for r in DEFAULT_DEPLOYER_RULES]
    allowed_extra = policy.get("rbac", {}).get("allowedExtraRules") or []
    extra = [
        r for r in (spec.get("rbac") or {}).get("extraRules") or [] if _covered(r, allowed_extra)
    ]
    # Helm's release state: the per-claim deploy namespace, or with a shared one the first target.
    storage_ns = targets[0] if shared else deploy_ns
    for hr in (o for o in resources if o["kind"] == "HelmRelease"):
        assert hr["spec"]["storageNamespace"] == storage_ns, (
            "Helm release state in",
            hr["spec"]["storageNamespace"],
        )
    roles = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in resources
        if o["kind"] == "Role"
    }
    granted = {_rule(r) for r in [*base_rules, *extra]}
    for (ns, name), role in roles.items():
        if shared:
            assert ns != deploy_ns, "a deployer Role in the shared deploy namespace"
        for r in role["rules"]:
            if _rule(r)[:3] == STORAGE_RULE and ns == storage_ns:
                continue
            assert _rule(r) in granted, f"Role {ns}/{name} grants {r}, which no policy rule grants"
    for o in resources:
        if o["kind"] != "RoleBinding":
            continue
        ns = o["metadata"]["namespace"]
        if shared:
            assert ns != deploy_ns
        assert o["subjects"] == [
            {"kind": "ServiceAccount", "name": deployer, "namespace": deploy_ns}
        ], o["subjects"]
        ref = o["roleRef"]
        assert ref["kind"] == "Role" and ref["apiGroup"] == "rbac.authorization.k8s.io", ref
        assert (ns, ref["name"]) in roles, (
            f"RoleBinding {ns}/{o['metadata']['name']} binds a Role not composed here"
        )

    # -- completeness: nothing the claim asked for was dropped (e.g. by a key collision).
    role_ns = {ns for ns, _ in roles}
    binding_ns = {o["metadata"]["namespace"] for o in resources if o["kind"] == "RoleBinding"}
    for t in spec.get("namespaces") or []:
        assert t["name"] in role_ns and t["name"] in binding_ns, (
            f"no deployer Role/RoleBinding in {t['name']}"
        )
        if t.get("mode", "create") in ("create", "adopt"):
            assert any(
                o["kind"] == "Namespace" and o["metadata"]["name"] == t["name"] for o in resources
            ), t
    if not shared:
        assert any(
            o["kind"] == "Namespace" and o["metadata"]["name"] == deploy_ns for o in resources
        )
    externals = [o for o in resources if o["kind"] == "ExternalSecret"]
    targets_of = Counter(
        (o["metadata"]["namespace"], o["spec"]["target"]["name"]) for o in externals
    )
    assert all(n == 1 for n in targets_of.values()), (
        f"two ExternalSecrets write one Secret: {targets_of}"
    )
    for ns, name in targets_of:
        assert not name.startswith("sh.helm.release."), (
            f"an ExternalSecret writes Helm release state {ns}/{name}"
        )
    for s in spec.get("secrets") or []:
        ns = s.get("namespace") or targets[0]
        assert (ns, s["name"]) in targets_of, f"service secret {ns}/{s['name']} was dropped"
    creds = spec.get("credentials") or {}
    image_hosts, pull_hosts = allowed_image_hosts(policy)
    repo_host = (
        re.sub(r"^(oci::)?(https?://|oci://)?", "", spec["component"]["repository"])
        .split("/")[0]
        .lower()
    )
    docker = [
        o
        for o in externals
        if (o["spec"]["target"].get("template") or {}).get("type")
        == "kubernetes.io/dockerconfigjson"
    ]
    if creds.get("pull"):
        pulls = [o for o in docker if o["metadata"]["namespace"] in targets]
        assert {o["metadata"]["namespace"] for o in pulls} == set(targets), (
            "a target namespace lacks the pull secret"
        )
    if creds.get("repository"):
        assert any(o["metadata"]["namespace"] == deploy_ns for o in docker), (
            "the repository secret was dropped"
        )
    for o in docker:
        tpl = o["spec"]["target"]["template"]["data"][".dockerconfigjson"]
        hosts = {h.lower() for h in template_hosts(tpl)}
        assert hosts, f"{o['metadata']['name']}: a dockerconfigjson keyed to no named host: {tpl}"
        # The repository credential (deploy namespace) is for the component's registry only;
        # pull secrets (target namespaces) only for image hosts the policy names for them.
        allowed = {repo_host} if o["metadata"]["namespace"] == deploy_ns else pull_hosts
        assert hosts <= allowed, (
            f"{o['metadata']['name']} keys a credential to {sorted(hosts - allowed)}"
        )
    for img in status.get("images") or []:
        host = _image_host(img["reference"])
        assert host in image_hosts, f"image {img['resource']} comes from {host}, outside the policy"

    # -- remote keys: plain ASCII, whole segments under an allowed prefix.
    stores = {
        (s["name"], s.get("kind", "ClusterSecretStore")): s
        for s in policy.get("secretStores") or []
    }
    for o in externals:
        ref = o["spec"]["secretStoreRef"]
        store = stores.get((ref["name"], ref.get("kind", "ClusterSecretStore")))
        assert store is not None, ref
        prefixes = [_substitute(p, claim) for p in store.get("remoteKeyPrefixes") or []]
        remote = [d["remoteRef"]["key"] for d in o["spec"].get("data") or []]
        remote += [d["extract"]["key"] for d in o["spec"].get("dataFrom") or []]
        for key in remote:
            assert REMOTE_KEY.match(key) and not {".", ".."} & set(key.split("/")), (
                f"remote key {key!r}"
            )
            assert any(_under(key, p) for p in prefixes), f"remote key {key!r} outside {prefixes}"

    if ledger is not None:
        ledger.record(claim, resources, set(targets))
