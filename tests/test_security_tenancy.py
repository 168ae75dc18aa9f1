"""A hostile service team against tenancy isolation (issues 18, 25 and 19.1): the attack suite.

Every row is one attack a team holding ``edit`` in its own namespace can mount with a claim
there, against a strict policy. A row either expects exactly one Fatal naming the claim field
at fault (nothing else comes back: no partial desired state), or -- where the function
neutralises rather than refuses -- a successful render on which every tenancy invariant of
``tests/support/invariants.py`` holds, plus the row's own assertion on the output. Rows run
through RunFunction in-process (``function.edge.render.render``); the rows marked ``cli`` run
again through ``sack8s render`` in a subprocess. Positive controls (legitimate claims of the
same shape) sit next to the attacks, so a fix that refuses everything fails too.

The classes, as the issues number them:

18.1 target namespaces not tied to the claim's tenant   18.2 names not injective
18.3 a shared deploy namespace shares everything          18.4 composed objects collide
18.5 remote keys checked as text only                     18.6 errors describe the filesystem
18.7 deploy.path escapes the resource                     25.1 images outside the allowlist
25.2 hash truncation collides                             25.3 composition keys drop objects
25.4 tenants whose names prefix each other                25.5 adopt reaches another team
25.6 remote keys: control characters and look-alikes
30.1 composition keys collide on long names              30.2 an observed key taken as ownership
30.3 reserved names off with a shared deploy namespace    30.4 tenant patterns that are ambiguous
30.5 XR identity from labels
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from crossplane.function import logging as sdklogging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support import example_component
from support.invariants import Ledger, check_render, key_of
from support.settle import settle

from function.cache import Cache
from function.edge.fn import FunctionRunner
from function.edge.render import Rendered, claim_to_xr, render
from function.edge.sources import SourceFactory

REPO = Path(__file__).resolve().parents[1]
CTF = REPO / "examples/component/ctf"
# examples/component/make-component.py rebuilds the CTF (and its digests) when its inputs change
DESCRIPTOR_BLOB = example_component.version().descriptor
IMAGE_DIGEST = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
REPOSITORY = "oci::http://127.0.0.1:5000/source"
TENANT_LABEL = "sack8s.io/tenant"
LEDGER = Ledger()  # every successful render of this module: no object claimed by two claims


@pytest.fixture(autouse=True)
def _quiet():
    sdklogging.configure(sdklogging.Level.DISABLED)


# -- the world a row mutates --------------------------------------------------------------------


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(labels)},
    }


def composed_by(
    name: str, claim_ns: str, claim_name: str, tenant: str, owner: str = "someone-else"
) -> dict[str, Any]:
    """A Namespace as another claim composed it (its tenant, owner label and identity annotations)."""
    ns = namespace(
        name,
        **{
            TENANT_LABEL: tenant,
            "sack8s.io/owner": owner,
            "app.kubernetes.io/managed-by": "function-sack8s",
        },
    )
    ns["metadata"]["annotations"] = {
        "sack8s.io/claim-namespace": claim_ns,
        "sack8s.io/claim-name": claim_name,
    }
    return ns


@dataclass
class World:
    """One claim (as the team writes it), the ops policy, and what the cluster holds."""

    claim: dict[str, Any]
    policy: dict[str, Any]
    required: list[dict[str, Any]] = field(default_factory=list)
    observed: list[dict[str, Any]] = field(default_factory=list)
    tmp: Path | None = None

    @property
    def ns(self) -> str:
        return self.claim["metadata"]["namespace"]

    def spec(self) -> dict[str, Any]:
        return self.claim["spec"]

    def tenant(self, ns: str) -> None:
        """Move the claim to namespace ``ns`` (its tenant), keys and home namespace along."""
        old = self.ns
        text = (
            json.dumps(self.claim).replace(f"/{old}/", f"/{ns}/").replace(f'"{old}--', f'"{ns}--')
        )
        self.claim = json.loads(text)
        self.claim["metadata"]["namespace"] = ns
        self.required = [r for r in self.required if r["metadata"]["name"] != old] + [namespace(ns)]

    def target(self, name: str, mode: str = "create", *, replace: bool = True) -> None:
        entry = {"name": name, "mode": mode}
        if replace:
            self.spec()["namespaces"] = [entry]
        else:
            self.spec()["namespaces"].append(entry)

    def has(self, *docs: dict[str, Any]) -> None:
        self.required.extend(docs)

    def xr(self) -> dict[str, Any]:
        return (
            claim_to_xr(copy.deepcopy(self.claim))
            if self.claim["metadata"].get("namespace")
            else copy.deepcopy(self.claim)
        )

    def component(self, image: str) -> None:
        """Serve the example component from a directory whose image resource points at ``image``."""
        assert self.tmp is not None
        root = self.tmp / "component"
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        shutil.copytree(CTF / "blobs", root / "blobs")
        d = json.loads(DESCRIPTOR_BLOB.read_text())
        for r in d["component"]["resources"]:
            if r["name"] == "image":
                r["access"]["imageReference"] = image
        (root / "component-descriptor.json").write_text(json.dumps(d))
        self.policy["mirrors"] = [{"repository": REPOSITORY, "path": str(root)}]


def base_claim() -> dict[str, Any]:
    return {
        "apiVersion": "platform.example.org/v1alpha1",
        "kind": "SACK8sComponentVersion",
        "metadata": {"name": "podinfo", "namespace": "team-a"},
        "spec": {
            "component": {
                "name": "acme.org/sack8s/podinfo",
                "version": "6.2.0",
                "repository": REPOSITORY,
            },
            "deploy": {"resource": {"name": "chart"}},
            "namespaces": [{"name": "team-a--web", "mode": "create"}],
            "values": {"inline": {"replicas": 2}},
            "secrets": [
                {
                    "name": "db",
                    "storeRef": {"name": "vault"},
                    "data": [
                        {
                            "secretKey": "PASSWORD",
                            "remoteRef": {"key": "apps/team-a/db", "property": "password"},
                        }
                    ],
                }
            ],
            "credentials": {
                "pull": {
                    "storeRef": {"name": "vault"},
                    "remoteRef": {"key": "registries/team-a/pull"},
                },
                "repository": {
                    "storeRef": {"name": "vault"},
                    "remoteRef": {"key": "registries/team-a/ocm"},
                },
            },
        },
    }


def strict_policy() -> dict[str, Any]:
    """What ops write for a multi-tenant cluster; namespaces left at their (safe) defaults."""
    return {
        "apiVersion": "sack8s.fn.crossplane.io/v1beta1",
        "kind": "Policy",
        "namespaces": {"podSecurity": {"enforce": "baseline"}},
        "registries": [{"host": "127.0.0.1:5000", "plainHTTP": True}],
        "mirrors": [{"repository": REPOSITORY, "path": str(CTF)}],
        "secretStores": [
            {
                "name": "vault",
                "kind": "ClusterSecretStore",
                "remoteKeyPrefixes": ["apps/{claimNamespace}/", "registries/{claimNamespace}/"],
            }
        ],
        "rbac": {
            "allowedExtraRules": [
                {
                    "apiGroups": ["monitoring.coreos.com"],
                    "resources": ["servicemonitors"],
                    "verbs": ["get", "list", "watch"],
                }
            ]
        },
    }


def gate_open() -> list[dict[str, Any]]:
    """The OCM Component observed Ready at the resolved version, so Flux objects compose too."""
    return [
        {
            "apiVersion": "delivery.ocm.software/v1alpha1",
            "kind": "Component",
            "metadata": {
                "name": "observed",
                "annotations": {"crossplane.io/composition-resource-name": "ocm-component"},
            },
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Ready", "message": "Ready"}
                ],
                "component": {"version": "6.2.0"},
            },
        }
    ]


def world(tmp: Path | None = None) -> World:
    return World(base_claim(), strict_policy(), [namespace("team-a")], gate_open(), tmp)


KEY = "crossplane.io/composition-resource-name"


def run(w: World) -> Rendered:
    """What the claim composes once its reconciles settle: each render's objects are observed
    by the next (Namespaces first, then what goes into them, then Flux: compose/gates.py),
    on top of what the world holds. The first Fatal, or the last render."""
    runner = FunctionRunner(sources=SourceFactory(cache=Cache()), base_dir=REPO)

    def once(observed: list[dict[str, Any]]) -> Rendered:
        return asyncio.run(
            render(
                w.xr(),
                copy.deepcopy(w.policy),
                observed=observed,
                required=w.required,
                runner=runner,
            )
        )

    out = once(w.observed)
    for _ in range(6):
        if out.fatal is not None:
            return out
        seen = {o["metadata"]["annotations"][KEY]: o for o in w.observed}
        seen.update(
            {
                o["metadata"]["annotations"][KEY]: o
                for o in settle(out.resources, out.xr.get("status"))
            }
        )
        again = once(list(seen.values()))
        if [r["metadata"] for r in again.resources] == [r["metadata"] for r in out.resources]:
            return again
        out = again
    return out


def settled_observed(w: World) -> list[dict[str, Any]]:
    """The world's observed state plus everything the claim composes, settled (for renders
    through `sack8s render`, which run one reconcile)."""
    out = run(w)
    if out.fatal is not None:
        return list(w.observed)
    seen = {o["metadata"]["annotations"][KEY]: o for o in w.observed}
    seen.update(
        {o["metadata"]["annotations"][KEY]: o for o in settle(out.resources, out.xr.get("status"))}
    )
    return list(seen.values())


def one_fatal(out: Any, where: str, *parts: str) -> str:
    results = [(fnv1.Severity.Name(r.severity), r.reason, r.message) for r in out.results]
    fatals = [r for r in out.results if r.severity == fnv1.SEVERITY_FATAL]
    assert len(fatals) == 1 and len(out.results) == 1, results
    assert out.resources == [], "a Fatal returns no partial desired state"
    msg = fatals[0].message
    assert fatals[0].reason not in ("InternalError", ""), msg
    # The field itself or a field below it (spec.namespaces[0] covers spec.namespaces[0].name).
    assert msg.startswith(where) and msg[len(where) :][:1] in (":", " ", ".", "["), (
        f"the Fatal does not name {where!r}: {msg!r}"
    )
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    return msg


# -- expectations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fatal:
    where: str
    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ok:
    check: Callable[[World, Any], None] | None = None


@dataclass(frozen=True)
class Attack:
    cls: str
    id: str
    mutate: Callable[[World], None]
    expect: Fatal | Ok
    cli: bool = False


def fatal(where: str, *parts: str) -> Fatal:
    return Fatal(where, parts)


def objects(out: Any, kind: str) -> list[dict[str, Any]]:
    return [o for o in out.resources if o["kind"] == kind]


def pre_render(w: World) -> Any:
    """What the unmodified claim composes (to aim an attack at one of its derived names)."""
    out = run(w)
    assert out.fatal is None, out.fatal.message
    return out


def _secret(name: str, ns: str | None = None, key: str = "apps/team-a/db") -> dict[str, Any]:
    s: dict[str, Any] = {
        "name": name,
        "storeRef": {"name": "vault"},
        "data": [{"secretKey": "K", "remoteRef": {"key": key}}],
    }
    if ns:
        s["namespace"] = ns
    return s


def set_key(field_path: str, key: str) -> Callable[[World], None]:
    def apply(w: World) -> None:
        spec = w.spec()
        if field_path == "data":
            spec["secrets"][0]["data"][0]["remoteRef"]["key"] = key
        elif field_path == "dataFrom":
            spec["secrets"][0]["dataFrom"] = [{"key": key}]
        else:
            spec["credentials"][field_path]["remoteRef"]["key"] = key

    return apply


KEY_FIELDS = {
    "data": "spec.secrets[0].data[0].remoteRef.key",
    "dataFrom": "spec.secrets[0].dataFrom[0].key",
    "pull": "spec.credentials.pull.remoteRef.key",
    "repository": "spec.credentials.repository.remoteRef.key",
}


def seq(*steps: Callable[[World], None]) -> Callable[[World], None]:
    def apply(w: World) -> None:
        for s in steps:
            s(w)

    return apply


def target(name: str, mode: str = "create") -> Callable[[World], None]:
    return lambda w: w.target(name, mode)


def has(*docs: dict[str, Any]) -> Callable[[World], None]:
    return lambda w: w.has(*docs)


def adopt_allowed(w: World) -> None:
    w.policy["namespaces"]["allowAdopt"] = True


def tenant(ns: str) -> Callable[[World], None]:
    return lambda w: w.tenant(ns)


def shared(w: World) -> None:
    w.policy["deployNamespace"] = {"shared": "sack8s-shared"}


def kustomize(w: World) -> None:
    w.spec()["deploy"] = {"resource": {"name": "manifests-gz"}}


# -- row-specific checks (neutralised rather than refused) ----------------------------------------


def no_rights_in_shared(w: World, out: Any) -> None:
    for o in objects(out, "Role") + objects(out, "RoleBinding"):
        assert o["metadata"]["namespace"] != "sack8s-shared", o["metadata"]
    for hr in objects(out, "HelmRelease"):
        assert hr["spec"]["storageNamespace"] in {t["name"] for t in w.spec()["namespaces"]}
        role = next(
            r
            for r in objects(out, "Role")
            if r["metadata"]["namespace"] == hr["spec"]["storageNamespace"]
        )
        assert any("secrets" in r["resources"] for r in role["rules"]), (
            "Helm needs its release storage"
        )


def both_secrets(w: World, out: Any) -> None:
    es = objects(out, "ExternalSecret")
    wanted = {
        (s.get("namespace") or w.spec()["namespaces"][0]["name"], s["name"])
        for s in w.spec()["secrets"]
    }
    got = {(o["metadata"]["namespace"], o["spec"]["target"]["name"]) for o in es}
    assert wanted <= got, (wanted, got)


def pull_keyed_to(*hosts: str) -> Callable[[World, Any], None]:
    def check(w: World, out: Any) -> None:
        from support.invariants import template_hosts

        pulls = [
            o
            for o in objects(out, "ExternalSecret")
            if o["metadata"]["namespace"] != out.xr["status"]["deploy"]["namespace"]
            and (o["spec"]["target"].get("template") or {}).get("type")
            == "kubernetes.io/dockerconfigjson"
        ]
        assert pulls
        for o in pulls:
            assert template_hosts(
                o["spec"]["target"]["template"]["data"][".dockerconfigjson"]
            ) == set(hosts)

    return check


def deploy_namespace_of(w: World) -> str:
    return pre_render(w).xr["status"]["deploy"]["namespace"]


def squat_pull_secret(second_namespace: bool) -> Callable[[World], None]:
    def apply(w: World) -> None:
        out = pre_render(w)
        pull = next(
            o
            for o in objects(out, "ExternalSecret")
            if o["metadata"]["namespace"] == "team-a--web"
            and (o["spec"]["target"].get("template") or {}).get("type")
            == "kubernetes.io/dockerconfigjson"
        )
        name = pull["spec"]["target"]["name"]
        if second_namespace:
            w.target("team-a--api", replace=False)
            w.spec()["secrets"].append(_secret(name, "team-a--api"))
            w.spec()["secrets"] = w.spec()["secrets"][1:]
        else:
            w.spec()["secrets"] = [_secret(name)]

    return apply


def collide_deploy_namespace(w: World) -> None:
    """A namespace with this claim's deploy namespace name already exists, composed for another
    claim whose name hashed the same (the collision is simulated by copying the owner label)."""
    out = pre_render(w)
    dns = next(
        o
        for o in objects(out, "Namespace")
        if o["metadata"]["name"] == out.xr["status"]["deploy"]["namespace"]
    )
    owner = dns["metadata"]["labels"]["sack8s.io/owner"]
    fake = namespace(dns["metadata"]["name"], **dns["metadata"]["labels"])
    fake["metadata"]["annotations"] = {
        "sack8s.io/claim-namespace": "team-b",
        "sack8s.io/claim-name": "podinfo",
    }
    fake["metadata"]["labels"]["sack8s.io/owner"] = owner
    w.has(fake)


def collide_target_owner(w: World) -> None:
    """``team-a--web`` exists with this claim's owner label but another claim's identity."""
    out = pre_render(w)
    owner = objects(out, "Namespace")[0]["metadata"]["labels"]["sack8s.io/owner"]
    w.has(composed_by("team-a--web", "team-a", "podinfo-other", "team-a", owner=owner))


def set_repository(ref: str) -> Callable[[World], None]:
    return lambda w: w.spec()["component"].__setitem__("repository", ref)


def set_path(path: str) -> Callable[[World], None]:
    return lambda w: w.spec()["deploy"].__setitem__("path", path)


def component(image: str) -> Callable[[World], None]:
    return lambda w: w.component(image)


def image_registries(*entries: dict[str, Any]) -> Callable[[World], None]:
    def apply(w: World) -> None:
        w.policy["imageRegistries"] = list(entries)

    return apply


# -- issue 30: composition keys, proven ownership, patterns, XR identity ---------------------------


def legacy_collision(prefix: str, length: int = 63) -> tuple[str, str]:
    """Two target names of ``length`` characters starting with ``prefix`` whose Namespace keys
    collided before issue 30: a birthday search with the product's own old key function
    (``names.legacy_key``, 32 bits), well under a second."""
    from function.compose import names

    room = length - len(prefix)
    seen: dict[str, str] = {}
    for i in range(1 << 22):
        name = prefix + format(i, "x").rjust(room, "0")
        key = names.legacy_key("namespace", name)
        if key in seen:
            return seen[key], name
        seen[key] = name
    raise AssertionError("no collision in 2^22 names: the search is broken")


def collision_search(key_of: Callable[[str], str], names_: list[str]) -> tuple[str, str] | None:
    seen: dict[str, str] = {}
    for n in names_:
        k = key_of(n)
        if k in seen and seen[k] != n:
            return seen[k], n
        seen[k] = n
    return None


@functools.cache
def long_pair() -> tuple[str, str]:
    return legacy_collision("team-a--" + "x" * 36)


def hashed_key_as_secret(long_name: str, ns: str = "team-a--web") -> str:
    """A secret name whose joined key is exactly the hashed key of secret ``long_name`` (the
    pre-issue-30 ``names.key`` gave both one key: the second ExternalSecret replaced the first)."""
    from function.compose import externalsecrets

    k = externalsecrets.key_service(ns, long_name)
    head = f"externalsecret.{ns}."
    assert len(k) == 253 and k.startswith(head), k
    return k[len(head) :]


def legacy_key_as_target(name: str) -> str:
    """The 53-character target whose key ``namespace-<it>`` is the old cut key of ``name``."""
    from function.compose import names

    return names.legacy_key("namespace", name)[len("namespace-") :]


def two_colliding_targets(w: World) -> None:
    a, b = long_pair()
    w.target(a)
    w.target(b, replace=False)


def own_namespace(w: World, name: str, key: str | None = None) -> dict[str, Any]:
    """A Namespace carrying this claim's ownership marks (as the function composed one)."""
    out = pre_render(w)
    ns = copy.deepcopy(objects(out, "Namespace")[-1])
    assert ns["metadata"]["name"] == w.spec()["namespaces"][-1]["name"]
    ns["metadata"]["name"] = name
    ns["metadata"]["annotations"][KEY] = key or f"namespace-{name}"
    ns["metadata"]["labels"][TENANT_LABEL] = w.ns
    return ns


def switch_to_siblings_colliding_name(w: World) -> None:
    """The claim settled on long name A (composed under its pre-issue-30 key K); it now asks
    for B, whose old key is K too and which a sibling claim of the same tenant created."""
    from function.compose import names

    a, b = long_pair()
    w.target(a)
    mine = own_namespace(w, a, names.legacy_key("namespace", a))
    w.observed.append(mine)
    w.has(copy.deepcopy(mine), composed_by(b, "team-a", "sibling", "team-a"))
    w.target(b)


def legacy_key_meets_fresh_key(w: World) -> None:
    """Long target A still observed under its old key K (kept: a changed key deletes it); the
    claim adds B, the 53-character name whose own key is K. Neither may replace the other."""
    from function.compose import names

    a = long_pair()[0]
    w.target(a)
    mine = own_namespace(w, a, names.legacy_key("namespace", a))
    w.observed.append(mine)
    w.has(copy.deepcopy(mine))
    w.target(legacy_key_as_target(a), replace=False)


def observed_under_key(name: str, obj_name: str, *, mine: bool) -> Callable[[World], None]:
    """Plant under ``namespace-<name>`` an observed Namespace ``obj_name``: this claim's marks
    (``mine``) or another claim's."""

    def apply(w: World) -> None:
        if mine:
            obj = own_namespace(w, obj_name, f"namespace-{name}")
        else:
            obj = composed_by(obj_name, "team-b", "app", "team-b")
            obj["metadata"]["annotations"][KEY] = f"namespace-{name}"
        w.observed.append(obj)
        w.target(name)

    return apply


def upgrade_outside_pattern(w: World) -> None:
    """Control: a Namespace an earlier release created for this claim under older rules (not in
    the tenant pattern), observed under its key with the claim's marks, stays the claim's."""
    mine = own_namespace(w, "payments-legacy")
    w.observed.append(mine)
    w.has(copy.deepcopy(mine))
    w.target("payments-legacy")


def tenant_pattern(pattern: str, *, accept: bool = False) -> Callable[[World], None]:
    def apply(w: World) -> None:
        w.policy["namespaces"]["tenantPattern"] = pattern
        if accept:
            w.policy["namespaces"]["acceptAmbiguousPattern"] = True

    return apply


def allow_pattern(pattern: str) -> Callable[[World], None]:
    return lambda w: w.policy["namespaces"].__setitem__("allowPattern", pattern)


def warned(*parts: str) -> Callable[[World, Any], None]:
    def check(w: World, out: Any) -> None:
        messages = [x["message"] for x in out.xr["status"].get("warnings") or []]
        assert any(all(p in m for p in parts) for m in messages), messages

    return check


def claimless(name: str, **labels: str) -> Callable[[World], None]:
    """The world's claim as an XR without a claim (ops-created), named ``name``, with labels;
    its tenant is its ``sack8s.io/tenant`` label or its own name."""

    def apply(w: World) -> None:
        tenant_ = labels.get(TENANT_LABEL, name)
        text = json.dumps(w.claim).replace("team-a", tenant_)
        w.claim = json.loads(text)
        w.claim["metadata"] = {"name": name, "labels": dict(labels)}
        w.required = [r for r in w.required if r["metadata"]["name"] != "team-a"]
        w.target(f"{tenant_}--web")

    return apply


def identity_is_the_xr(name: str) -> Callable[[World, Any], None]:
    def check(w: World, out: Any) -> None:
        for o in out.resources:
            ann = o["metadata"]["annotations"]
            assert ann["sack8s.io/claim-name"] == name and "sack8s.io/claim-namespace" not in ann

    return check


IMG = f"podinfo:6.2.0@{IMAGE_DIGEST}"


ATTACKS: list[Attack] = [
    # ---- positive controls: the legitimate shapes the attacks are variants of
    Attack("control", "create-in-tenant-space", lambda w: None, Ok(), cli=True),
    Attack("control", "existing-home", target("team-a", "existing"), Ok()),
    Attack(
        "control",
        "existing-labelled-by-ops",
        seq(target("payments", "existing"), has(namespace("payments", **{TENANT_LABEL: "team-a"}))),
        Ok(),
    ),
    Attack("control", "kustomize", kustomize, Ok()),
    Attack(
        "control",
        "extra-rules-allowed",
        lambda w: w.spec().__setitem__(
            "rbac",
            {
                "extraRules": [
                    {
                        "apiGroups": ["monitoring.coreos.com"],
                        "resources": ["servicemonitors"],
                        "verbs": ["get"],
                    }
                ]
            },
        ),
        Ok(),
    ),
    # ---- 18.1 target namespaces not tied to the claim's tenant
    Attack(
        "18.1",
        "existing-other-team",
        seq(target("team-b", "existing"), has(namespace("team-b"))),
        fatal("spec.namespaces[0]", "team-b"),
        cli=True,
    ),
    Attack(
        "18.1",
        "existing-labelled-other-tenant",
        seq(target("payments", "existing"), has(namespace("payments", **{TENANT_LABEL: "team-b"}))),
        fatal("spec.namespaces[0]", "payments"),
    ),
    Attack(
        "18.1",
        "existing-created-by-other-claim",
        seq(
            target("team-b--web", "existing"),
            has(composed_by("team-b--web", "team-b", "web", "team-b")),
        ),
        fatal("spec.namespaces[0]", "team-b--web"),
    ),
    Attack(
        "18.1",
        "existing-other-claims-deploy-namespace",
        seq(
            target("sack8s-team-b-web", "existing"),
            has(namespace("sack8s-team-b-web", **{"sack8s.io/deploy-namespace": "true"})),
        ),
        fatal("spec.namespaces[0]", "sack8s-team-b-web"),
    ),
    Attack(
        "18.1",
        "create-squats-future-deploy-namespace",
        target("sack8s-team-b-web"),
        fatal("spec.namespaces[0]", "sack8s-team-b-web"),
    ),
    Attack(
        "18.1", "create-other-team-home", target("team-b"), fatal("spec.namespaces[0]", "team-b")
    ),
    Attack(
        "18.1",
        "existing-unlabelled-lookalike",
        seq(target("team-a--old", "existing"), has(namespace("team-a--old"))),
        fatal("spec.namespaces[0]", "team-a--old"),
    ),
    Attack(
        "18.1",
        "existing-system",
        seq(target("kube-system", "existing"), has(namespace("kube-system"))),
        fatal("spec.namespaces[0]", "kube-system"),
    ),
    Attack("18.1", "create-own-home", target("team-a"), fatal("spec.namespaces[0]", "team-a")),
    Attack(
        "18.1",
        "second-target-foreign",
        seq(lambda w: w.target("team-b", "existing", replace=False), has(namespace("team-b"))),
        fatal("spec.namespaces[1]", "team-b"),
    ),
    Attack(
        "18.1",
        "shared-deploy-namespace-as-target",
        seq(shared, target("sack8s-shared", "existing"), has(namespace("sack8s-shared"))),
        fatal("spec.namespaces[0]", "sack8s-shared"),
    ),
    Attack(
        "18.1",
        "secret-outside-targets",
        lambda w: w.spec().__setitem__("secrets", [_secret("x", "team-b")]),
        fatal("spec.secrets[0].namespace", "team-b"),
    ),
    # ---- 18.2 names not injective: ownership compares the full identity
    Attack(
        "18.2",
        "create-owned-by-sibling-claim",
        has(composed_by("team-a--web", "team-a", "podinfo-2", "team-a")),
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    Attack(
        "18.2",
        "create-owned-by-prefix-twin",
        seq(
            tenant("team"),
            target("team--web"),
            has(composed_by("team--web", "team", "a-podinfo", "team")),
        ),
        fatal("spec.namespaces[0]", "team--web"),
    ),
    Attack(
        "18.2",
        "create-owned-by-dotted-twin",
        has(composed_by("team-a--web", "team-a", "podinfo.x", "team-a")),
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    Attack(
        "18.2",
        "create-old-style-owner-label",
        has(namespace("team-a--web", **{"sack8s.io/owner": "team-a-podinfo"})),
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    # ---- 18.3 a shared deploy namespace shares everything: neutralised (no rights in it)
    Attack("18.3", "shared-helm", shared, Ok(no_rights_in_shared), cli=True),
    Attack("18.3", "shared-kustomize", seq(shared, kustomize), Ok(no_rights_in_shared)),
    Attack(
        "18.3",
        "shared-helm-existing-home",
        seq(shared, target("team-a", "existing")),
        Ok(no_rights_in_shared),
    ),
    Attack(
        "18.3",
        "shared-helm-no-secret-rights-policy",
        seq(
            shared,
            lambda w: w.policy["rbac"].__setitem__(
                "deployerRules",
                [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "create"]}],
            ),
        ),
        Ok(no_rights_in_shared),
    ),
    # ---- 18.4 composed objects collide
    Attack(
        "18.4",
        "service-secret-named-like-pull-secret",
        squat_pull_secret(False),
        fatal("spec.secrets[0].name"),
        cli=True,
    ),
    Attack(
        "18.4",
        "service-secret-named-like-pull-secret-second-namespace",
        squat_pull_secret(True),
        fatal("spec.secrets[0].name"),
    ),
    Attack(
        "18.4",
        "service-secret-named-like-helm-release-state",
        lambda w: w.spec().__setitem__("secrets", [_secret("sh.helm.release.v1.podinfo.v1")]),
        fatal("spec.secrets[0].name", "sh.helm.release.v1."),
    ),
    Attack(
        "18.4",
        "same-secret-twice",
        lambda w: w.spec().__setitem__("secrets", [_secret("db"), _secret("db")]),
        fatal("spec.secrets[1].name", "twice"),
    ),
    Attack(
        "18.4",
        "same-secret-name-two-namespaces",
        seq(
            lambda w: w.target("team-a--api", replace=False),
            lambda w: w.spec().__setitem__(
                "secrets", [_secret("db"), _secret("db", "team-a--api")]
            ),
        ),
        Ok(both_secrets),
    ),
    # ---- 18.5 remote keys checked as text only
    Attack(
        "18.5",
        "percent-dotdot",
        set_key("data", "apps/team-a/%2e%2e/team-b/db"),
        fatal(KEY_FIELDS["data"]),
        cli=True,
    ),
    Attack(
        "18.5",
        "percent-upper-slash",
        set_key("data", "apps/team-a/%2E%2E%2Fteam-b%2Fdb"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack(
        "18.5",
        "backslash",
        set_key("data", "apps/team-a/..\\team-b\\db"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack("18.5", "dot-segment", set_key("data", "apps/team-a/./db"), fatal(KEY_FIELDS["data"])),
    Attack("18.5", "empty-segment", set_key("data", "apps/team-a//db"), fatal(KEY_FIELDS["data"])),
    Attack("18.5", "leading-slash", set_key("data", "/apps/team-a/db"), fatal(KEY_FIELDS["data"])),
    Attack("18.5", "trailing-dotdot", set_key("data", "apps/team-a/.."), fatal(KEY_FIELDS["data"])),
    Attack(
        "18.5",
        "prefix-without-slash-fooled",
        seq(
            lambda w: w.policy["secretStores"][0].__setitem__(
                "remoteKeyPrefixes", ["apps/{claimNamespace}", "registries/{claimNamespace}/"]
            ),
            set_key("data", "apps/team-ab/db"),
        ),
        fatal(KEY_FIELDS["data"], "apps/team-ab/db"),
    ),
    Attack(
        "18.5",
        "dataFrom-percent",
        set_key("dataFrom", "apps/team-a/%2e%2e/team-b"),
        fatal(KEY_FIELDS["dataFrom"]),
    ),
    Attack(
        "18.5",
        "pull-percent",
        set_key("pull", "registries/team-a/%2e%2e/team-b/pull"),
        fatal(KEY_FIELDS["pull"]),
    ),
    Attack(
        "18.5",
        "repository-backslash",
        set_key("repository", "registries/team-a\\..\\team-b\\ocm"),
        fatal(KEY_FIELDS["repository"]),
    ),
    Attack("18.5", "control-allowed-key", set_key("data", "apps/team-a/db_v2.prod@eu=1+x"), Ok()),
    # ---- 18.6 errors describe the function's filesystem: one message, no path looked at
    *[
        Attack(
            "18.6",
            f"non-oci-{i}",
            set_repository(ref),
            fatal("spec.component.repository", "OCI registry"),
            cli=(i == 0),
        )
        for i, ref in enumerate(
            [
                "ctf::/etc",
                "/etc",
                "./examples/component/ctf",
                "ctf::examples/component/ctf",
                "../shared",
                "file:///etc/passwd",
                "CommonTransportFormat::/tmp",
                "examples/component/ctf",
                "dir::/tmp",
                "~/ctf",
            ]
        )
    ],
    # ---- 18.7 deploy.path escapes the resource
    *[
        Attack(
            "18.7",
            f"path-{i}",
            seq(kustomize, set_path(p)),
            fatal("spec.deploy.path"),
            cli=(i == 0),
        )
        for i, p in enumerate(
            ["../../..", "/etc", "./a/../../b", "a\\..\\b", "a\x00b", "./..", "a/\n/b"]
        )
    ],
    Attack(
        "18.7",
        "path-inside",
        seq(kustomize, lambda w: w.spec()["deploy"].__setitem__("path", "./")),
        Ok(),
    ),
    # ---- 25.1 images outside the allowlist, and credentials keyed to them
    Attack(
        "25.1",
        "image-public-host",
        component(f"ghcr.io/evil/podinfo:6.2.0@{IMAGE_DIGEST}"),
        fatal("component acme.org/sack8s/podinfo:6.2.0 resource image", "ghcr.io"),
        cli=True,
    ),
    Attack(
        "25.1",
        "image-link-local",
        component(f"169.254.169.254/podinfo:6.2.0@{IMAGE_DIGEST}"),
        fatal("component acme.org/sack8s/podinfo:6.2.0 resource image", "169.254.169.254"),
    ),
    Attack(
        "25.1",
        "image-docker-hub-short-name",
        component(IMG),
        fatal("component acme.org/sack8s/podinfo:6.2.0 resource image", "docker.io"),
    ),
    Attack(
        "25.1",
        "image-docker-hub",
        component(f"docker.io/library/podinfo:6.2.0@{IMAGE_DIGEST}"),
        fatal("component acme.org/sack8s/podinfo:6.2.0 resource image", "docker.io"),
    ),
    Attack(
        "25.1",
        "image-other-port",
        component(f"127.0.0.1:5001/upstream/podinfo:6.2.0@{IMAGE_DIGEST}"),
        fatal("component acme.org/sack8s/podinfo:6.2.0 resource image", "127.0.0.1:5001"),
    ),
    Attack(
        "25.1",
        "image-ipv6-link-local",
        component(f"[fe80::1]:5000/podinfo:6.2.0@{IMAGE_DIGEST}"),
        fatal("component acme.org/sack8s/podinfo:6.2.0 resource image", "[fe80::1]:5000"),
    ),
    Attack(
        "25.1",
        "image-allowed-without-credential",
        seq(
            image_registries({"host": "127.0.0.1:5000"}),
        ),
        fatal("spec.credentials.pull"),
    ),
    Attack(
        "25.1",
        "image-public-allowed-credential-not-sent",
        seq(
            component(f"ghcr.io/acme/podinfo:6.2.0@{IMAGE_DIGEST}"),
            image_registries(
                {"host": "127.0.0.1:5000", "pullCredential": True}, {"host": "ghcr.io"}
            ),
        ),
        Ok(pull_keyed_to("127.0.0.1:5000")),
    ),
    Attack(
        "25.1",
        "image-dockerconfigjson-filtered",
        lambda w: w.spec()["credentials"]["pull"].__setitem__("format", "dockerConfigJson"),
        Ok(pull_keyed_to("127.0.0.1:5000")),
    ),
    # ---- 25.2 hash truncation collides: a collision is refused, never shared
    Attack("25.2", "deploy-namespace-collision", collide_deploy_namespace, fatal("metadata.name")),
    Attack(
        "25.2",
        "target-owner-label-collision",
        collide_target_owner,
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    Attack(
        "25.2",
        "adopt-owner-label-collision",
        seq(adopt_allowed, target("team-a--web", "adopt"), collide_target_owner),
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    # ---- 25.3 composition keys collide and drop objects: all composed, all distinct
    Attack(
        "25.3",
        "target-named-deploy",
        seq(target("deploy", "existing"), has(namespace("deploy", **{TENANT_LABEL: "team-a"}))),
        Ok(),
        cli=True,
    ),
    Attack(
        "25.3",
        "target-named-pull",
        seq(
            lambda w: w.target("pull", "existing", replace=False),
            has(namespace("pull", **{TENANT_LABEL: "team-a"})),
            lambda w: w.spec().__setitem__("secrets", [_secret("team-a--web", "pull")]),
        ),
        Ok(both_secrets),
    ),
    Attack(
        "25.3",
        "namespace-and-secret-join",
        seq(
            target("a", "existing"),
            lambda w: w.target("a-b", "existing", replace=False),
            has(
                namespace("a", **{TENANT_LABEL: "team-a"}),
                namespace("a-b", **{TENANT_LABEL: "team-a"}),
            ),
            lambda w: w.spec().__setitem__("secrets", [_secret("b-c", "a"), _secret("c", "a-b")]),
        ),
        Ok(both_secrets),
    ),
    Attack(
        "25.3",
        "dotted-and-dashed-secret",
        lambda w: w.spec().__setitem__("secrets", [_secret("x.y"), _secret("x-y")]),
        Ok(both_secrets),
    ),
    Attack(
        "25.3",
        "target-named-repository",
        seq(
            target("repository", "existing"),
            has(namespace("repository", **{TENANT_LABEL: "team-a"})),
        ),
        Ok(),
    ),
    Attack(
        "25.3",
        "long-targets-sharing-a-prefix",
        seq(
            target("team-a--" + "x" * 54 + "1"),
            lambda w: w.target("team-a--" + "x" * 54 + "2", replace=False),
        ),
        Ok(),
    ),
    # ---- 25.4 tenants whose names prefix each other
    Attack(
        "25.4",
        "team-creates-team-a",
        seq(tenant("team"), target("team-a")),
        fatal("spec.namespaces[0]", "team-a"),
    ),
    Attack(
        "25.4",
        "team-creates-team-b-web",
        seq(tenant("team"), target("team-b-web")),
        fatal("spec.namespaces[0]", "team-b-web"),
    ),
    Attack(
        "25.4",
        "team-a-creates-team-a-b",
        target("team-a-b"),
        fatal("spec.namespaces[0]", "team-a-b"),
        cli=True,
    ),
    Attack(
        "25.4",
        "team-existing-team-a",
        seq(tenant("team"), target("team-a", "existing"), has(namespace("team-a"))),
        fatal("spec.namespaces[0]", "team-a"),
    ),
    Attack(
        "25.4",
        "team-a-creates-team--a-x",
        target("team--a-x"),
        fatal("spec.namespaces[0]", "team--a-x"),
    ),
    Attack(
        "25.4",
        "team-existing-team-a-labelled",
        seq(
            tenant("team"),
            target("team-a--web", "existing"),
            has(namespace("team-a--web", **{TENANT_LABEL: "team-a"})),
        ),
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    Attack(
        "25.4",
        "team-adopts-team-a",
        seq(tenant("team"), adopt_allowed, target("team-a", "adopt"), has(namespace("team-a"))),
        fatal("spec.namespaces[0]", "team-a"),
    ),
    Attack(
        "25.4",
        "team-key-under-team-a",
        seq(
            tenant("team"),
            lambda w: w.policy["secretStores"][0].__setitem__(
                "remoteKeyPrefixes", ["apps/{claimNamespace}", "registries/{claimNamespace}"]
            ),
            set_key("data", "apps/team-a/db"),
        ),
        fatal(KEY_FIELDS["data"], "apps/team-a/db"),
    ),
    Attack("25.4", "team-creates-team--web", seq(tenant("team"), target("team--web")), Ok()),
    Attack(
        "25.4",
        "team-a-existing-team-a-b-labelled-own",
        seq(
            target("team-a-b", "existing"), has(namespace("team-a-b", **{TENANT_LABEL: "team-a-b"}))
        ),
        fatal("spec.namespaces[0]", "team-a-b"),
    ),
    # ---- 25.5 allowAdopt adopts another team's namespace
    Attack(
        "25.5",
        "adopt-other-team",
        seq(adopt_allowed, target("team-b", "adopt"), has(namespace("team-b"))),
        fatal("spec.namespaces[0]", "team-b"),
        cli=True,
    ),
    Attack(
        "25.5",
        "adopt-labelled-other-tenant",
        seq(
            adopt_allowed,
            target("payments", "adopt"),
            has(namespace("payments", **{TENANT_LABEL: "team-b"})),
        ),
        fatal("spec.namespaces[0]", "payments"),
    ),
    Attack(
        "25.5",
        "adopt-sibling-claims-namespace",
        seq(
            adopt_allowed,
            target("team-a--web", "adopt"),
            has(composed_by("team-a--web", "team-a", "other", "team-a")),
        ),
        fatal("spec.namespaces[0]", "team-a--web"),
    ),
    Attack(
        "25.5",
        "adopt-own-home",
        seq(adopt_allowed, target("team-a", "adopt")),
        fatal("spec.namespaces[0]", "team-a"),
    ),
    Attack(
        "25.5",
        "adopt-unlabelled-absent-other-team-space",
        seq(adopt_allowed, target("team-b--new", "adopt")),
        fatal("spec.namespaces[0]", "team-b--new"),
    ),
    Attack(
        "25.5",
        "adopt-deploy-namespace-of-other-claim",
        seq(
            adopt_allowed,
            target("sack8s-team-b-x", "adopt"),
            has(
                namespace(
                    "sack8s-team-b-x",
                    **{"sack8s.io/deploy-namespace": "true", TENANT_LABEL: "team-a"},
                )
            ),
        ),
        fatal("spec.namespaces[0]", "sack8s-team-b-x"),
    ),
    Attack(
        "25.5",
        "adopt-labelled-own-tenant",
        seq(
            adopt_allowed,
            target("payments", "adopt"),
            has(namespace("payments", **{TENANT_LABEL: "team-a"})),
        ),
        Ok(),
    ),
    Attack(
        "25.5", "adopt-absent-own-space", seq(adopt_allowed, target("team-a--new", "adopt")), Ok()
    ),
    # ---- 30.1 composition keys: long names whose old keys collided, keys that meet hashed keys
    Attack("30.1", "legacy-colliding-long-targets", two_colliding_targets, Ok(), cli=True),
    Attack(
        "30.1",
        "legacy-colliding-long-targets-adopt",
        seq(
            adopt_allowed,
            two_colliding_targets,
            lambda w: w.spec()["namespaces"][0].__setitem__("mode", "adopt"),
        ),
        Ok(),
    ),
    Attack(
        "30.1",
        "secret-named-after-a-hashed-key",
        lambda w: w.spec().__setitem__(
            "secrets", [_secret("s" * 240), _secret(hashed_key_as_secret("s" * 240))]
        ),
        Ok(both_secrets),
    ),
    Attack(
        "30.1",
        "long-target-and-its-legacy-key-name",
        seq(
            lambda w: w.target(long_pair()[0]),
            lambda w: w.target(legacy_key_as_target(long_pair()[0]), replace=False),
        ),
        Ok(),
    ),
    Attack(
        "30.1",
        "kept-legacy-key-meets-fresh-key",
        legacy_key_meets_fresh_key,
        fatal("spec.namespaces[1]", "spec.namespaces[0]", "composition-resource key"),
    ),
    # ---- 30.2 an observed key is no proof of ownership
    Attack(
        "30.2",
        "switch-to-siblings-colliding-name",
        switch_to_siblings_colliding_name,
        fatal("spec.namespaces[0]", "not owned by this claim"),
    ),
    Attack(
        "30.2",
        "observed-key-holds-other-claims-namespace",
        observed_under_key("team-b--x", "team-b--x", mine=False),
        fatal("spec.namespaces[0]", "team-b--x"),
    ),
    Attack(
        "30.2",
        "observed-key-holds-another-name",
        observed_under_key("team-b--y", "team-a--web", mine=True),
        fatal("spec.namespaces[0]", "team-b--y"),
    ),
    Attack(
        "30.2",
        "observed-key-other-claim-live-other-claim",
        seq(
            observed_under_key("payments", "payments", mine=False),
            has(composed_by("payments", "team-b", "app", "team-b")),
        ),
        fatal("spec.namespaces[0]", "payments"),
    ),
    Attack("30.2", "control-upgrade-outside-pattern", upgrade_outside_pattern, Ok()),
    # ---- 30.3 reserved deploy-namespace names in every mode; deploy.path as documented
    Attack(
        "30.3",
        "shared-create-reserved-name",
        seq(shared, target("sack8s-team-b-x")),
        fatal("spec.namespaces[0].name", "reserved"),
        cli=True,
    ),
    Attack(
        "30.3",
        "shared-existing-reserved-name",
        seq(
            shared,
            target("sack8s-team-b-y", "existing"),
            has(namespace("sack8s-team-b-y", **{TENANT_LABEL: "team-a"})),
        ),
        fatal("spec.namespaces[0].name", "reserved"),
    ),
    Attack(
        "30.3",
        "shared-adopt-reserved-name",
        seq(shared, adopt_allowed, target("sack8s-team-b-z", "adopt")),
        fatal("spec.namespaces[0].name", "reserved"),
    ),
    Attack("30.3", "path-root", seq(kustomize, set_path("/")), fatal("spec.deploy.path")),
    Attack("30.3", "path-root-twice", seq(kustomize, set_path("//")), fatal("spec.deploy.path")),
    Attack("30.3", "path-absolute-dir", seq(kustomize, set_path("/x/")), fatal("spec.deploy.path")),
    # ---- 30.4 tenant and allow patterns that give one name two tenants
    Attack(
        "30.4",
        "single-hyphen-tenant-pattern",
        tenant_pattern("^{claimNamespace}(-[a-z0-9]+)*$"),
        fatal("namespaces.tenantPattern", "separator", "acceptAmbiguousPattern"),
        cli=True,
    ),
    Attack(
        "30.4",
        "unanchored-tenant-pattern",
        tenant_pattern(".*{claimNamespace}--[a-z0-9]+$"),
        fatal("namespaces.tenantPattern", "does not start with {claimNamespace}"),
    ),
    Attack(
        "30.4",
        "alternation-escapes-the-anchor",
        tenant_pattern("^{claimNamespace}--[a-z0-9]+$|^shared-[a-z0-9]+$"),
        fatal("namespaces.tenantPattern"),
    ),
    Attack(
        "30.4",
        "no-tenant-in-pattern",
        tenant_pattern("^apps-[a-z0-9]+$"),
        fatal("namespaces.tenantPattern", "does not contain {claimNamespace}"),
    ),
    Attack(
        "30.4",
        "optional-separator",
        tenant_pattern("^{claimNamespace}-?-?[a-z0-9]+$"),
        fatal("namespaces.tenantPattern", "separator"),
    ),
    Attack(
        "30.4",
        "ambiguous-allow-pattern",
        allow_pattern("^[a-z0-9-]*{claimNamespace}[a-z0-9-]*$"),
        fatal("namespaces.allowPattern"),
    ),
    Attack(
        "30.4",
        "tenant-containing-the-separator",
        seq(tenant("team--b"), target("team--b--web")),
        fatal("spec.namespaces[0].name", "separator", "mode existing"),
    ),
    Attack(
        "30.4",
        "control-tenant-with-separator-uses-labelled",
        seq(
            tenant("team--b"),
            target("payments", "existing"),
            has(namespace("payments", **{TENANT_LABEL: "team--b"})),
        ),
        Ok(),
    ),
    Attack(
        "30.4",
        "control-ambiguous-pattern-accepted-warns",
        seq(tenant_pattern("^{claimNamespace}(-[a-z0-9]+)*$", accept=True), target("team-a-web")),
        Ok(warned("namespaces.tenantPattern", "acceptAmbiguousPattern")),
    ),
    Attack(
        "30.4",
        "control-custom-unambiguous-pattern",
        tenant_pattern("{claimNamespace}--[a-z]+(-[a-z]+)*"),
        Ok(),
    ),
    # ---- 30.5 XR identity only from spec.claimRef or the XR itself
    Attack(
        "30.5",
        "claim-labels-without-claimref",
        seq(
            claimless(
                "ops-svc",
                **{
                    "crossplane.io/claim-name": "podinfo",
                    "crossplane.io/claim-namespace": "team-b",
                },
            ),
        ),
        Ok(identity_is_the_xr("ops-svc")),
    ),
    Attack(
        "30.5",
        "tenant-label-namespace-missing",
        claimless("ops-svc", **{TENANT_LABEL: "team-c"}),
        fatal("metadata.labels[sack8s.io/tenant]", "does not exist"),
    ),
    Attack(
        "30.5",
        "tenant-label-names-a-deploy-namespace",
        seq(
            claimless("ops-svc", **{TENANT_LABEL: "team-c"}),
            has(namespace("team-c", **{"sack8s.io/deploy-namespace": "true"})),
        ),
        fatal("metadata.labels[sack8s.io/tenant]", "deploy namespace"),
    ),
    Attack(
        "30.5",
        "tenant-label-names-another-tenants-namespace",
        seq(
            claimless("ops-svc", **{TENANT_LABEL: "team-c"}),
            has(namespace("team-c", **{TENANT_LABEL: "team-b"})),
        ),
        fatal("metadata.labels[sack8s.io/tenant]", "team-b"),
    ),
    Attack(
        "30.5",
        "control-tenant-label-existing-namespace",
        seq(claimless("ops-svc", **{TENANT_LABEL: "team-c"}), has(namespace("team-c"))),
        Ok(identity_is_the_xr("ops-svc")),
    ),
    # ---- 25.6 remote keys: control characters and Unicode look-alikes of '.' and '/'
    Attack(
        "25.6",
        "nul",
        set_key("data", "apps/team-a/\x00../team-b/db"),
        fatal(KEY_FIELDS["data"]),
        cli=True,
    ),
    Attack(
        "25.6",
        "newline",
        set_key("data", "apps/team-a/db\n../team-b/db"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack("25.6", "tab", set_key("data", "apps/team-a/\t../team-b/db"), fatal(KEY_FIELDS["data"])),
    Attack(
        "25.6",
        "fullwidth-full-stop",
        set_key("data", "apps/team-a/\uff0e\uff0e/team-b/db"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack(
        "25.6",
        "fullwidth-solidus",
        set_key("data", "apps/team-a/..\uff0fteam-b\uff0fdb"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack(
        "25.6",
        "division-slash",
        set_key("data", "apps/team-a/..\u2215team-b\u2215db"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack(
        "25.6",
        "one-dot-leader",
        set_key("data", "apps/team-a/\u2024\u2024/team-b/db"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack(
        "25.6",
        "small-full-stop",
        set_key("data", "apps/team-a/\ufe52\ufe52/team-b/db"),
        fatal(KEY_FIELDS["data"]),
    ),
    Attack(
        "25.6",
        "dataFrom-fullwidth",
        set_key("dataFrom", "apps/team-a/\uff0e\uff0e/team-b"),
        fatal(KEY_FIELDS["dataFrom"]),
    ),
    Attack(
        "25.6",
        "pull-newline",
        set_key("pull", "registries/team-a/pull\n../../team-b"),
        fatal(KEY_FIELDS["pull"]),
    ),
    Attack(
        "25.6",
        "repository-nul",
        set_key("repository", "registries/team-a/\x00ocm"),
        fatal(KEY_FIELDS["repository"]),
    ),
    Attack(
        "25.6",
        "property-control-character",
        lambda w: w.spec()["secrets"][0]["data"][0]["remoteRef"].__setitem__(
            "property", "pass\nword"
        ),
        fatal("spec.secrets[0].data[0].remoteRef.property"),
    ),
]


def check_row(a: Attack, w: World, out: Any) -> None:
    if isinstance(a.expect, Fatal):
        one_fatal(out, a.expect.where, *a.expect.parts)
        return
    assert out.fatal is None, out.fatal.message
    assert all(r.severity != fnv1.SEVERITY_FATAL for r in out.results)
    check_render(out, w.xr(), w.policy, required=w.required, ledger=LEDGER, observed=w.observed)
    if a.expect.check:
        a.expect.check(w, out)


@pytest.mark.parametrize("attack", ATTACKS, ids=[f"{a.cls}-{a.id}" for a in ATTACKS])
def test_attack(attack: Attack, tmp_path: Path) -> None:
    w = world(tmp_path)
    attack.mutate(w)
    check_row(attack, w, run(w))


def test_suite_covers_every_class_with_variants() -> None:
    by_class: dict[str, int] = {}
    for a in ATTACKS:
        by_class[a.cls] = by_class.get(a.cls, 0) + 1
    wanted = {
        "18.1",
        "18.2",
        "18.3",
        "18.4",
        "18.5",
        "18.6",
        "18.7",
        "25.1",
        "25.2",
        "25.3",
        "25.4",
        "25.5",
        "25.6",
        "30.1",
        "30.2",
        "30.3",
        "30.4",
        "30.5",
    }
    assert wanted <= set(by_class), wanted - set(by_class)
    assert all(by_class[c] >= 3 for c in wanted), by_class


def test_every_non_oci_reference_gets_the_same_message(tmp_path: Path) -> None:
    messages = set()
    for a in ATTACKS:
        if a.cls == "18.6":
            w = world(tmp_path)
            a.mutate(w)
            out = run(w)
            messages.add(one_fatal(out, "spec.component.repository"))
    assert len(messages) == 1, messages
    (msg,) = messages
    for leak in (
        "/etc",
        "directory",
        "does not exist",
        "holds neither",
        "examples/component",
        "/tmp",  # noqa: S108 - a path that must not appear in the message
        "shared",
    ):
        assert leak not in msg, msg


# -- 18.2 / 25.2: identities never share a derived name ------------------------------------------


def claim_as(ns: str | None, name: str, target_ns: str) -> World:
    w = world()
    if ns is None:  # an XR without a claim (ops-created): its own tenant
        w.claim["metadata"] = {"name": name}
        w.required = []
    else:
        w.tenant(ns)
        w.claim["metadata"]["name"] = name
    w.target(target_ns)
    for s in w.spec()["secrets"]:
        s["data"][0]["remoteRef"]["key"] = f"apps/{ns or name}/db"
    for c in w.spec()["credentials"].values():
        c["remoteRef"]["key"] = f"registries/{ns or name}/x"
    return w


LONG_NS = "t" * 61 + "ab"
PAIRS = [
    (("team", "a-podinfo", "team--web"), ("team-a", "podinfo", "team-a--web")),
    (("team", "a.podinfo", "team--web"), ("team-a", "podinfo", "team-a--web")),
    ((None, "team-a-podinfo", "team-a-podinfo"), ("team-a", "podinfo", "team-a--web")),
    ((None, "podinfo", "podinfo"), ("podinfo", "podinfo", "podinfo--web")),
    (("team-a", "x" * 252 + "1", "team-a--web"), ("team-a", "x" * 252 + "2", "team-a--web")),
    ((LONG_NS, "podinfo", f"{LONG_NS}"), (LONG_NS[:-1] + "c", "podinfo", LONG_NS[:-1] + "c")),
    (("team-a", "podinfo", "team-a--web"), ("team-a", "podinfo-deployer", "team-a--web")),
    (("team-a", "podinfo", "team-a--web"), ("team-a", "podinfo-repository", "team-a--web")),
]


@pytest.mark.parametrize(
    "first, second", PAIRS, ids=[f"{a[0]}/{a[1][:20]}~{b[0]}/{b[1][:20]}" for a, b in PAIRS]
)
def test_identities_never_share_a_derived_name(first, second) -> None:
    ledger = Ledger()
    outs = []
    for ns, name, target_ns in (first, second):
        w = claim_as(ns, name, target_ns)
        if ns is not None and target_ns == ns:
            w.target(target_ns, "existing")
        out = run(w)
        check_render(out, w.xr(), w.policy, required=w.required, ledger=ledger)
        outs.append(out)
    a, b = (o.xr["status"]["deploy"] for o in outs)
    assert a["namespace"] != b["namespace"] and a["serviceAccount"] != b["serviceAccount"], (a, b)
    owners = [{o["metadata"]["labels"]["sack8s.io/owner"] for o in out.resources} for out in outs]
    assert all(len(x) == 1 for x in owners) and owners[0] != owners[1], owners


def test_names_of_the_longest_identities_fit_every_limit() -> None:
    w = claim_as("n" * 63, "c" * 253, "n" * 63)
    w.target("n" * 63, "existing")
    out = run(w)
    check_render(out, w.xr(), w.policy, required=w.required, ledger=Ledger())


# -- 30.1: collision searches with the product's own key functions over long names -------------


def test_collision_search_with_the_product_key_functions() -> None:
    """The search that broke the old Namespace keys (32 bits: a pair of 63-character targets in
    well under a second) finds nothing with the current key and name functions over the same
    names: Namespace keys are the name itself, secret keys past 232 characters and derived
    names carry 100 bits."""
    from function.compose import externalsecrets, names, namespaces
    from function.compose.identity import Identity
    from function.compose.objectnames import ObjectNames

    prefix = "team-a--" + "x" * 36
    a, b = long_pair()
    assert a != b and names.legacy_key("namespace", a) == names.legacy_key("namespace", b)
    room = 63 - len(prefix)
    budget = max(int(b[len(prefix) :], 16) + 1, 1 << 17)
    targets = [prefix + format(i, "x").rjust(room, "0") for i in range(budget)]
    assert collision_search(lambda n: names.legacy_key("namespace", n), targets) is not None
    assert collision_search(namespaces.key_target, targets) is None
    own = ObjectNames(Identity("team-a", "podinfo", "podinfo-x", is_claim=True, tenant="team-a"))
    assert collision_search(own.role, targets) is None
    assert collision_search(own.pull_externalsecret, targets) is None
    secrets = ["s" * 212 + format(i, "x").rjust(20, "0") for i in range(budget)]
    keys = [externalsecrets.key_service("team-a--web", x) for x in secrets[:3]]
    assert all(len(k) == 253 for k in keys)  # the hashed form
    assert (
        collision_search(lambda x: externalsecrets.key_service("team-a--web", x), secrets) is None
    )


# -- 19.1 on the bundled examples: the invariants hold there too -----------------------------------


@pytest.mark.parametrize("case", ["helm", "kustomize"])
def test_bundled_examples_keep_the_invariants(case: str) -> None:
    from function.edge.render import input_from_composition, load_docs

    xr = load_docs(
        [REPO / ("examples/xr.yaml" if case == "helm" else "examples/xr-kustomize.yaml")]
    )[0]
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    observed = load_docs([REPO / "examples/observed" / case])
    runner = FunctionRunner(sources=SourceFactory(cache=Cache()), base_dir=REPO)
    out = asyncio.run(render(xr, policy, observed=observed, runner=runner))
    check_render(out, xr, policy, ledger=LEDGER)
    assert objects(out, "HelmRelease" if case == "helm" else "Kustomization")


# -- through `sack8s render` (subprocess) ----------------------------------------------------------


CLI_ROWS = [a for a in ATTACKS if a.cli]


def _sack8s() -> list[str]:
    exe = Path(sys.executable).with_name("sack8s")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "function.cli"]


@pytest.mark.parametrize("attack", CLI_ROWS, ids=[f"{a.cls}-{a.id}" for a in CLI_ROWS])
def test_attack_through_sack8s_render(attack: Attack, tmp_path: Path) -> None:
    w = world(tmp_path)
    attack.mutate(w)
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(w.claim))
    comp = tmp_path / "composition.yaml"
    comp.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiextensions.crossplane.io/v1",
                "kind": "Composition",
                "metadata": {"name": "c"},
                "spec": {
                    "compositeTypeRef": {
                        "apiVersion": "platform.example.org/v1alpha1",
                        "kind": "XSACK8sComponentVersion",
                    },
                    "mode": "Pipeline",
                    "pipeline": [
                        {
                            "step": "compose",
                            "functionRef": {"name": "function-sack8s"},
                            "input": w.policy,
                        }
                    ],
                },
            }
        )
    )
    args = [*_sack8s(), "render", str(claim), "--composition", str(comp), "--no-include-results"]
    if w.required:
        (tmp_path / "required.yaml").write_text(yaml.safe_dump_all(w.required))
        args += ["--required-resources", str(tmp_path / "required.yaml")]
    (tmp_path / "observed.yaml").write_text(yaml.safe_dump_all(settled_observed(w)))
    args += ["--observed", str(tmp_path / "observed.yaml")]
    proc = subprocess.run(
        args,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if isinstance(attack.expect, Fatal):
        assert proc.returncode == 1, (proc.returncode, proc.stdout[:500], proc.stderr)
        err = proc.stderr.strip()
        head = f"sack8s render: {attack.expect.where}"
        assert err.startswith(head) and err[len(head) :][:1] in (":", " ", ".", "["), err
        for p in attack.expect.parts:
            assert p in err, (p, err)
        assert proc.stdout == ""
        return
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    out = SimpleNamespace(xr=docs[0], resources=docs[1:], fatal=None, results=[])
    check_render(out, w.xr(), w.policy, required=w.required, ledger=LEDGER)
    if attack.expect.check:
        attack.expect.check(w, out)
    assert sorted(key_of(o) for o in out.resources) == [key_of(o) for o in out.resources]
