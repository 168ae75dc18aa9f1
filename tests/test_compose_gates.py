"""What waits for what (issue 19 items 2, 5, 6): Namespaces first, the OCM gate on every
version change, a version the OCM controller accepts, signature verification the gate relies on."""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support.ctfedit import bundled_descriptor, with_descriptor
from support.settle import converge, settle
from support.signing import public_pem, sign
from support.structural import Validator

from function.compose import gates, namespaces
from function.edge.render import input_from_composition, load_docs, render
from function.ocm import normalisation

REPO = Path(__file__).resolve().parents[1]
KEY = "crossplane.io/composition-resource-name"
DEPLOY = namespaces.key_deploy()
PEM = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n"


def load(xr_file: str = "examples/xr.yaml"):
    xr = load_docs([REPO / xr_file])[0]
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    return xr, policy


def observed(flavour: str = "helm") -> list[dict[str, Any]]:
    return load_docs([REPO / "examples/observed" / flavour])


def by_key(out) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["annotations"][KEY]: r for r in out.resources}


def run(xr, policy, **kw):
    out = asyncio.run(render(xr, policy, **kw))
    assert out.fatal is None, out.fatal.message
    return out


def condition(out, kind: str) -> dict[str, Any]:
    return next(c for c in out.xr["status"]["conditions"] if c["type"] == kind)


def only(objs: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["metadata"]["annotations"][KEY] in keys]


def without(objs: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["metadata"]["annotations"][KEY] not in keys]


def component(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "Component")


# --------------------------------------------------------------------------- Namespaces first


def test_first_reconcile_composes_only_the_namespaces() -> None:
    xr, policy = load()
    out = run(xr, policy)
    assert set(by_key(out)) == {DEPLOY, "namespace-podinfo"}
    deploy_ns = by_key(out)[DEPLOY]["metadata"]["name"]
    assert all("namespace" not in o["metadata"] for o in out.resources)
    blocked = out.xr["status"]["blockedBy"]
    assert (blocked["kind"], blocked["name"], blocked["reason"]) == (
        "Namespace",
        deploy_ns,
        "WaitingForNamespace",
    )
    assert "composed objects wait for it" in blocked["message"]
    ready = condition(out, "DeploymentReady")
    assert (ready["status"], ready["reason"]) == ("False", "WaitingForNamespace")
    assert ready["message"].startswith(f"Namespace {deploy_ns}: not created yet")
    assert [r.reason for r in out.results if r.severity == fnv1.SEVERITY_NORMAL] == [
        "WaitingForNamespace"
    ]


def test_objects_follow_their_namespace_one_by_one() -> None:
    xr, policy = load()
    first = run(xr, policy)
    deploy_only = settle(only(first.resources, DEPLOY))
    got = by_key(run(xr, policy, observed=deploy_only))
    spaces = {o["metadata"].get("namespace") for o in got.values()}
    assert by_key(first)[DEPLOY]["metadata"]["name"] in spaces and "podinfo" not in spaces
    assert {"serviceaccount-deployer", "ocm-component", "externalsecret-repository"} <= set(got)
    assert "role.podinfo" not in got and "flux-helmrelease" not in got
    out = run(xr, policy, observed=deploy_only)
    assert out.xr["status"]["blockedBy"]["name"] == "podinfo"
    assert out.xr["status"]["blockedBy"]["reason"] == "WaitingForNamespace"


def test_observed_objects_stay_while_their_namespace_is_missing_from_observed() -> None:
    """A transient absence of the Namespace from observed state must not delete what runs in it."""
    xr, policy = load()
    obs = without(observed(), "namespace-podinfo", DEPLOY)
    got = by_key(run(xr, policy, observed=obs))
    for o in obs:
        assert o["metadata"]["annotations"][KEY] in got, o["metadata"]["annotations"][KEY]
    assert {"namespace-podinfo", DEPLOY} <= set(got)


def test_first_deployment_waits_for_what_must_outlive_flux() -> None:
    """With the gate off, Flux objects still wait until the deployer and the secrets exist, and
    arrive together with the Usages that keep those alive while Flux uninstalls."""
    xr, policy = load()
    policy["ocm"] = {"gate": False}
    renders, _ = asyncio.run(converge(xr, policy))
    with_flux = next(i for i, r in enumerate(renders) if "flux-helmrelease" in by_key(r))
    before = by_key(renders[with_flux - 1])
    assert "serviceaccount-deployer" in before and "flux-helmrelease" not in before
    assert any(k.startswith("usage.") for k in by_key(renders[with_flux]))


# --------------------------------------------------------------------------- the gate on every version change


def test_version_change_keeps_flux_at_the_observed_digest_and_values() -> None:
    xr, policy = load()
    obs = observed()
    # What 6.2.0 deployed, told apart from anything 6.3.0 computes (the example's two versions
    # localize the same image): a closed gate must keep exactly what is observed.
    next(o for o in obs if o["kind"] == "HelmRelease")["spec"]["values"]["image"]["tag"] = (
        "observed-tag"
    )
    xr["status"] = {"deploy": {"version": "6.2.0"}}
    xr["spec"]["component"]["version"] = "6.3.0"
    xr["spec"]["values"]["inline"]["replicas"] = 3  # new values too: they wait with the version
    policy["flux"] = {"driftDetection": "warn"}  # a change that does not depend on the version
    before = {
        k: v for k, v in by_key(asyncio.run(render(load()[0], load()[1], observed=obs))).items()
    }
    out = run(xr, policy, observed=obs)
    got = by_key(out)
    seen = {o["metadata"]["annotations"][KEY]: o for o in obs}
    for field in ("url", "ref", "layerSelector"):
        assert got["flux-ocirepository"]["spec"][field] == seen["flux-ocirepository"]["spec"][field]
    assert got["flux-helmrelease"]["spec"]["values"] == seen["flux-helmrelease"]["spec"]["values"]
    assert got["flux-helmrelease"]["spec"]["driftDetection"] == {"mode": "warn"}
    assert got["ocm-component"]["spec"]["semver"] == "6.3.0"
    st = out.xr["status"]
    assert st["component"]["version"] == "6.3.0" and st["deploy"]["version"] == "6.2.0"
    assert st["blockedBy"]["reason"] == "WaitingForOCMComponent"
    assert "6.2.0" in st["blockedBy"]["message"] and "6.3.0" in st["blockedBy"]["message"]
    assert condition(out, "DeploymentReady")["reason"] == "WaitingForOCMComponent"

    # Once the Component reports 6.3.0, and the digest of the descriptor the function read for
    # 6.3.0, Flux gets the new digest and values.
    moved = copy.deepcopy(obs)
    for o in moved:
        if o["kind"] == "Component":
            o["spec"]["semver"] = "6.3.0"
            o["status"]["component"]["version"] = "6.3.0"
    out = run(xr, policy, observed=moved)  # still 6.2.0's descriptor digest: held
    assert out.xr["status"]["blockedBy"]["reason"] == "DescriptorDigestMismatch"
    assert (
        by_key(out)["flux-ocirepository"]["spec"]["ref"]
        == seen["flux-ocirepository"]["spec"]["ref"]
    )
    component(moved)["status"]["component"]["digest"] = normalisation.digest(
        bundled_descriptor("6.3.0"), normalisation.V4ALPHA1
    ).to_status()
    out = run(xr, policy, observed=moved)
    now = by_key(out)
    assert now["flux-ocirepository"]["spec"]["ref"] != seen["flux-ocirepository"]["spec"]["ref"], (
        "6.3.0 has its own chart"
    )
    assert now["flux-helmrelease"]["spec"]["values"]["image"]["tag"] != "observed-tag"  # 6.3.0's
    assert "@sha256:" in now["flux-helmrelease"]["spec"]["values"]["image"]["tag"]
    assert out.xr["status"]["deploy"]["version"] == "6.3.0" and "blockedBy" not in out.xr["status"]
    assert before["flux-ocirepository"]["spec"]["ref"] == seen["flux-ocirepository"]["spec"]["ref"]


def test_kustomize_patches_are_held_too() -> None:
    xr, policy = load("examples/xr-kustomize.yaml")
    obs = observed("kustomize")
    next(o for o in obs if o["kind"] == "Kustomization")["spec"]["patches"][0]["patch"] = (
        "observed patch"
    )
    xr["spec"]["component"]["version"] = "6.3.0"
    got = by_key(run(xr, policy, observed=obs))
    seen = {o["metadata"]["annotations"][KEY]: o for o in obs}
    assert (
        got["flux-kustomization"]["spec"]["patches"]
        == seen["flux-kustomization"]["spec"]["patches"]
    )
    assert got["flux-kustomization"]["spec"]["patches"][0]["patch"] == "observed patch"
    assert got["flux-ocirepository"]["spec"]["ref"] == seen["flux-ocirepository"]["spec"]["ref"]


def test_a_component_that_is_not_ready_holds_new_values_at_the_same_version() -> None:
    """E.g. its signature no longer verifies: nothing new reaches Flux, not even values."""
    xr, policy = load()
    obs = observed()
    next(o for o in obs if o["kind"] == "HelmRelease")["spec"]["values"]["image"]["tag"] = (
        "observed-tag"
    )
    component(obs)["status"]["conditions"][0].update(
        status="False", reason="VerificationFailed", message="signature mismatch"
    )
    out = run(xr, policy, observed=obs)
    seen = {o["metadata"]["annotations"][KEY]: o for o in obs}
    assert (
        by_key(out)["flux-helmrelease"]["spec"]["values"]
        == seen["flux-helmrelease"]["spec"]["values"]
    )
    blocked = out.xr["status"]["blockedBy"]
    assert (blocked["kind"], blocked["reason"]) == ("Component", "VerificationFailed")


def test_a_flux_object_not_yet_observed_is_not_created_while_the_gate_is_closed() -> None:
    xr, policy = load()
    xr["spec"]["component"]["version"] = "6.3.0"
    got = by_key(run(xr, policy, observed=without(observed(), "flux-helmrelease")))
    assert "flux-ocirepository" in got and "flux-helmrelease" not in got


# --------------------------------------------------------------------------- versions the controller accepts


@pytest.mark.parametrize(
    "version, ok",
    [
        ("6.2.0", True),
        ("v6.2.0", True),
        ("6.2", True),
        ("1.0.0-rc.1+build.5", True),
        ("2024.01.05", True),
        ("latest", False),
        ("1.2.3.4", False),
        ("1.0.0-01", False),
        ("", False),
        ("6.2.0 ", False),
        ("99999999999999999999.0.0", False),
        ("main-3f2a", False),
    ],
)
def test_versions_the_ocm_controller_reads_as_one_version(version: str, ok: bool) -> None:
    assert gates.controller_accepts(version) is ok


def test_a_version_the_controller_refuses_is_a_fatal_at_admission() -> None:
    xr, policy = load()
    xr["spec"]["component"]["version"] = "latest"
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and out.fatal.reason == "InvalidClaim"
    assert out.fatal.message.startswith(
        "spec.component.version: 'latest' is neither a semantic version nor a version range"
    )
    assert "terminal error" in out.fatal.message
    policy["ocm"] = {"enabled": False}  # no OCM controller involved: the tag is looked up as usual
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and "OCM controller" not in out.fatal.message


# --------------------------------------------------------------------------- verification


@pytest.fixture(scope="module")
def component_schema(crds_dir: Path) -> Validator:
    return Validator([crds_dir / "delivery.ocm.software_components.yaml"], set())


def signed(tmp_path: Path, policy: dict[str, Any]) -> dict[str, Any]:
    """``policy`` reading a copy of the example component signed as ``acme`` (the function
    verifies every policy signature itself before composing anything).
    """
    ctf = with_descriptor(tmp_path / "ctf", lambda d: sign(d))
    policy["mirrors"] = [{**policy["mirrors"][0], "path": str(ctf)}]
    return policy


def test_the_policy_makes_the_component_verify_signatures(
    component_schema: Validator, tmp_path: Path
) -> None:
    xr, policy = load()
    policy = signed(tmp_path, policy)
    policy["ocm"] = {"verify": [{"signature": "acme", "publicKey": public_pem()}]}
    comp = by_key(run(xr, policy, observed=observed()))["ocm-component"]
    assert comp["spec"]["verify"] == [
        {"signature": "acme", "value": base64.b64encode(public_pem().encode()).decode()},
    ]
    assert (
        base64.b64decode(comp["spec"]["verify"][0]["value"]).decode() == public_pem()
    )  # the controller decodes it
    assert component_schema.problems(comp) == []


def test_the_gate_opens_only_for_a_component_that_verifies(tmp_path: Path) -> None:
    xr, policy = load()
    policy = signed(tmp_path, policy)
    policy["ocm"] = {"verify": [{"signature": "acme", "publicKey": public_pem()}]}
    obs = observed()  # Ready at the version, but reconciled without verify
    out = run(xr, policy, observed=without(obs, "flux-helmrelease", "flux-ocirepository"))
    assert "flux-helmrelease" not in by_key(out)
    assert "does not verify signature(s) acme" in out.xr["status"]["blockedBy"]["message"]
    held = run(xr, policy, observed=obs)
    assert (
        held.xr["status"]["blockedBy"]["reason"] == "WaitingForOCMComponent"
    )  # observed Flux held

    verified = copy.deepcopy(obs)
    comp = component(verified)
    comp["spec"]["verify"] = by_key(out)["ocm-component"]["spec"]["verify"]
    comp["metadata"]["generation"] = 2
    out = run(xr, policy, observed=without(verified, "flux-helmrelease", "flux-ocirepository"))
    assert "flux-helmrelease" not in by_key(out), (
        "Ready is from generation 1, before verify was set"
    )
    assert "has not reconciled its current spec" in out.xr["status"]["blockedBy"]["message"]
    comp["status"]["observedGeneration"] = 2
    out = run(xr, policy, observed=without(verified, "flux-helmrelease", "flux-ocirepository"))
    assert "flux-helmrelease" in by_key(out)


def test_verification_needs_neither_the_gate_nor_ocm_objects(tmp_path: Path) -> None:
    """The function verifies the signatures itself: ``verify`` is valid without the gate and
    without OCM objects (issue 32: a platform without the OCM controller deploys only signed
    components; tests/test_integrity_signatures.py).
    """
    xr, policy = load()
    policy = signed(tmp_path, policy)
    for ocm in ({"gate": False}, {"enabled": False}):
        policy["ocm"] = {**ocm, "verify": [{"signature": "acme", "publicKey": public_pem()}]}
        run(xr, policy)
        policy["ocm"]["verify"][0]["publicKey"] = public_pem("mallory")
        out = asyncio.run(render(xr, policy))
        assert out.fatal is not None and out.fatal.reason == "SignatureVerificationFailed"


@pytest.mark.parametrize(
    "ocm, text",
    [
        ({"verify": [{"signature": "a"}]}, "signature 'a': set publicKey"),
        (
            {"verify": [{"signature": "a", "publicKey": PEM, "secretRef": {"name": "k"}}]},
            "secretRef is not supported",
        ),
        ({"verify": [{"signature": "a", "publicKey": "c2VjcmV0"}]}, "must be PEM"),
        (
            {"verify": [{"signature": "a", "secretRef": {"name": "ops-keys"}}]},
            "public keys are not secret, give it as publicKey",
        ),
        (
            {
                "verify": [
                    {"signature": "a", "publicKey": PEM},
                    {"signature": "a", "publicKey": PEM},
                ]
            },
            "twice",
        ),
    ],
)
def test_bad_verify_policy_is_one_clear_error(ocm: dict[str, Any], text: str) -> None:
    xr, policy = load()
    policy["ocm"] = ocm
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and out.fatal.reason == "InvalidFunctionInput", out.fatal
    assert out.fatal.message.startswith("input.ocm") and text in out.fatal.message, (
        out.fatal.message
    )
    assert len(out.results) == 1
