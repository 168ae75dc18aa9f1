"""sack8s inspect, as a service team runs it: on the bundled CTF and on a real registry."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import example_component
from support.oci_env import COMPONENT, fixture_registry

from function.cli import main

REPO = Path(__file__).resolve().parents[1]
CTF = REPO / "examples" / "component" / "ctf"
# examples/component/make-component.py rebuilds the CTF (and so this digest) when its inputs change
CONFIGDATA_DIGEST = example_component.version().resources["config"]["digest"]["value"]
# the OCM CLI fixtures' ConfigData, in the fixture registry's components
FIXTURE_CONFIGDATA_DIGEST = "29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def inspect_json(*args: str) -> dict:
    r = run("inspect", "--json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def error_line(r, code: int = 1) -> str:
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("sack8s: error: ")
    return lines[0]


def test_bundled_ctf_text_report():
    r = run("inspect", str(CTF))  # one component in the CTF: no //NAME needed
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert f"component   {COMPONENT} (provider acme.org)" in out
    assert "versions    6.3.0, 6.2.0" in out
    assert "version     6.3.0 (the highest version)" in out
    assert "resources (5)" in out
    # every resource with version, type, access, digest and pinning
    assert "  chart  6.3.0  helmChart  (local)" in out
    assert (
        # gardener-ocm's model (make-component.py) spells the access type ociRegistry, the
        # legacy name of ociArtifact
        "    access     ociRegistry http://127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:11342fe5"
        in out
    )
    assert "    pinned     yes: by the reference's digest" in out
    assert "    pulls      127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:11342fe5" in out
    assert f"    digest     SHA-256 genericBlobDigest/v1 {CONFIGDATA_DIGEST}" in out
    assert "    files      Chart.yaml, templates/deployment.yaml, values.yaml" in out
    # the ConfigData's rules, grouped by file, with the deployables that hold the file
    assert "ConfigData (resource config)" in out
    assert "  values.yaml  (in chart)" in out
    assert "  deployment.yaml  (in manifests, manifests-gz)" in out
    block = out[out.index("  deployment.yaml  (in") :]
    assert "configuration.rules[0]  spec.replicas" in block.split("\n  values.yaml")[0]
    assert "    replicas  (integer, default 1, minimum 0)" in out  # limits shown (issue 34)


def test_range_resolves_and_json_report():
    rep = inspect_json(f"ctf::{CTF}//{COMPONENT}", "--version", ">=6.2 <6.3")
    assert rep["versions"] == ["6.3.0", "6.2.0"]
    assert rep["version"] == "6.2.0" and rep["resolvedBy"] == "constraint '>=6.2 <6.3'"
    by_name = {r["name"]: r for r in rep["resources"]}
    assert set(by_name) == {"image", "chart", "manifests", "manifests-gz", "config"}
    assert all(r["pinned"] for r in rep["resources"])
    assert by_name["config"]["digest"]["value"] == CONFIGDATA_DIGEST
    assert by_name["chart"]["version"] == "6.2.0"
    files = {f["file"]: f for f in rep["configData"][0]["files"]}
    assert files["values.yaml"]["in"] == ["chart"]
    assert files["configmap.yaml"]["in"] == ["manifests", "manifests-gz"]
    assert [x["rule"] for x in files["values.yaml"]["rules"]] == [
        "localization[1].fullyQualifiedRepository",
        "localization[1].tag",
        "configuration.rules[2]",
        "configuration.rules[3]",
    ]
    text = run("inspect", f"ctf::{CTF}//{COMPONENT}", "--version", ">=6.2 <6.3").stdout
    assert "version     6.2.0 (what constraint '>=6.2 <6.3' resolves to)" in text


def test_report_is_deterministic():
    assert run("inspect", str(CTF)).stdout == run("inspect", str(CTF)).stdout


def test_a_tag_without_digest_is_reported_unpinned(tmp_path):
    d = tmp_path / "comp"
    d.mkdir()
    (d / "component-descriptor.yaml").write_text(
        "meta: {schemaVersion: v2}\n"
        "component:\n  name: acme.org/x\n  version: 1.0.0\n  provider: acme\n  repositoryContexts: []\n"
        "  resources:\n  - name: image\n    version: 1.0.0\n    type: ociImage\n    relation: external\n"
        "    access: {type: ociArtifact, imageReference: 'ghcr.io/acme/x:1.0.0'}\n"
    )
    rep = inspect_json(str(d))
    (image,) = rep["resources"]
    assert image["pinned"] is False and "no digest" in image["by"]
    assert image["reference"] == "ghcr.io/acme/x:1.0.0"
    assert "pinned     NO: refused:" in run("inspect", str(d)).stdout


def test_extract_chart_manifests_and_configdata(tmp_path):
    r = run("inspect", str(CTF), "--version", "6.2.0", "--extract", "chart", "-o", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in r.stdout.split()) == [
        "chart/Chart.yaml",
        "chart/templates/deployment.yaml",
        "chart/values.yaml",
    ]
    assert "image:" in (tmp_path / "chart" / "values.yaml").read_text()

    r = run("inspect", str(CTF), "--extract", "manifests-gz", "-o", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    assert "kind: Deployment" in (tmp_path / "manifests-gz" / "deployment.yaml").read_text()

    r = run("inspect", str(CTF), "--extract", "config", "-o", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    data = (tmp_path / "config.yaml").read_bytes()
    assert (
        hashlib.sha256(data).hexdigest() == CONFIGDATA_DIGEST
    )  # the ConfigData file, byte for byte
    assert r.stdout.strip() == str(tmp_path / "config.yaml")


def test_extract_refuses_to_overwrite_and_images(tmp_path):
    assert run("inspect", str(CTF), "--extract", "config", "-o", str(tmp_path)).exit_code == 0
    line = error_line(run("inspect", str(CTF), "--extract", "config", "-o", str(tmp_path)))
    assert "config.yaml exists" in line and "--force" in line
    assert (
        run("inspect", str(CTF), "--extract", "config", "-o", str(tmp_path), "--force").exit_code
        == 0
    )
    line = error_line(run("inspect", str(CTF), "--extract", "image", "-o", str(tmp_path)))
    assert "is an OCI artifact, not a file" in line
    line = error_line(run("inspect", str(CTF), "--extract", "nope", "-o", str(tmp_path)))
    assert "no resource with identity {name=nope}" in line and "resource chart" in line


def test_missing_directory_says_it_does_not_exist(tmp_path):
    missing = tmp_path / "no-such-ctf"
    assert f"{missing} does not exist" in error_line(run("inspect", str(missing)))
    assert f"{missing} does not exist" in error_line(run("inspect", f"ctf::{missing}//{COMPONENT}"))
    # a relative path that is not there is not taken for a registry called "examples"
    line = error_line(run("inspect", "examples/component/no-such-ctf"))
    assert "examples/component/no-such-ctf does not exist" in line


def test_wrong_component_names_the_components_there():
    line = error_line(run("inspect", f"{CTF}//acme.org/sack8s/podinfoo"))
    assert "component acme.org/sack8s/podinfoo: not found" in line
    assert f"it holds: {COMPONENT}" in line


def test_ctf_with_several_components_lists_them(tmp_path):
    ctf = tmp_path / "ctf"
    shutil.copytree(CTF, ctf)
    index = json.loads((ctf / "artifact-index.json").read_text())
    index["artifacts"] += [
        dict(a, repository="component-descriptors/acme.org/other") for a in index["artifacts"]
    ]
    (ctf / "artifact-index.json").write_text(json.dumps(index))
    line = error_line(run("inspect", str(ctf)))
    assert "name the component" in line and f"it holds: acme.org/other, {COMPONENT}" in line


def test_missing_version_lists_the_versions():
    line = error_line(run("inspect", f"{CTF}//{COMPONENT}:6.4.0"))
    assert "version '6.4.0' not found (versions there: 6.3.0, 6.2.0)" in line
    line = error_line(run("inspect", str(CTF), "--version", ">=7"))
    assert "no version satisfies '>=7' (available: 6.3.0, 6.2.0)" in line


def test_version_twice_is_a_usage_error():
    r = run("inspect", f"{CTF}//{COMPONENT}:6.2.0", "--version", "6.2.0")
    assert r.exit_code == 2 and "not both" in r.stderr


@pytest.mark.registry
def test_registry_versions_range_and_configdata(fixture_registry):
    source = f"oci::http://{fixture_registry.host}/source//{COMPONENT}"
    rep = inspect_json(source, "--version", ">=6.2 <7")
    assert rep["versions"] == ["6.3.0", "6.2.0"] and rep["version"] == "6.3.0"
    assert rep["resolvedBy"] == "constraint '>=6.2 <7'"
    by_name = {r["name"]: r for r in rep["resources"]}
    assert by_name["chart"]["files"] == ["Chart.yaml", "templates/deployment.yaml", "values.yaml"]
    assert {f["file"] for f in rep["configData"][0]["files"]} == {
        "configmap.yaml",
        "deployment.yaml",
        "values.yaml",
    }
    r = run("inspect", source, "--version", "6.2.0")
    assert r.exit_code == 0 and "version     6.2.0 (as given)" in r.stdout


@pytest.mark.registry
def test_registry_errors_say_what_exists(fixture_registry, tmp_path):
    base = f"oci::http://{fixture_registry.host}/source"
    line = error_line(run("inspect", f"{base}//{COMPONENT}:9.0.0"))
    assert "version '9.0.0' not found (versions there: 6.3.0, 6.2.0)" in line
    line = error_line(run("inspect", base))
    assert "name the component" in line and "an OCI registry cannot list its components" in line
    line = error_line(run("inspect", f"{base}//acme.org/nothing"))
    assert "no such repository (HTTP 404)" in line
    r = run("inspect", f"{base}//{COMPONENT}:6.2.0", "--extract", "config", "-o", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    digest = hashlib.sha256((tmp_path / "config.yaml").read_bytes()).hexdigest()
    assert digest == FIXTURE_CONFIGDATA_DIGEST
