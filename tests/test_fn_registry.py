"""RunFunction end to end against a real registry serving what the real OCM CLI wrote.

Given only an XR, a policy and credentials, the function renders Flux objects whose chart,
manifests and images point at the locations the OCM CLI wrote, in each transfer mode; a
second reconcile in the same process makes no registry call; a registry fault on a later
reconcile is one Fatal and leaves the desired state untouched.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support.faultproxy import MARKER
from support.oci_env import (
    PASSWORD,
    USER,
    basic_auth_registry,
    fault_proxy,
    fixture_registry,
    htpasswd_file,
    proxy,
)
from support.settle import converge
from test_soak import namespaces_required

from function.cache import Cache
from function.edge.fn import FunctionRunner
from function.edge.render import input_from_composition, load_docs, render
from function.edge.sources import SourceFactory

pytestmark = pytest.mark.registry

REPO = Path(__file__).resolve().parents[1]
CHART = "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
IMAGE = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
DESCRIPTOR_MANIFESTS = {
    "source": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095",
    "by-ref": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095",
    "copied-default": "sha256:65f37a0f9d1fdf139672b0202ec7c55d516779b4aa7cceb268a98aa22a3d3476",
    "copied-oci": "sha256:76d8802cd5c18997b1e3e1a726a359d6163b0a4c8e58a1178c1a5ab18467525f",
}


def localized_image(mode: str, repo: str) -> str:
    """packaging.md §2, per transfer mode (the descriptors embed the registry the CLI wrote to)."""
    return {
        "source": f"127.0.0.1:5000/upstream/podinfo:6.2.0@{IMAGE}",
        "by-ref": f"127.0.0.1:5000/upstream/podinfo:6.2.0@{IMAGE}",
        "copied-default": f"{repo}@{IMAGE}",
        "copied-oci": f"127.0.0.1:5000/copied-oci/upstream/podinfo:6.2.0@{IMAGE}",
    }[mode]


def setup(
    host: str, mode: str, xr_file: str = "examples/xr.yaml"
) -> tuple[dict[str, Any], dict[str, Any]]:
    xr = load_docs([REPO / xr_file])[0]
    xr["spec"]["component"]["repository"] = f"oci::http://{host}/{mode}"
    xr["spec"]["component"]["version"] = "6.2.0"
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    policy["registries"] = [{"host": host, "plainHTTP": True}]
    # Images stay where the fixture's descriptors name them (127.0.0.1:5000) unless copied by value.
    policy["imageRegistries"] = [
        {"host": host, "pullCredential": True},
        {"host": "127.0.0.1:5000", "pullCredential": True},
    ]
    policy["mirrors"] = []
    policy["ocm"] = {"enabled": True, "gate": False}
    # The fixture registry's components carry the OCM CLI fixtures' ConfigData, whose Helm rule
    # writes `repository` without the registry: refused by default (tests/test_image_pairs_policy.py);
    # these tests are about reading registries, so they take the downgrade.
    policy["configData"] = {"imagePairs": "Warning"}
    return xr, policy


def keyed(out) -> dict[str, dict[str, Any]]:
    return {
        r["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: r
        for r in out.resources
    }


def runner() -> FunctionRunner:
    return FunctionRunner(sources=SourceFactory(cache=Cache()))


def settled(xr: dict[str, Any], policy: dict[str, Any], **kw: Any):
    """The render once every composed object exists (Namespaces first, then the rest, then Flux)."""
    renders, _ = asyncio.run(converge(xr, policy, runner=runner(), **kw))
    return renders[-1]


@pytest.mark.parametrize("mode", sorted(DESCRIPTOR_MANIFESTS))
def test_helm_in_every_transfer_mode(fixture_registry, mode: str) -> None:
    xr, policy = setup(fixture_registry.host, mode)
    out = settled(xr, policy)
    assert out.fatal is None, out.fatal.message
    repo = f"{fixture_registry.host}/{mode}/component-descriptors/acme.org/sack8s/podinfo"
    got = keyed(out)
    src = got["flux-ocirepository"]["spec"]
    assert src["url"] == f"oci://{repo}" and src["ref"] == {"digest": CHART}
    assert (
        src["layerSelector"]["mediaType"] == "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
    )
    status = out.xr["status"]
    assert status["component"]["descriptorDigest"] == DESCRIPTOR_MANIFESTS[mode]
    assert status["images"] == [{"resource": "image", "reference": localized_image(mode, repo)}]
    values = got["flux-helmrelease"]["spec"]["values"]
    # the fixture ConfigData's tag rule: TAG@digest in every mode (copied-default: the referenceName tag)
    assert values["image"]["tag"] == f"6.2.0@{IMAGE}"
    # the downgraded defect: sent once, then kept in status (issue 19: warnings once)
    listed = [w.get("message", "") for w in out.xr["status"].get("warnings") or []]
    assert any("localization[1].repository" in m for m in [r.message for r in out.results] + listed)


@pytest.mark.parametrize("mode", sorted(DESCRIPTOR_MANIFESTS))
def test_kustomize_in_every_transfer_mode(fixture_registry, mode: str) -> None:
    xr, policy = setup(fixture_registry.host, mode, "examples/xr-kustomize.yaml")
    out = settled(xr, policy)
    assert out.fatal is None, out.fatal.message
    repo = f"{fixture_registry.host}/{mode}/component-descriptors/acme.org/sack8s/podinfo"
    got = keyed(out)
    src = got["flux-ocirepository"]["spec"]
    assert src["ref"] == {"digest": DESCRIPTOR_MANIFESTS[mode]}
    assert src["layerSelector"] == {"mediaType": "application/x-tar+gzip", "operation": "extract"}
    patches = json.dumps(got["flux-kustomization"]["spec"]["patches"])
    # The fixture's `image` rule receives the full reference; with a digest the tag is dropped.
    name, digest = localized_image(mode, repo).split("@")
    last = name.rsplit("/", 1)
    untagged = last[0] + "/" + last[1].split(":")[0] if len(last) == 2 else name
    assert f"{untagged}@{digest}" in patches


@pytest.mark.parametrize(
    "constraint,expected",
    [(">=6.2.0", "6.3.0"), ("<6.3.0", "6.2.0"), ("~6.2", "6.2.0"), ("^6", "6.3.0")],
)
def test_version_ranges(fixture_registry, constraint: str, expected: str) -> None:
    xr, policy = setup(fixture_registry.host, "source")
    xr["spec"]["component"]["version"] = constraint
    out = asyncio.run(render(xr, policy, runner=runner()))
    assert out.fatal is None, out.fatal.message
    assert out.xr["status"]["component"]["version"] == expected


def test_resolved_version_is_sticky_and_never_moves_back(fixture_registry) -> None:
    xr, policy = setup(fixture_registry.host, "source")
    xr["spec"]["component"]["version"] = ">=6.2.0"
    status = {
        "component": {
            "name": "acme.org/sack8s/podinfo",
            "constraint": ">=6.2.0",
            "repository": xr["spec"]["component"]["repository"],
            "version": "6.3.0",
        }
    }
    xr["status"] = status
    out = asyncio.run(render(xr, policy, runner=runner()))
    assert out.xr["status"]["component"]["version"] == "6.3.0"
    # A newer match moves it forward; a constraint change re-resolves.
    xr["status"]["component"]["version"] = "6.2.0"
    assert (
        asyncio.run(render(xr, policy, runner=runner())).xr["status"]["component"]["version"]
        == "6.3.0"
    )
    xr["spec"]["component"]["version"] = "<6.3.0"
    xr["status"]["component"]["version"] = "6.3.0"
    assert (
        asyncio.run(render(xr, policy, runner=runner())).xr["status"]["component"]["version"]
        == "6.2.0"
    )


def test_second_reconcile_in_the_same_process_makes_no_registry_call(proxy) -> None:
    xr, policy = setup(proxy.host, "source")
    r = runner()
    first = asyncio.run(render(copy.deepcopy(xr), policy, runner=r))
    assert first.fatal is None, first.fatal.message
    assert len(proxy.requests) > 0
    proxy.requests.clear()
    second = asyncio.run(render(copy.deepcopy(xr), policy, runner=r))
    assert proxy.requests == []
    assert second.yaml() == first.yaml()


def test_range_rereads_only_the_tag_list_after_its_ttl(proxy) -> None:
    now = [0.0]
    r = FunctionRunner(sources=SourceFactory(cache=Cache(ttl=60, clock=lambda: now[0])))
    xr, policy = setup(proxy.host, "source")
    xr["spec"]["component"]["version"] = ">=6.2.0"
    asyncio.run(render(copy.deepcopy(xr), policy, runner=r))
    proxy.requests.clear()
    now[0] += 61
    asyncio.run(render(copy.deepcopy(xr), policy, runner=r))
    paths = [s.path for s in proxy.requests]
    assert paths and all("/tags/list" in p or "/manifests/6.3.0" in p for p in paths), paths


def test_registry_fault_on_a_later_reconcile_is_one_fatal_and_keeps_desired(proxy) -> None:
    xr, policy = setup(proxy.host, "source")
    first = settled(copy.deepcopy(xr), policy)
    assert first.fatal is None
    # A new replica (cold cache) reconciles while the registry answers 500.
    proxy.fault("500")
    req = fnv1.RunFunctionRequest()
    resource.update(req.observed.composite, xr)
    req.input.update(policy)
    for k in ("flux-helmrelease", "namespace-podinfo"):
        obj = next(
            o
            for o in first.resources
            if o["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == k
        )
        resource.update(req.observed.resources[k], obj)
        resource.update(req.desired.resources[k], obj)  # what an earlier pipeline step passed on
    for name in namespaces_required(xr, policy):  # targets and the deploy namespace: absent
        req.required_resources[f"namespace-{name}"].CopyFrom(fnv1.Resources())
    rsp = asyncio.run(runner().RunFunction(req, None))
    fatals = [x for x in rsp.results if x.severity == fnv1.SEVERITY_FATAL]
    assert len(fatals) == 1
    msg = fatals[0].message
    assert "acme.org/sack8s/podinfo" in msg and proxy.host in msg
    assert MARKER not in msg
    assert sorted(rsp.desired.resources) == ["flux-helmrelease", "namespace-podinfo"]
    assert rsp.desired == req.desired


def _credentials(username: str, password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "registry-creds"},
        "data": {
            "username": base64.b64encode(username.encode()).decode(),
            "password": base64.b64encode(password.encode()).decode(),
        },
    }


def test_basic_auth_with_pipeline_credentials(basic_auth_registry) -> None:
    xr, policy = setup(basic_auth_registry.host, "copied-default")
    policy["registries"][0]["credentials"] = "registry-creds"
    out = asyncio.run(
        render(xr, policy, credentials=[_credentials(USER, PASSWORD)], runner=runner())
    )
    assert out.fatal is None, out.fatal.message
    assert (
        out.xr["status"]["component"]["descriptorDigest"] == DESCRIPTOR_MANIFESTS["copied-default"]
    )
    bad = asyncio.run(
        render(xr, policy, credentials=[_credentials(USER, "wrong-" + PASSWORD)], runner=runner())
    )
    assert bad.fatal is not None
    assert "401" in bad.fatal.message or "unauthorized" in bad.fatal.message.lower()
    assert PASSWORD not in bad.fatal.message and "wrong-" not in bad.fatal.message
    anon = asyncio.run(
        render(
            xr,
            {**policy, "registries": [{"host": basic_auth_registry.host, "plainHTTP": True}]},
            runner=runner(),
        )
    )
    assert anon.fatal is not None and PASSWORD not in anon.fatal.message


def test_missing_credentials_entry_is_named(basic_auth_registry) -> None:
    xr, policy = setup(basic_auth_registry.host, "source")
    policy["registries"][0]["credentials"] = "absent"
    out = asyncio.run(render(xr, policy, runner=runner()))
    assert out.fatal is not None and "'absent'" in out.fatal.message
