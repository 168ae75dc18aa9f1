"""The function refuses ConfigData that would deploy an invalid or unlocalized image, by default.

The OCM CLI fixture component ships the ConfigData that observed.md item 12 saw deploy
``upstream/podinfo:sha256:…``: its Helm rule writes ``repository`` (no registry) and ``tag``.
By default that is one Fatal naming the rule and the policy switch; with
``configData.imagePairs: Warning`` it composes with a Warning. Its Kustomize rule is an
``image`` rule, so the Kustomize deployable of the same component composes either way: a
defect counts only where the substitution is applied.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import yaml
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support.settle import converge

from function.edge.render import claim_to_xr, input_from_composition, load_docs, render

REPO = Path(__file__).resolve().parents[1]
DIGEST = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"


def setup(fixtures_dir: Path, xr_file: str = "examples/xr.yaml"):
    xr = claim_to_xr(load_docs([REPO / xr_file])[0])
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    policy["mirrors"] = [
        {"repository": "oci::http://127.0.0.1:5000/source", "path": str(fixtures_dir / "ctf")}
    ]
    policy["ocm"] = {"enabled": True, "gate": False}
    return xr, policy


def test_fixture_helm_configdata_is_fatal_by_default(fixtures_dir):
    xr, policy = setup(fixtures_dir)
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and out.resources == []  # nothing composed, nothing applied
    assert out.fatal.reason == "InvalidImageReference"
    msg = out.fatal.message
    assert msg.startswith(
        "ConfigData (resource config) localization[1].repository (file values.yaml): "
    )
    assert "without its registry '127.0.0.1:5000'" in msg and "fullyQualifiedRepository" in msg
    assert "configData.imagePairs: Warning" in msg


def test_ops_can_downgrade_to_a_warning(fixtures_dir):
    xr, policy = setup(fixtures_dir)
    policy["configData"] = {"imagePairs": "Warning"}
    renders, _ = asyncio.run(converge(xr, policy))  # the HelmRelease follows its Namespaces
    out = renders[-1]
    assert out.fatal is None
    # Sent as an event once (the first reconcile); kept in status.warnings from then on.
    warnings = [w["message"] for w in out.xr["status"]["warnings"]]
    assert any(
        w.startswith("ConfigData (resource config) localization[1].repository (file values.yaml): ")
        for w in warnings
    ), warnings
    renders, _ = asyncio.run(converge(xr, policy))  # the Flux objects follow their Namespaces
    (hr,) = [r for r in renders[-1].resources if r["kind"] == "HelmRelease"]
    assert hr["spec"]["values"]["image"] == {
        "repository": "upstream/podinfo",
        "tag": f"6.2.0@{DIGEST}",
    }


def test_the_kustomize_deployable_of_the_same_component_composes(fixtures_dir):
    xr, policy = setup(fixtures_dir, "examples/xr-kustomize.yaml")
    out = asyncio.run(render(xr, policy))
    assert out.fatal is None, out.fatal.message if out.fatal else ""
    assert not [
        r
        for r in out.results
        if r.severity == fnv1.SEVERITY_WARNING and "localization" in r.message
    ]


def test_an_unknown_switch_value_is_an_input_error(fixtures_dir):
    xr, policy = setup(fixtures_dir)
    policy["configData"] = {"imagePairs": "Sometimes"}
    out = asyncio.run(render(xr, policy))
    assert out.fatal is not None and out.fatal.reason == "InvalidFunctionInput"
    assert "configData.imagePairs" in out.fatal.message


def test_sack8s_render_says_the_same(fixtures_dir, tmp_path):
    _, policy = setup(fixtures_dir)
    (tmp_path / "input.yaml").write_text(yaml.safe_dump(policy))
    exe = Path(sys.executable).with_name("sack8s")
    p = subprocess.run(
        [str(exe), "render", "examples/xr.yaml", "--input", str(tmp_path / "input.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 1 and p.stdout == ""
    assert (
        "localization[1].repository (file values.yaml)" in p.stderr
        and "configData.imagePairs" in p.stderr
    )
