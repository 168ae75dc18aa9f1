"""``--transfer-to``: localizing as if ``ocm transfer`` had put the component elsewhere.

The oracle is the OCM CLI itself: the fixtures hold the source component and what three real
transfers of it wrote (``by-ref``, ``copied-default`` = ``--copy-resources``, ``copied-oci`` =
``--copy-resources --upload-as ociArtifact``). Simulating each transfer on the source must give
the accesses and the image references the transferred component actually has.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from function.cli import main
from function.ocm.descriptor import parse_descriptor
from function.ocm.images import image_table
from function.ocm.model import ComponentVersion, Repository
from function.ocm.transfer import Transfer, transferred

JSON = "application/vnd.ocm.software.component-descriptor.v2+json"
REGISTRY = "127.0.0.1:5000"
#: (fixture path, --copy-resources, --upload-as) as in the fixtures' commands.txt
TRANSFERS = [
    ("by-ref", False, "default"),
    ("copied-default", True, "default"),
    ("copied-oci", True, "ociArtifact"),
]


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def component(fixtures_dir: Path, name: str, base: str) -> ComponentVersion:
    path = fixtures_dir / "descriptors" / f"{name}-6.2.0.json"
    d = parse_descriptor(path.read_bytes(), JSON, str(path))
    return ComponentVersion(d, Repository(REGISTRY, base, plain_http=True), "sha256:" + "0" * 64)


@pytest.mark.parametrize(("target", "copy", "upload_as"), TRANSFERS)
def test_simulated_transfer_matches_the_real_one(fixtures_dir, target, copy, upload_as):
    source = component(fixtures_dir, "source", "source")
    real = component(fixtures_dir, target, target)
    moved, problems = transferred(
        source, Transfer(Repository(REGISTRY, target, plain_http=True), copy, upload_as)
    )
    assert not problems
    assert [dict(r.access) for r in moved.descriptor.resources] == [
        dict(r.access) for r in real.descriptor.resources
    ]
    ours = {k: (e.reference, str(e.error)) for k, e in image_table(moved).items()}
    theirs = {k: (e.reference, str(e.error)) for k, e in image_table(real).items()}
    assert ours == theirs
    # the descriptor bytes change when resources are copied: its digest is not known then
    assert (moved.descriptor_digest == source.descriptor_digest) is (not copy)


@pytest.mark.parametrize(("target", "copy", "upload_as"), TRANSFERS)
def test_localize_transfer_to_gives_what_the_transferred_component_gives(
    fixtures_dir, target, copy, upload_as
):
    common = [
        "localize",
        "--config-data",
        str(fixtures_dir / "inputs/config/config.yaml"),
        "--root",
        str(fixtures_dir / "inputs/kustomize"),
    ]
    flags = ["--copy-resources"] if copy else []
    if upload_as != "default":
        flags += ["--upload-as", upload_as]
    simulated = run(
        *common,
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        "--transfer-to",
        f"http://{REGISTRY}/{target}",
        *flags,
        "deployment.yaml",
    )
    actual = run(
        *common,
        "--component",
        str(fixtures_dir / "descriptors" / f"{target}-6.2.0.json"),
        "--registry",
        f"http://{REGISTRY}/{target}",
        "deployment.yaml",
    )
    assert simulated.exit_code == 0, simulated.stderr
    assert actual.exit_code == 0, actual.stderr
    assert simulated.stdout == actual.stdout
    expected = {
        "by-ref": f"{REGISTRY}/upstream/podinfo@sha256:",
        "copied-default": f"{REGISTRY}/copied-default/component-descriptors/acme.org/sack8s/podinfo@sha256:",
        "copied-oci": f"{REGISTRY}/copied-oci/upstream/podinfo@sha256:",
    }[target]
    assert f"image: {expected}11342fe5" in simulated.stdout


def test_transfer_to_another_registry_and_prefix(fixtures_dir):
    r = run(
        "localize",
        "--config-data",
        str(fixtures_dir / "inputs/config/config.yaml"),
        "--root",
        str(fixtures_dir / "inputs/kustomize"),
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        "--transfer-to",
        "registry.internal.acme/mirror/team-a",
        "--copy-resources",
        "--upload-as",
        "ociArtifact",
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert (
        "image: registry.internal.acme/mirror/team-a/upstream/podinfo@sha256:11342fe5" in r.stdout
    )


def test_registry_on_a_component_without_localblob_images_says_so(fixtures_dir):
    """The issue's case: --registry printed the file unchanged without a word."""
    r = run(
        "localize",
        "--config-data",
        str(fixtures_dir / "inputs/config/config.yaml"),
        "--root",
        str(fixtures_dir / "inputs/kustomize"),
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        "--registry",
        "registry.internal.acme/mirror",
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert "image: 127.0.0.1:5000/upstream/podinfo@sha256:" in r.stdout
    assert "applies only to localBlob images" in r.stderr
    assert "--transfer-to" in r.stderr


def _unpinned_descriptor(tmp_path: Path) -> Path:
    doc = {
        "meta": {"schemaVersion": "v2"},
        "component": {
            "name": "acme.org/x",
            "version": "1.0.0",
            "provider": "acme.org",
            "repositoryContexts": [],
            "resources": [
                {
                    "name": "image",
                    "version": "1.0.0",
                    "type": "ociImage",
                    "relation": "external",
                    "access": {"type": "ociArtifact", "imageReference": "ghcr.io/acme/x:1.0.0"},
                }
            ],
        },
    }
    path = tmp_path / "component-descriptor.yaml"
    path.write_text(json.dumps(doc))
    return path


def _localize_unpinned(tmp_path: Path, *flags: str):
    """``sack8s localize d.yaml`` of a one-image ConfigData against an unpinned component."""
    return run(
        "localize",
        "--config-data",
        str(_cd(tmp_path)),
        "--root",
        str(tmp_path),
        "--component",
        str(_unpinned_descriptor(tmp_path)),
        *flags,
        "d.yaml",
    )


def _cd(tmp_path: Path) -> Path:
    cd = tmp_path / "cd.yaml"
    cd.write_text("localization:\n- file: d.yaml\n  image: spec.image\n  resource: {name: image}\n")
    (tmp_path / "d.yaml").write_text("spec:\n  image: x\n")
    return cd


def test_copying_an_unpinned_image_cannot_be_predicted(tmp_path):
    args = ["--transfer-to", "registry.internal.acme/mirror", "--copy-resources"]
    r = _localize_unpinned(tmp_path, *args, "--allow-unpinned")
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1, r.stderr
    assert "resource image" in r.stderr and "has no digest" in r.stderr
    assert "--allow-unpinned" not in r.stderr  # it would not help: the digest is unknowable
    # --upload-as ociArtifact keeps a reference; unpinned, it needs --allow-unpinned as ever
    r = _localize_unpinned(tmp_path, *args, "--upload-as", "ociArtifact", "--allow-unpinned")
    assert r.exit_code == 0, r.stderr
    assert "image: registry.internal.acme/mirror/acme/x:1.0.0\n" in r.stdout


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--copy-resources"], "give --transfer-to"),
        (["--upload-as", "ociArtifact"], "give --transfer-to"),
        (["--transfer-to", "r.example/x", "--registry", "r.example/y"], "exclude each other"),
    ],
)
def test_transfer_flags_usage_errors(tmp_path, extra, fragment):
    r = _localize_unpinned(tmp_path, *extra)
    assert r.exit_code == 2, r.output
    assert fragment in r.stderr


def test_transfer_to_must_be_a_registry(tmp_path):
    r = _localize_unpinned(tmp_path, "--transfer-to", "ctf::./x")
    assert r.exit_code == 1
    assert "--transfer-to ctf::./x: must be an OCI registry address" in r.stderr


def test_check_and_mutate_take_transfer_to(fixtures_dir):
    base = [
        "--config-data",
        str(fixtures_dir / "inputs/config/config.yaml"),
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        "--transfer-to",
        f"http://{REGISTRY}/copied-oci",
        "--copy-resources",
        "--upload-as",
        "ociArtifact",
    ]
    r = run("check", *base)
    # the chart's values take repository + tag: after the transfer, without the registry
    assert "copied-oci/upstream/podinfo" in r.stdout, r.stdout
    r = run(
        "mutate",
        *base,
        "--root",
        str(fixtures_dir / "inputs/kustomize"),
        "--values",
        str(Path(__file__).parent / "data/configdata/backend/values-configmap.yaml"),
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert f"image: {REGISTRY}/copied-oci/upstream/podinfo@sha256:11342fe5" in r.stdout
