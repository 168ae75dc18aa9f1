"""Localization that deploys, through the CLI as a team runs it: tag@digest, image-pair defects
(Fatal by default, ``--image-pairs warning``), unpinned images (``--allow-unpinned``), and the
bundled example's chart values."""

from __future__ import annotations

from pathlib import Path

from support import example_component
from test_cli_mutate import assert_one_line_error, run

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "component"
CD = EXAMPLE / "inputs" / "config" / "config.yaml"
SOURCE = f"ctf::{EXAMPLE / 'ctf'}//acme.org/sack8s/podinfo:6.2.0"
D = "sha256:" + "ab" * 32
VALUES = "replicaCount: 1\nimage:\n  repository: ghcr.io/stefanprodan/podinfo\n  tag: 6.2.0\n"


def descriptor(tmp_path: Path, reference: str, digest: str | None = None) -> Path:
    extra = (
        f"    digest: {{hashAlgorithm: SHA-256, normalisationAlgorithm: genericBlobDigest/v1, value: {digest}}}\n"
        if digest
        else ""
    )
    p = tmp_path / "component-descriptor.yaml"
    p.write_text(
        "meta: {schemaVersion: v2}\ncomponent:\n  name: acme.org/app\n  version: 1.0.0\n  provider: acme\n"
        "  repositoryContexts: []\n  sources: []\n  componentReferences: []\n  resources:\n"
        "  - name: image\n    type: ociImage\n    version: '1'\n    relation: external\n"
        f"    access: {{type: ociArtifact, imageReference: '{reference}'}}\n" + extra
    )
    return p


def configdata(tmp_path: Path, fields: str) -> Path:
    p = tmp_path / "cd.yaml"
    p.write_text(
        "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\nlocalization:\n"
        f"- file: values.yaml\n  resource: {{name: image}}\n{fields}"
    )
    (tmp_path / "values.yaml").write_text(VALUES)
    return p


def localize(tmp_path: Path, cd: Path, comp: Path, *extra: str):
    return run(
        "localize",
        "--config-data",
        str(cd),
        "--component",
        str(comp),
        "--root",
        str(tmp_path),
        *extra,
        "values.yaml",
    )


def test_bundled_example_chart_values_are_a_pinned_reference_of_the_transfer_target():
    r = run(
        "localize",
        "--config-data",
        str(CD),
        "--component",
        SOURCE,
        "--root",
        str(EXAMPLE / "inputs" / "chart" / "podinfo"),
        "values.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""  # no warning: the example is what a careful team writes
    assert r.stdout == (
        "replicaCount: 1\nimage:\n  repository: 127.0.0.1:5000/upstream/podinfo\n"
        f'  tag: 6.2.0@{example_component.IMAGE_DIGEST}\nui:\n  message: ""\n'
    )


def test_tag_rule_on_a_tagged_pinned_reference_writes_tag_at_digest(tmp_path):
    cd = configdata(tmp_path, "  fullyQualifiedRepository: image.repository\n  tag: image.tag\n")
    r = localize(tmp_path, cd, descriptor(tmp_path, f"registry.acme.org/team/app:2.1@{D}"))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == VALUES.replace(
        "ghcr.io/stefanprodan/podinfo", "registry.acme.org/team/app"
    ).replace("6.2.0", f"2.1@{D}")
    assert r.stderr == ""


def test_bare_digest_as_tag_is_an_error_naming_the_rule_and_the_flag(tmp_path):
    cd = configdata(tmp_path, "  fullyQualifiedRepository: image.repository\n  tag: image.tag\n")
    comp = descriptor(tmp_path, f"registry.acme.org/team/app@{D}")
    r = localize(tmp_path, cd, comp)
    assert_one_line_error(
        r,
        "ConfigData localization[0].tag (file values.yaml)",
        "not a tag",
        "'image' rule",
        "--image-pairs warning",
    )
    r = localize(tmp_path, cd, comp, "--image-pairs", "warning")
    assert r.exit_code == 0 and f"tag: {D}\n" in r.stdout
    assert "warning: ConfigData localization[0].tag (file values.yaml):" in r.stderr


def test_repository_without_registry_is_an_error_unless_a_registry_rule_completes_it(tmp_path):
    comp = descriptor(tmp_path, f"registry.acme.org/team/app:2.1@{D}")
    r = localize(
        tmp_path, configdata(tmp_path, "  repository: image.repository\n  tag: image.tag\n"), comp
    )
    assert_one_line_error(
        r, "localization[0].repository", "without its registry 'registry.acme.org'", "Docker Hub"
    )
    cd = configdata(
        tmp_path, "  registry: image.registry\n  repository: image.repository\n  tag: image.tag\n"
    )
    r = localize(tmp_path, cd, comp)
    assert r.exit_code == 0, r.stderr
    assert "registry: registry.acme.org\n" in r.stdout and "repository: team/app\n" in r.stdout


def test_an_image_rule_is_never_a_pair_defect(tmp_path):
    r = localize(
        tmp_path,
        configdata(tmp_path, "  image: image.repository\n"),
        descriptor(tmp_path, f"registry.acme.org/team/app@{D}"),
    )
    assert r.exit_code == 0, r.stderr
    assert f"repository: registry.acme.org/team/app@{D}\n" in r.stdout


def test_unpinned_image_is_refused_naming_allow_unpinned(tmp_path):
    cd = configdata(tmp_path, "  image: image.repository\n")
    comp = descriptor(tmp_path, "registry.acme.org/team/app:2.1")
    r = localize(tmp_path, cd, comp)
    assert_one_line_error(
        r, "ConfigData localization[0].resource", "has no digest", "--allow-unpinned"
    )
    r = localize(tmp_path, cd, comp, "--allow-unpinned")
    assert r.exit_code == 0, r.stderr
    assert "repository: registry.acme.org/team/app:2.1\n" in r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(
        "sack8s: warning: ConfigData localization[0].image (file values.yaml): resource image"
    )
    assert "not pinned by digest" in line


def test_resource_digest_pins_a_tag_only_reference(tmp_path):
    cd = configdata(tmp_path, "  fullyQualifiedRepository: image.repository\n  tag: image.tag\n")
    r = localize(
        tmp_path,
        cd,
        descriptor(tmp_path, "http://registry.acme.org/team/app:2.1", D.removeprefix("sha256:")),
    )
    assert r.exit_code == 0, r.stderr
    assert f"tag: 2.1@{D}\n" in r.stdout and "repository: registry.acme.org/team/app\n" in r.stdout


def test_allow_unpinned_does_not_accept_a_broken_access(tmp_path):
    comp = descriptor(tmp_path, "not a reference")
    r = localize(
        tmp_path, configdata(tmp_path, "  image: image.repository\n"), comp, "--allow-unpinned"
    )
    assert_one_line_error(r, "ConfigData localization[0].resource", "not a valid OCI reference")
    r = localize(tmp_path, configdata(tmp_path, "  image: image.repository\n"), comp)
    assert "--allow-unpinned" not in r.stderr  # the flag would not help: it is not offered
