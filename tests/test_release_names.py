"""Readable Helm release names (issue 34): the claim's name where no other claim can install a
release of that name into the same namespace, ``spec.deploy.releaseName`` where a team keeps an
earlier release, the hash where neither is safe (docs/security.md, "Helm release names")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis_profiles import as_claim, example, observed_helm
from pydantic import ValidationError

from function.api.claim import Deployable
from function.compose import names
from function.compose.identity import Identity
from function.compose.objectnames import ObjectNames
from function.edge.render import render

HASHED_XR_RELEASE = "podinfo-obgz2gquadlvchpzhw4h"  # the bundled XR (no claim): unchanged


def run(xr: dict[str, Any], policy: dict[str, Any], required: list[dict[str, Any]] = ()):
    return asyncio.run(render(xr, policy, observed=observed_helm(), required=list(required)))


def release_of(out) -> dict[str, Any]:
    assert out.fatal is None, out.fatal.message
    (hr,) = [r for r in out.resources if r["kind"] == "HelmRelease"]
    return hr


def namespace(name: str, tenant: str | None = None) -> dict[str, Any]:
    labels = {"sack8s.io/tenant": tenant} if tenant else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_a_claim_release_is_the_claim_name():
    xr, policy = example()
    hr = release_of(run(as_claim(xr), policy))
    assert hr["spec"]["releaseName"] == "podinfo"
    assert hr["spec"]["targetNamespace"] == "team-a--podinfo"
    assert hr["spec"]["storageNamespace"].startswith("sack8s-team-a-podinfo-")
    assert hr["metadata"]["labels"][names.LABEL_RELEASE] == names.release_label(
        "team-a--podinfo", "podinfo"
    )
    assert hr["metadata"]["name"] != "podinfo"  # the Flux object keeps its hashed name


def test_shared_deploy_namespace_keeps_helm_storage_in_the_target():
    xr, policy = example()
    policy["deployNamespace"] = {"shared": "sack8s-deploy"}
    hr = release_of(run(as_claim(xr), policy, [namespace("sack8s-deploy")]))
    assert hr["spec"]["releaseName"] == "podinfo"
    assert hr["spec"]["storageNamespace"] == hr["spec"]["targetNamespace"] == "team-a--podinfo"


def test_an_xr_without_a_claim_keeps_the_hash():
    xr, policy = example()
    assert release_of(run(xr, policy))["spec"]["releaseName"] == HASHED_XR_RELEASE


def test_a_release_into_the_claims_own_namespace_keeps_the_hash():
    xr, policy = example()
    xr = as_claim(xr)
    xr["spec"]["namespaces"] = [{"name": "team-a", "mode": "existing"}]
    hr = release_of(run(xr, policy, [namespace("team-a")]))
    name = hr["spec"]["releaseName"]
    assert name != "podinfo" and name.startswith("podinfo-") and len(name) <= 53


def test_a_claim_name_that_is_no_short_dns_label_is_hashed():
    xr, policy = example()
    long = "svc-" + "x" * 60
    hr = release_of(run(as_claim(xr, name=long), policy))
    name = hr["spec"]["releaseName"]
    assert len(name) <= 53 and name != long and name.startswith("svc-xxx")
    hr = release_of(run(as_claim(example()[0], name="web.v2"), policy))
    assert hr["spec"]["releaseName"] != "web.v2"  # a subdomain, no DNS label


def test_a_chosen_release_name_is_used_and_labelled():
    xr, policy = example()
    xr = as_claim(xr)
    xr["spec"]["deploy"]["releaseName"] = "podinfo-v1"
    hr = release_of(run(xr, policy))
    assert hr["spec"]["releaseName"] == "podinfo-v1"
    assert hr["metadata"]["labels"][names.LABEL_RELEASE] == names.release_label(
        "team-a--podinfo", "podinfo-v1"
    )


def _other_release(label: str, owner: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {
            "name": "web-abc",
            "namespace": "sack8s-team-a-web-xyz",
            "labels": {names.LABEL_RELEASE: label, names.LABEL_OWNER: "someone"},
            "annotations": {
                names.ANNOTATION_CLAIM_NAMESPACE: owner[0],
                names.ANNOTATION_CLAIM_NAME: owner[1],
            },
        },
    }


def test_a_chosen_name_another_claim_installs_there_is_one_fatal():
    xr, policy = example()
    xr = as_claim(xr)
    xr["spec"]["deploy"]["releaseName"] = "web"
    other = _other_release(names.release_label("team-a--podinfo", "web"), ("team-a", "web"))
    out = run(xr, policy, [other])
    assert out.fatal is not None and not out.resources
    msg = out.fatal.message
    assert "spec.deploy.releaseName" in msg and "team-a/web" in msg
    assert "sack8s-team-a-web-xyz/web-abc" in msg
    # the same name into another namespace is another release
    other = _other_release(names.release_label("team-a--other", "web"), ("team-a", "web"))
    assert release_of(run(xr, policy, [other]))["spec"]["releaseName"] == "web"


def test_a_chosen_name_finds_its_own_release_and_goes_on():
    xr, policy = example()
    xr = as_claim(xr)
    xr["spec"]["deploy"]["releaseName"] = "web"
    first = release_of(run(xr, policy))
    again = release_of(run(xr, policy, [first]))
    assert again["spec"]["releaseName"] == "web"


def test_a_chosen_name_into_the_claims_own_namespace_is_refused():
    xr, policy = example()
    xr = as_claim(xr)
    xr["spec"]["namespaces"] = [{"name": "team-a", "mode": "existing"}]
    xr["spec"]["deploy"]["releaseName"] = "podinfo"
    out = run(xr, policy, [namespace("team-a")])
    assert out.fatal is not None and not out.resources
    assert "spec.deploy.releaseName" in out.fatal.message
    assert "claim's own namespace" in out.fatal.message


def test_a_chosen_name_for_kustomize_is_refused():
    xr, policy = example()
    xr = as_claim(xr)
    xr["spec"]["deploy"] = {"resource": {"name": "manifests-gz"}, "releaseName": "web"}
    out = run(xr, policy)
    assert out.fatal is not None
    assert "spec.deploy.releaseName" in out.fatal.message and "Kustomize" in out.fatal.message


@pytest.mark.parametrize("bad", ["Web", "web_1", "-web", "w" * 54, ""])
def test_release_name_field_is_a_dns_label_of_at_most_53(bad):
    with pytest.raises(ValidationError):
        Deployable.model_validate({"resource": {"name": "chart"}, "releaseName": bad})
    assert Deployable.model_validate({"resource": {"name": "chart"}, "releaseName": "w" * 53})


def test_default_names_never_share_a_release_in_a_namespace():
    """The argument of docs/security.md, exhaustively over a small world: a namespace is reached
    by its own claims (home) or by the one tenant its label names; two identities reaching one
    target namespace never get the same default release name there."""
    tenants = ["t", "t--x", "u", "v"]
    labels = {"t": None, "t--x": "t", "u": "t", "v": "v", "w": "u"}  # namespace -> tenant label
    claim_names = ["a", "t", "t--x", "x"]
    ids = [
        Identity(ns, n, f"{n}-xr", is_claim=True, tenant=ns) for ns in tenants for n in claim_names
    ]
    ids += [Identity("", n, n, is_claim=False, tenant=t) for n in claim_names for t in tenants]

    def reaches(i: Identity, target: str) -> bool:
        return (i.is_claim and target == i.namespace) or labels.get(target) == i.tenant

    for target in labels:
        installed: dict[str, Identity] = {}
        for i in ids:
            if not reaches(i, target):
                continue
            name = ObjectNames(i).release(target)
            assert len(name) <= 53
            assert name not in installed, (target, name, installed.get(name), i)
            installed[name] = i
    # and the readable form is what most claims get
    assert ObjectNames(ids[0]).release("u") == "a"
