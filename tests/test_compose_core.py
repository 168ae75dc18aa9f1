"""Behaviour of the composition core on the bundled examples: names, namespaces, gate, readiness."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support import example_component
from support.invariants import check_render
from support.settle import converge

from function.compose import names
from function.edge.render import claim_to_xr, input_from_composition, load_docs, render

REPO = Path(__file__).resolve().parents[1]


def load(xr_file: str = "examples/xr.yaml", composition: str = "examples/composition.yaml"):
    xr = claim_to_xr(load_docs([REPO / xr_file])[0])
    policy = input_from_composition(load_docs([REPO / composition])[0], composition)
    return xr, policy


def by_key(rendered) -> dict[str, dict[str, Any]]:
    return {
        r["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: r
        for r in rendered.resources
    }


def run(xr, policy, **kw):
    """A successful render, checked against every tenancy invariant (tests/support/invariants.py).

    Without observed state: what the claim composes once its reconciles settle (Namespaces
    first, then what goes into them, then Flux: tests/support/settle.py).
    """
    if "observed" in kw:
        out = asyncio.run(render(xr, policy, **kw))
    else:
        out = asyncio.run(converge(xr, policy, **kw))[0][-1]
    assert out.fatal is None, out.fatal.message if out.fatal else ""
    check_render(out, xr, policy, required=kw.get("required", ()))
    return out


def observed(flavour: str) -> list[dict[str, Any]]:
    return load_docs([REPO / "examples/observed" / flavour])


# ------------------------------------------------------------------ names are a stable API

# What an installation sees for the bundled example (XR ``podinfo`` without a claim): every
# derived name ends in 20 base32 characters (100 bits) of SHA-256 over exactly what tells the
# object apart; only the target Namespace keeps a name the claim chose, and its old key.
DEPLOY_NS = "sack8s-podinfo-fsjctn6ijj4ewqmkaacg"
DEPLOYMENT = "podinfo-obgz2gquadlvchpzhw4h"
CLUSTER_USAGE = "podinfo-deploy-namespace-2jbhmytf5uqb3g6eokuo"
GOLDEN_HELM_KEYS = {
    "deploy-namespace": ("Namespace", None, DEPLOY_NS),
    "namespace-podinfo": ("Namespace", None, "podinfo"),
    "serviceaccount-deployer": (
        "ServiceAccount",
        DEPLOY_NS,
        "podinfo-deployer-ne3d3wwth2funoifv2uu",
    ),
    "role.podinfo": ("Role", "podinfo", "podinfo-deployer-oj6arjdakemjqw63vp7p"),
    "rolebinding.podinfo": ("RoleBinding", "podinfo", "podinfo-deployer-oj6arjdakemjqw63vp7p"),
    "role-deploy": ("Role", DEPLOY_NS, "podinfo-helm-storage-scgm7hnyg4sxielbhmm2"),
    "rolebinding-deploy": ("RoleBinding", DEPLOY_NS, "podinfo-helm-storage-scgm7hnyg4sxielbhmm2"),
    "externalsecret-repository": (
        "ExternalSecret",
        DEPLOY_NS,
        "podinfo-repository-n5u5dmqihorga3be2zdw",
    ),
    "externalsecret-pull.podinfo": (
        "ExternalSecret",
        "podinfo",
        "podinfo-pull-fgvnlaktcdailelgvoz3",
    ),
    "externalsecret.podinfo.podinfo-db": (
        "ExternalSecret",
        "podinfo",
        "podinfo-podinfo-db-xnzpnilv7kys5kopq6qe",
    ),
    "ocm-repository": ("Repository", DEPLOY_NS, DEPLOYMENT),
    "ocm-component": ("Component", DEPLOY_NS, DEPLOYMENT),
    "ocm-resource": ("Resource", DEPLOY_NS, DEPLOYMENT),
    "flux-ocirepository": ("OCIRepository", DEPLOY_NS, DEPLOYMENT),
    "flux-helmrelease": ("HelmRelease", DEPLOY_NS, DEPLOYMENT),
    "clusterusage.namespace-podinfo": ("ClusterUsage", None, CLUSTER_USAGE),
}
PULL_SECRET = "podinfo-pull-bsqemhuofkqppmlr2rv7"
REPOSITORY_SECRET = "podinfo-repository-n5u5dmqihorga3be2zdw"


def test_golden_names_of_every_composed_object() -> None:
    xr, policy = load()
    got = by_key(run(xr, policy, observed=observed("helm")))
    for key, (kind, ns, name) in GOLDEN_HELM_KEYS.items():
        obj = got[key]
        assert (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]) == (
            kind,
            ns,
            name,
        ), key
    assert {k for k in got if not k.startswith("usage.")} == set(GOLDEN_HELM_KEYS)
    assert got["externalsecret-pull.podinfo"]["spec"]["target"]["name"] == PULL_SECRET
    assert (
        got["externalsecret.podinfo.podinfo-db"]["spec"]["target"]["name"] == "podinfo-db"
    )  # the team's name
    assert got["flux-helmrelease"]["spec"]["releaseName"] == DEPLOYMENT
    labels = got["deploy-namespace"]["metadata"]["labels"]
    assert (
        labels["sack8s.io/owner"] == "miffuylv2rup7e5oa22a"
        and labels["sack8s.io/deploy-namespace"] == "true"
    )
    ann = got["deploy-namespace"]["metadata"]["annotations"]
    assert {k: v for k, v in ann.items() if k.startswith("sack8s.io/")} == {
        "sack8s.io/claim-name": "podinfo"
    }
    assert got["namespace-podinfo"]["metadata"]["labels"]["sack8s.io/tenant"] == "podinfo"


def test_names_derive_from_the_claim_not_the_xr_name() -> None:
    xr, policy = load("examples/claim.yaml", "examples/composition-claim.yaml")
    xr["metadata"]["name"] = "podinfo-x7k2p"  # claims give XRs a random suffix
    got = by_key(run(xr, policy, required=load_docs([REPO / "examples/required"])))
    again = by_key(
        run(
            {**xr, "metadata": {**xr["metadata"], "name": "podinfo-q9w3e"}},
            policy,
            required=load_docs([REPO / "examples/required"]),
        )
    )
    assert {k: o["metadata"]["name"] for k, o in got.items()} == {
        k: o["metadata"]["name"] for k, o in again.items()
    }
    deploy_ns = got["deploy-namespace"]["metadata"]["name"]
    assert (
        deploy_ns.startswith("sack8s-team-a-podinfo-")
        and len(deploy_ns) == len("sack8s-team-a-podinfo-") + 20
    )
    assert got["serviceaccount-deployer"]["metadata"]["name"].startswith("podinfo-deployer-")
    meta = got["deploy-namespace"]["metadata"]
    assert (
        meta["labels"]["sack8s.io/claim-namespace"] == "team-a"
        and meta["labels"]["sack8s.io/claim-name"] == "podinfo"
    )
    assert {k: v for k, v in meta["annotations"].items() if k.startswith("sack8s.io/")} == {
        "sack8s.io/claim-namespace": "team-a",
        "sack8s.io/claim-name": "podinfo",
    }


def test_names_are_injective_where_the_joined_text_is_not() -> None:
    """``team/a-podinfo`` and ``team-a/podinfo`` join to one string; they share no name."""
    xr, policy = load("examples/claim.yaml", "examples/composition-claim.yaml")
    seen: dict[tuple[str, str, str], str] = {}
    for ns, name in (("team", "a-podinfo"), ("team-a", "podinfo")):
        claim = copy.deepcopy(xr)
        claim["spec"]["claimRef"].update(namespace=ns, name=name)
        claim["metadata"]["labels"].update(
            {"crossplane.io/claim-namespace": ns, "crossplane.io/claim-name": name}
        )
        claim["spec"]["namespaces"] = [{"name": f"{ns}--podinfo", "mode": "create"}]
        claim["spec"].pop("values")
        claim["spec"]["secrets"][0]["data"][0]["remoteRef"]["key"] = f"apps/{ns}/db"
        for key, obj in by_key(run(claim, policy)).items():
            if obj["kind"] == "Namespace" and key != "deploy-namespace":
                continue
            ident = (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
            assert seen.setdefault(ident, f"{ns}/{name}") == f"{ns}/{name}", ident


def test_long_names_are_cut_with_a_hash_within_limits() -> None:
    xr, policy = load()
    long = "x" * 60
    xr["metadata"]["name"] = long
    xr["spec"]["namespaces"] = [
        {"name": long, "mode": "create"}
    ]  # an XR without a claim: its own tenant
    xr["spec"]["secrets"] = []
    got = by_key(run(xr, policy, observed=observed("helm")))
    deploy_ns = got["deploy-namespace"]["metadata"]["name"]
    assert len(deploy_ns) == 63 and deploy_ns.startswith("sack8s-xxx")
    for obj in got.values():
        assert len(obj["metadata"]["name"]) <= 63
        for v in obj["metadata"]["labels"].values():
            assert len(v) <= 63
    assert len(got["flux-helmrelease"]["spec"]["releaseName"]) <= 53
    assert names.hashed("a" * 100, names.digest("x"), 53) != names.hashed(
        "a" * 100, names.digest("y"), 53
    )
    assert len(names.hashed("a" * 100, names.digest("x"), 53)) == 53
    assert names.HASH_BITS >= 64


# ------------------------------------------------------------------ output is deterministic


def test_same_input_gives_byte_identical_output() -> None:
    xr, policy = load()
    first = run(copy.deepcopy(xr), copy.deepcopy(policy), observed=observed("helm")).yaml()
    second = run(copy.deepcopy(xr), copy.deepcopy(policy), observed=observed("helm")).yaml()
    assert first == second


# ------------------------------------------------------------------ namespaces


def test_create_refuses_a_namespace_owned_by_someone_else() -> None:
    xr, policy = load()
    existing = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "podinfo", "labels": {"sack8s.io/owner": "other-claim"}},
    }
    out = asyncio.run(render(xr, policy, required=[existing]))
    assert out.fatal is not None
    assert (
        "spec.namespaces[0]" in out.fatal.message
        and "already exists and is not owned" in out.fatal.message
    )


def test_create_accepts_its_own_namespace() -> None:
    xr, policy = load()
    first = by_key(run(xr, policy))
    mine = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": first["namespace-podinfo"]["metadata"],
    }
    run(xr, policy, required=[mine])  # ours by its full identity, though not observed
    other = copy.deepcopy(mine)
    other["metadata"]["annotations"]["sack8s.io/claim-name"] = (
        "podinfo-2"  # same owner label, another claim
    )
    out = asyncio.run(render(xr, policy, required=[other]))
    assert out.fatal is not None and "already exists and is not owned" in out.fatal.message


def test_existing_mode_composes_no_namespace_and_requires_it() -> None:
    xr, policy = load()
    xr["spec"]["namespaces"][0]["mode"] = "existing"
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and "does not exist" in out.fatal.message
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo"}}
    out = asyncio.run(render(xr, policy, required=[ns]))
    assert (
        out.fatal is not None and "no sack8s.io/tenant label" in out.fatal.message
    )  # not the tenant's
    ns["metadata"]["labels"] = {"sack8s.io/tenant": "podinfo"}  # ops hand it to the XR's tenant
    got = by_key(run(xr, policy, required=[ns]))
    assert "namespace-podinfo" not in got and "role.podinfo" in got


def test_adopt_where_policy_allows() -> None:
    xr, policy = load()
    xr["spec"]["namespaces"][0]["mode"] = "adopt"
    policy["namespaces"]["allowAdopt"] = True
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "podinfo", "labels": {"sack8s.io/tenant": "podinfo"}},
    }
    got = by_key(run(xr, policy, required=[ns]))
    assert (
        got["namespace-podinfo"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        == "baseline"
    )
    assert (
        got["namespace-podinfo"]["metadata"]["labels"]["pod-security.kubernetes.io/warn"]
        == "restricted"
    )
    other = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "podinfo",
            "labels": {"sack8s.io/tenant": "podinfo", "sack8s.io/owner": "x"},
        },
    }
    out = asyncio.run(render(xr, policy, required=[other]))
    assert out.fatal is not None and "owned by another claim" in out.fatal.message


# ------------------------------------------------------------------ gate, readiness, never drop


def test_gate_withholds_flux_until_the_ocm_component_is_ready_at_the_version() -> None:
    xr, policy = load()
    renders, _ = asyncio.run(converge(xr, policy))
    second = by_key(renders[1])  # the Namespaces exist: the Component and the deployer are composed
    assert "flux-helmrelease" not in second and "ocm-component" in second
    assert renders[1].xr["status"]["blockedBy"]["reason"] == "Creating"
    assert {"flux-ocirepository", "flux-helmrelease"} <= set(by_key(renders[2]))
    wrong = observed("helm")
    for o in wrong:
        if o["kind"] == "Component":
            o["status"]["component"]["version"] = "6.1.0"
    third = asyncio.run(
        render(
            xr,
            policy,
            observed=[
                o for o in wrong if o["kind"] != "HelmRelease" and o["kind"] != "OCIRepository"
            ],
        )
    )
    assert "flux-helmrelease" not in by_key(third)
    assert third.xr["status"]["blockedBy"]["reason"] == "WaitingForOCMComponent"
    assert "6.1.0" in third.xr["status"]["blockedBy"]["message"]


def test_observed_flux_objects_are_never_dropped_when_a_dependency_is_not_ready() -> None:
    xr, policy = load()
    obs = observed("helm")
    for o in obs:
        if o["kind"] == "Component":
            o["status"]["conditions"][0]["status"] = "False"
    got = by_key(run(xr, policy, observed=obs))
    assert "flux-helmrelease" in got and "flux-ocirepository" in got


def test_readiness_and_blocked_by_contract() -> None:
    xr, policy = load()
    out = asyncio.run(render(xr, policy, observed=observed("helm")))
    # Everything observed and Ready: no blocker, DeploymentReady True.
    assert "blockedBy" not in out.xr["status"]
    cond = out.xr["status"]["conditions"][0]
    assert cond["type"] == "DeploymentReady" and cond["status"] == "True"
    first = asyncio.run(render(xr, policy))
    blocked = first.xr["status"]["blockedBy"]
    assert (blocked["kind"], blocked["name"], blocked["reason"]) == (
        "Namespace",
        DEPLOY_NS,
        "WaitingForNamespace",
    )
    assert first.xr["status"]["conditions"][0]["status"] == "False"
    obs = observed("helm")
    for o in obs:
        if o["kind"] == "HelmRelease":
            o["status"]["conditions"][0].update(
                status="False",
                reason="InstallFailed",
                message="forbidden: cannot create deployments",
            )
    out = asyncio.run(render(xr, policy, observed=obs))
    blocked = out.xr["status"]["blockedBy"]
    assert (blocked["kind"], blocked["reason"]) == ("HelmRelease", "InstallFailed")
    assert "forbidden" in blocked["message"]


def test_status_reports_version_digest_images_and_substitutions() -> None:
    xr, policy = load()
    st = run(xr, policy).xr["status"]
    assert st["component"]["version"] == "6.2.0"
    assert st["component"]["descriptorDigest"] == example_component.version().descriptor_manifest
    assert st["images"] == [
        {
            "resource": "image",
            "reference": "127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1",
        }
    ]
    rules = {s["rule"] for s in st["configData"]["substitutions"]}
    assert "localization[1]" in rules


def _at(obj: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj[part]
    return obj


def test_status_traces_every_place_the_pull_secret_is_written() -> None:
    """The pull secret is the one value the policy, not a ConfigData rule, writes into Flux."""
    for xr_file, flavour, key in (
        ("examples/xr.yaml", "helm", "flux-helmrelease"),
        ("examples/xr-kustomize.yaml", "kustomize", "flux-kustomization"),
    ):
        xr, policy = load(xr_file)
        out = run(xr, policy, observed=observed(flavour))
        trace = out.xr["status"]["deploy"]["pullSecret"]
        spec = by_key(out)[key]["spec"]
        assert trace["namespaces"] == [ns["name"] for ns in xr["spec"]["namespaces"]]
        if flavour == "helm":
            [where] = trace["writtenTo"]
            path = where.removeprefix("HelmRelease spec.values.")
            assert _at(spec["values"], path) == [{"name": trace["name"]}]
        else:
            patched = {p["target"]["kind"] for p in spec["patches"] if trace["name"] in p["patch"]}
            assert {w.split()[2] for w in trace["writtenTo"]} == patched and patched
        # without a pull credential there is nothing to trace
        del xr["spec"]["credentials"]["pull"]
        out = run(xr, policy, observed=observed(flavour))
        assert "pullSecret" not in out.xr["status"]["deploy"]


# ------------------------------------------------------------------ Flux objects per packaging.md


def test_helm_flux_objects_follow_the_packaging_contract() -> None:
    xr, policy = load()
    got = by_key(run(xr, policy, observed=observed("helm")))
    src = got["flux-ocirepository"]["spec"]
    assert src["url"] == "oci://127.0.0.1:5000/source/component-descriptors/acme.org/sack8s/podinfo"
    assert src["ref"] == {"digest": example_component.version().local("chart")}
    assert src["layerSelector"] == {
        "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
        "operation": "copy",
    }
    assert src["insecure"] is True and src["secretRef"] == {"name": REPOSITORY_SECRET}
    hr = got["flux-helmrelease"]["spec"]
    assert hr["chartRef"] == {"kind": "OCIRepository", "name": DEPLOYMENT}
    assert (
        hr["serviceAccountName"] == GOLDEN_HELM_KEYS["serviceaccount-deployer"][2]
        and hr["targetNamespace"] == "podinfo"
    )
    assert hr["storageNamespace"] == DEPLOY_NS and len(hr["releaseName"]) <= 53
    assert hr["values"]["imagePullSecrets"] == [{"name": PULL_SECRET}]
    assert (
        hr["install"]["strategy"] == {"name": "RetryOnFailure"}
        and hr["upgrade"]["crds"] == "CreateReplace"
    )


def test_kustomize_flux_objects_follow_the_packaging_contract() -> None:
    xr, policy = load("examples/xr-kustomize.yaml")
    got = by_key(run(xr, policy, observed=observed("kustomize")))
    src = got["flux-ocirepository"]["spec"]
    assert src["ref"] == {"digest": example_component.version().descriptor_manifest}
    assert src["layerSelector"] == {"mediaType": "application/x-tar+gzip", "operation": "extract"}
    ks = got["flux-kustomization"]["spec"]
    assert (
        ks["path"] == "./"
        and ks["prune"] is True
        and ks["serviceAccountName"].startswith("podinfo-kustomize-deployer-")
    )
    text = repr(ks["patches"])
    assert "127.0.0.1:5000/upstream/podinfo@sha256:11342fe5" in text  # localized image
    assert "Hello from sack8s" in text  # configured value
    # Struct numbers are doubles; an integer field must not become 2.0 in a patch.
    assert '"path": "/spec/replicas", "value": 2}' in text
    assert "imagePullSecrets" in text
    assert "role-deploy" not in got  # no Helm storage in the deploy namespace for Kustomize


def test_no_plain_http_means_no_insecure() -> None:
    xr, policy = load()
    xr["spec"]["component"]["repository"] = "oci::https://127.0.0.1:5000/source"
    policy["registries"] = [
        {"host": "127.0.0.1:5000", "plainHTTP": False, "certSecretName": "registry-ca"}
    ]
    policy["mirrors"] = [
        {"repository": "oci::https://127.0.0.1:5000/source", "path": "examples/component/ctf"}
    ]
    got = by_key(run(xr, policy, observed=observed("helm")))
    src = got["flux-ocirepository"]["spec"]
    assert "insecure" not in src and src["certSecretRef"] == {"name": "registry-ca"}


def test_registry_credential_template_cannot_be_broken_by_a_quote() -> None:
    """The dockerconfigjson is assembled by toJson, never by string concatenation of secret values."""
    xr, policy = load()
    got = by_key(run(xr, policy))
    tpl = got["externalsecret-pull.podinfo"]["spec"]["target"]["template"]["data"][
        ".dockerconfigjson"
    ]
    assert "| toJson" in tpl and '"{{' not in tpl and ".password" in tpl


def test_upgrade_keeps_the_namespaces_an_earlier_release_created() -> None:
    """A claim whose target an earlier release created under other rules (``team-a`` creating
    ``podinfo``, old owner label, no claim annotations): observed under its unchanged key with
    Crossplane's controller reference to this XR, the Namespace is proven the claim's and is
    relabelled in place. A key that is merely observed proves nothing (issue 30): without the
    controller reference, or with another Namespace under the key, the name is checked as new
    and refused, as it is to a claim that never had it."""
    xr, policy = load("examples/claim.yaml", "examples/composition-claim.yaml")
    xr["metadata"]["uid"] = "0b6c7f5e-xr-uid"
    xr["spec"]["namespaces"] = [{"name": "podinfo", "mode": "create"}]
    old = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "podinfo",
            "labels": {"sack8s.io/owner": "team-a-podinfo"},
            "annotations": {"crossplane.io/composition-resource-name": "namespace-podinfo"},
            "ownerReferences": [
                {
                    "apiVersion": "platform.example.org/v1alpha1",
                    "kind": "XSACK8sComponentVersion",
                    "name": xr["metadata"]["name"],
                    "uid": "0b6c7f5e-xr-uid",
                    "controller": True,
                }
            ],
        },
    }
    required = [*load_docs([REPO / "examples/required"]), copy.deepcopy(old)]
    out = asyncio.run(render(xr, policy, observed=[old], required=required))
    assert out.fatal is None, out.fatal.message
    ns = by_key(out)["namespace-podinfo"]["metadata"]
    assert (
        ns["labels"]["sack8s.io/tenant"] == "team-a"
        and ns["annotations"]["sack8s.io/claim-name"] == "podinfo"
    )
    fresh = asyncio.run(render(xr, policy, required=required))
    assert fresh.fatal is not None and "spec.namespaces[0]" in fresh.fatal.message
    unproven = copy.deepcopy(old)
    del unproven["metadata"]["ownerReferences"]  # the key alone: no proof
    out = asyncio.run(render(xr, policy, observed=[unproven], required=required))
    assert out.fatal is not None and "not owned by this claim" in out.fatal.message
    other = copy.deepcopy(old)
    other["metadata"]["name"] = "team-a--other"  # another Namespace under the key
    out = asyncio.run(render(xr, policy, observed=[other], required=required))
    assert out.fatal is not None and "spec.namespaces[0]" in out.fatal.message


def test_schema_violations_are_fatal_unless_the_policy_downgrades_them_to_warnings() -> None:
    xr, policy = load()
    xr["spec"]["values"]["inline"]["replicas"] = "two"  # the example ConfigData says integer
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None
    assert (
        "configuration.schema: values.replicas: 'two' is not of type 'integer'" in out.fatal.message
    )
    policy = copy.deepcopy(policy)
    policy["configData"] = {"schemaViolations": "Warning"}
    out = run(xr, policy)
    # Sent as an event once (the first reconcile); kept in status.warnings from then on.
    warnings = [w["message"] for w in out.xr["status"]["warnings"]]
    assert any(
        "values.replicas: 'two' is not of type 'integer' (schema rule properties/replicas/type)"
        in w
        and "reported as a warning" in w
        for w in warnings
    ), warnings
