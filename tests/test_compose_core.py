"""Behaviour of the composition core on the bundled examples: names, namespaces, gate, readiness."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from support.settle import converge

from function.compose import names
from function.render import claim_to_xr, input_from_composition, load_docs, render

REPO = Path(__file__).resolve().parents[1]


def load(xr_file: str = "examples/xr.yaml", composition: str = "examples/composition.yaml"):
    xr = claim_to_xr(load_docs([REPO / xr_file])[0])
    policy = input_from_composition(load_docs([REPO / composition])[0], composition)
    return xr, policy


def by_key(rendered) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: r for r in rendered.resources}


def run(xr, policy, **kw):
    out = asyncio.run(render(xr, policy, **kw))
    assert out.fatal is None, out.fatal.message if out.fatal else ""
    return out


def observed(flavour: str) -> list[dict[str, Any]]:
    return load_docs([REPO / "examples/observed" / flavour])


# ------------------------------------------------------------------ names are a stable API

GOLDEN_HELM_KEYS = {
    "namespace-deploy": ("Namespace", None, "sack8s-podinfo"),
    "namespace-podinfo": ("Namespace", None, "podinfo"),
    "serviceaccount-deployer": ("ServiceAccount", "sack8s-podinfo", "podinfo-deployer"),
    "role-podinfo": ("Role", "podinfo", "podinfo-deployer"),
    "rolebinding-podinfo": ("RoleBinding", "podinfo", "podinfo-deployer"),
    "role-deploy": ("Role", "sack8s-podinfo", "podinfo-deployer"),
    "rolebinding-deploy": ("RoleBinding", "sack8s-podinfo", "podinfo-deployer"),
    "externalsecret-repository": ("ExternalSecret", "sack8s-podinfo", "podinfo-repository"),
    "externalsecret-pull-podinfo": ("ExternalSecret", "podinfo", "podinfo-pull"),
    "externalsecret-podinfo-podinfo-db": ("ExternalSecret", "podinfo", "podinfo-db"),
    "ocm-repository": ("Repository", "sack8s-podinfo", "podinfo"),
    "ocm-component": ("Component", "sack8s-podinfo", "podinfo"),
    "ocm-resource": ("Resource", "sack8s-podinfo", "podinfo"),
    "flux-ocirepository": ("OCIRepository", "sack8s-podinfo", "podinfo"),
    "flux-helmrelease": ("HelmRelease", "sack8s-podinfo", "podinfo"),
    "clusterusage-namespace-podinfo": ("ClusterUsage", None, "sack8s-podinfo.podinfo"),
}


def test_golden_names_of_every_composed_object() -> None:
    xr, policy = load()
    got = by_key(run(xr, policy, observed=observed("helm")))
    for key, (kind, ns, name) in GOLDEN_HELM_KEYS.items():
        obj = got[key]
        assert (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]) == (kind, ns, name), key
    assert {k for k in got if not k.startswith("usage-")} == set(GOLDEN_HELM_KEYS)


def test_names_derive_from_the_claim_not_the_xr_name() -> None:
    xr, policy = load("examples/claim.yaml", "examples/composition-claim.yaml")
    xr["metadata"]["name"] = "podinfo-x7k2p"  # claims give XRs a random suffix
    renders, _ = asyncio.run(converge(xr, policy, required=load_docs([REPO / "examples/required"])))
    got = by_key(renders[-1])
    assert got["namespace-deploy"]["metadata"]["name"] == "sack8s-team-a-podinfo"
    assert got["serviceaccount-deployer"]["metadata"]["name"] == "team-a-podinfo-deployer"
    assert got["namespace-deploy"]["metadata"]["labels"]["sack8s.io/claim-namespace"] == "team-a"


def test_long_names_are_cut_with_a_hash_within_limits() -> None:
    xr, policy = load()
    long = "x" * 60
    xr["metadata"]["name"] = long
    got = by_key(run(xr, policy, observed=observed("helm")))
    deploy_ns = got["namespace-deploy"]["metadata"]["name"]
    assert len(deploy_ns) <= 63 and deploy_ns == names.fit(f"sack8s-{long}", 63)
    assert deploy_ns != names.fit(f"sack8s-{'x' * 59}y", 63)  # no collision after truncation
    for obj in got.values():
        for v in obj["metadata"]["labels"].values():
            assert len(v) <= 63
    for key in ("flux-helmrelease", "flux-ocirepository", "ocm-component"):
        assert len(got[key]["metadata"]["name"]) <= 63  # Flux labels applied objects with it
    assert names.fit("a" * 100, 53) != names.fit("a" * 101, 53)
    assert len(names.fit("a" * 100, 53)) == 53


# ------------------------------------------------------------------ output is deterministic


def test_same_input_gives_byte_identical_output() -> None:
    xr, policy = load()
    first = run(copy.deepcopy(xr), copy.deepcopy(policy), observed=observed("helm")).yaml()
    second = run(copy.deepcopy(xr), copy.deepcopy(policy), observed=observed("helm")).yaml()
    assert first == second


# ------------------------------------------------------------------ namespaces


def test_create_refuses_a_namespace_owned_by_someone_else() -> None:
    xr, policy = load()
    existing = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo", "labels": {"sack8s.io/owner": "other-claim"}}}
    out = asyncio.run(render(xr, policy, required=[existing]))
    assert out.fatal is not None
    assert "spec.namespaces[0]" in out.fatal.message and "already exists and is not owned" in out.fatal.message


def test_create_accepts_its_own_namespace() -> None:
    xr, policy = load()
    mine = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo", "labels": {"sack8s.io/owner": "podinfo"}}}
    run(xr, policy, required=[mine])


def test_existing_mode_composes_no_namespace_and_requires_it() -> None:
    xr, policy = load()
    xr["spec"]["namespaces"][0]["mode"] = "existing"
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and "does not exist" in out.fatal.message
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo"}}
    got = by_key(run(xr, policy, required=[ns]))
    assert "namespace-podinfo" not in got and "role-podinfo" in got


def test_adopt_where_policy_allows() -> None:
    xr, policy = load()
    xr["spec"]["namespaces"][0]["mode"] = "adopt"
    policy["namespaces"]["allowAdopt"] = True
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo"}}
    got = by_key(run(xr, policy, required=[ns]))
    assert got["namespace-podinfo"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert got["namespace-podinfo"]["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "restricted"
    other = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo", "labels": {"sack8s.io/owner": "x"}}}
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
    third = asyncio.run(render(xr, policy, observed=[o for o in wrong if o["kind"] != "HelmRelease" and o["kind"] != "OCIRepository"]))
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
    assert (blocked["kind"], blocked["name"], blocked["reason"]) == ("Namespace", "sack8s-podinfo", "WaitingForNamespace")
    assert first.xr["status"]["conditions"][0]["status"] == "False"
    assert first.xr["status"]["conditions"][0]["reason"] == "WaitingForNamespace"
    obs = observed("helm")
    for o in obs:
        if o["kind"] == "HelmRelease":
            o["status"]["conditions"][0].update(status="False", reason="InstallFailed", message="forbidden: cannot create deployments")
    out = asyncio.run(render(xr, policy, observed=obs))
    blocked = out.xr["status"]["blockedBy"]
    assert (blocked["kind"], blocked["reason"]) == ("HelmRelease", "InstallFailed")
    assert "forbidden" in blocked["message"]


def test_status_reports_version_digest_images_and_substitutions() -> None:
    xr, policy = load()
    st = run(xr, policy).xr["status"]
    assert st["component"]["version"] == "6.2.0"
    assert st["component"]["descriptorDigest"].startswith("sha256:b26fc226")
    assert st["images"] == [
        {"resource": "image", "reference": "127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"}
    ]
    rules = {s["rule"] for s in st["configData"]["substitutions"]}
    assert "localization[1]" in rules


# ------------------------------------------------------------------ Flux objects per packaging.md


def test_helm_flux_objects_follow_the_packaging_contract() -> None:
    xr, policy = load()
    got = by_key(run(xr, policy, observed=observed("helm")))
    src = got["flux-ocirepository"]["spec"]
    assert src["url"] == "oci://127.0.0.1:5000/source/component-descriptors/acme.org/sack8s/podinfo"
    assert src["ref"] == {"digest": "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"}
    assert src["layerSelector"] == {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", "operation": "copy"}
    assert src["insecure"] is True and src["secretRef"] == {"name": "podinfo-repository"}
    hr = got["flux-helmrelease"]["spec"]
    assert hr["chartRef"] == {"kind": "OCIRepository", "name": "podinfo"}
    assert hr["serviceAccountName"] == "podinfo-deployer" and hr["targetNamespace"] == "podinfo"
    assert hr["storageNamespace"] == "sack8s-podinfo" and len(hr["releaseName"]) <= 53
    assert hr["values"]["imagePullSecrets"] == [{"name": "podinfo-pull"}]
    assert hr["install"]["strategy"] == {"name": "RetryOnFailure"} and hr["upgrade"]["crds"] == "CreateReplace"


def test_kustomize_flux_objects_follow_the_packaging_contract() -> None:
    xr, policy = load("examples/xr-kustomize.yaml")
    got = by_key(run(xr, policy, observed=observed("kustomize")))
    src = got["flux-ocirepository"]["spec"]
    assert src["ref"] == {"digest": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095"}
    assert src["layerSelector"] == {"mediaType": "application/x-tar+gzip", "operation": "extract"}
    ks = got["flux-kustomization"]["spec"]
    assert ks["path"] == "./" and ks["prune"] is True and ks["serviceAccountName"] == "podinfo-kustomize-deployer"
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
    policy["registries"] = [{"host": "127.0.0.1:5000", "plainHTTP": False, "certSecretName": "registry-ca"}]
    policy["mirrors"] = [{"repository": "oci::https://127.0.0.1:5000/source", "path": "examples/component/ctf"}]
    got = by_key(run(xr, policy, observed=observed("helm")))
    src = got["flux-ocirepository"]["spec"]
    assert "insecure" not in src and src["certSecretRef"] == {"name": "registry-ca"}


def test_registry_credential_template_cannot_be_broken_by_a_quote() -> None:
    """The dockerconfigjson is assembled by toJson, never by string concatenation of secret values."""
    xr, policy = load()
    got = by_key(run(xr, policy, observed=observed("helm")))
    tpl = got["externalsecret-pull-podinfo"]["spec"]["target"]["template"]["data"][".dockerconfigjson"]
    assert "| toJson" in tpl and '"{{' not in tpl and ".password" in tpl


def test_schema_violations_are_fatal_unless_the_policy_downgrades_them_to_warnings() -> None:
    xr, policy = load()
    xr["spec"]["values"]["inline"]["replicas"] = "two"  # the example ConfigData says integer
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None
    assert "configuration.schema: values.replicas: 'two' is not of type 'integer'" in out.fatal.message
    policy = copy.deepcopy(policy)
    policy["configData"] = {"schemaViolations": "Warning"}
    out = run(xr, policy)
    warnings = [r.message for r in out.results if r.severity == fnv1.SEVERITY_WARNING]
    assert any("values.replicas: 'two' is not of type 'integer' (schema rule properties/replicas/type)" in w
               and "reported as a warning" in w for w in warnings), warnings
