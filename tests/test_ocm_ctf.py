"""CTF, directory and descriptor-file sources, and load_component, against the real CTF."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from function.errors import ComponentError
from function.ocm.access import flux_source
from function.ocm.ctf import CtfSource
from function.ocm.directory import DescriptorFileSource, DirectorySource
from function.ocm.fetch import load_component
from function.ocm.images import localized_reference
from function.ocm.model import Repository
from function.ocm.source import ComponentSource

NAME = "acme.org/sack8s/podinfo"
MIRROR = Repository("127.0.0.1:5000", "source", True)
DESC_620 = "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095"
DESC_630 = "sha256:30de57abc2e2993f9e5de0724ac6a1008ed8333e9e40e9c79b22030b25adfb1f"
TGZ = "8e58f26c448517d24f1aa8900dee2092e683ebb7ff210198be8760a79f63ba97"
CONFIG = "29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051"


@pytest.fixture
def ctf(fixtures_dir: Path) -> CtfSource:
    return CtfSource(fixtures_dir / "ctf", repository=MIRROR)


async def test_protocol(ctf: CtfSource) -> None:
    assert isinstance(ctf, ComponentSource)


async def test_reads_both_versions(ctf: CtfSource, fixtures_dir: Path) -> None:
    assert await ctf.list_versions(NAME) == ["6.2.0", "6.3.0"]
    assert await ctf.list_versions("acme.org/other") == []
    for version, digest in (("6.2.0", DESC_620), ("6.3.0", DESC_630)):
        cv = await ctf.get(NAME, version)
        assert cv.version == version and cv.descriptor_digest == digest and cv.repository == MIRROR
        assert [layer.media_type for layer in cv.layers] == [
            "application/vnd.ocm.software.component-descriptor.v2+json",
            "application/x-tar",
            "application/x-tar+gzip",
            "application/yaml",
        ]
        expected = json.loads((fixtures_dir / "descriptors" / f"ctf-{version}.json").read_bytes())
        assert dict(cv.descriptor.raw) == expected


async def test_missing_version_lists_available(ctf: CtfSource) -> None:
    with pytest.raises(
        ComponentError,
        match=r"component acme.org/sack8s/podinfo:9.9.9: not found .*versions there: 6.2.0, 6.3.0",
    ):
        await ctf.get(NAME, "9.9.9")


async def test_not_a_ctf(tmp_path: Path) -> None:
    with pytest.raises(ComponentError, match="is not a CTF: artifact-index.json not found"):
        await CtfSource(tmp_path).list_versions(NAME)


def _copy(fixtures_dir: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "ctf"
    shutil.copytree(fixtures_dir / "ctf", dst)
    return dst


async def test_tampered_blob_refused(fixtures_dir: Path, tmp_path: Path) -> None:
    dst = _copy(fixtures_dir, tmp_path)
    blob = dst / "blobs" / f"sha256.{TGZ}"
    data = bytearray(blob.read_bytes())
    data[100] ^= 0xFF
    blob.write_bytes(bytes(data))
    src = CtfSource(dst, repository=MIRROR)
    cv = await src.get(NAME, "6.2.0")
    with pytest.raises(
        ComponentError,
        match=f"component acme.org/sack8s/podinfo:6.2.0: blob sha256:{TGZ}: digest mismatch",
    ):
        await src.blob(cv, f"sha256:{TGZ}", "application/x-tar+gzip")


async def test_tampered_descriptor_manifest_refused(fixtures_dir: Path, tmp_path: Path) -> None:
    dst = _copy(fixtures_dir, tmp_path)
    blob = dst / "blobs" / f"sha256.{DESC_620.split(':')[1]}"
    blob.write_bytes(blob.read_bytes().replace(b"6.2.0", b"6.2.1"))
    with pytest.raises(ComponentError, match="digest mismatch"):
        await CtfSource(dst).get(NAME, "6.2.0")


async def test_tag_pointing_at_manifest_and_build_tags(fixtures_dir: Path, tmp_path: Path) -> None:
    dst = _copy(fixtures_dir, tmp_path)
    index = json.loads((dst / "artifact-index.json").read_bytes())
    index["artifacts"].append(
        {
            "repository": f"component-descriptors/{NAME}",
            "tag": "6.2.0.build-x",
            "digest": DESC_620,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
        }
    )
    (dst / "artifact-index.json").write_text(json.dumps(index))
    src = CtfSource(dst)
    assert "6.2.0+x" in await src.list_versions(NAME)
    # The descriptor inside says 6.2.0, so asking for 6.2.0+x reaches the manifest but is refused by name check.
    with pytest.raises(
        ComponentError,
        match="the stored descriptor is acme.org/sack8s/podinfo:6.2.0, not acme.org/sack8s/podinfo:6.2.0\\+x",
    ):
        await src.get(NAME, "6.2.0+x")


async def test_index_child_found_by_type_not_position(fixtures_dir: Path, tmp_path: Path) -> None:
    import hashlib

    dst = _copy(fixtures_dir, tmp_path)
    index_digest = "93ce79480c74f8cd235435cef7f61d796f415865bb909126556b09f528ca28a0"
    index = json.loads((dst / "blobs" / f"sha256.{index_digest}").read_bytes())
    index["manifests"].reverse()
    data = json.dumps(index).encode()
    new = hashlib.sha256(data).hexdigest()
    (dst / "blobs" / f"sha256.{new}").write_bytes(data)
    ai = json.loads((dst / "artifact-index.json").read_bytes())
    for a in ai["artifacts"]:
        if a.get("tag") == "6.2.0":
            a["digest"] = f"sha256:{new}"
    (dst / "artifact-index.json").write_text(json.dumps(ai))
    cv = await CtfSource(dst).get(NAME, "6.2.0")
    assert cv.descriptor_digest == DESC_620


async def test_blob_outside_component_refused(ctf: CtfSource) -> None:
    cv = await ctf.get(NAME, "6.2.0")
    other = (
        "sha256:e1f633a724caa539db05c12b81e19d8452ea5d6c328feb82bcd218da7888bf23"  # the 6.3.0 chart
    )
    with pytest.raises(ComponentError, match="is not part of this component version"):
        await ctf.blob(cv, other, "application/vnd.oci.image.manifest.v1+json")
    with pytest.raises(ComponentError, match="not a sha256:<64 hex> digest"):
        await ctf.blob(cv, "sha256:../../etc/passwd", "application/yaml")


async def test_load_component_chart_and_config(ctf: CtfSource, fixtures_dir: Path) -> None:
    lc = await load_component(
        ctf, NAME, "6.2.0", deployable=("chart", {}), configdata=("config", {})
    )
    assert lc.component.version == "6.2.0"
    chart = lc.contents["chart"]
    assert set(chart) == {"Chart.yaml", "values.yaml", "templates/deployment.yaml"}
    assert b"repository: ghcr.io/stefanprodan/podinfo" in chart["values.yaml"]
    assert lc.blob_heads["chart"].startswith(b"\x1f\x8b")
    assert lc.contents["config"] == {
        "config": (fixtures_dir / "ctf" / "blobs" / f"sha256.{CONFIG}").read_bytes()
    }
    assert (
        lc.contents["config"]["config"]
        == (fixtures_dir / "inputs" / "config" / "config.yaml").read_bytes()
    )
    # The same component feeds access.py.
    res = next(r for r in lc.component.descriptor.resources if r.name == "chart")
    assert flux_source(lc.component, res, "helm").digest.startswith("sha256:d3db565b")


async def test_load_component_kustomize_range(ctf: CtfSource) -> None:
    lc = await load_component(
        ctf, NAME, ">=6.2.0 <7.0.0", deployable=("manifests-gz", {}), configdata=("", {})
    )
    assert lc.component.version == "6.3.0"
    files = lc.contents["manifests-gz"]
    assert set(files) == {"configmap.yaml", "deployment.yaml", "kustomization.yaml"}
    assert b"kind: Deployment" in files["deployment.yaml"]
    res = next(r for r in lc.component.descriptor.resources if r.name == "manifests-gz")
    fs = flux_source(lc.component, res, "kustomize", blob_head=lc.blob_heads["manifests-gz"])
    assert fs.digest == DESC_630
    image = next(r for r in lc.component.descriptor.resources if r.name == "image")
    assert localized_reference(lc.component, image).startswith(
        "127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:11342fe5"
    )


async def test_load_component_versions(ctf: CtfSource) -> None:
    assert (await load_component(ctf, NAME, "~6.2")).component.version == "6.2.0"
    assert (await load_component(ctf, NAME, "v6.3.0")).component.version == "6.3.0"
    # Sticky resolution (the same function the claim path uses): the previous version is kept
    # unless a newer match exists, and one that no longer satisfies the range is dropped.
    assert (await load_component(ctf, NAME, "~6.2", previous="6.2.0")).component.version == "6.2.0"
    assert (await load_component(ctf, NAME, "^6", previous="6.2.0")).component.version == "6.3.0"
    assert (await load_component(ctf, NAME, "^6", previous="5.0.0")).component.version == "6.3.0"
    assert (await load_component(ctf, NAME, "=6.2.0")).component.version == "6.2.0"
    with pytest.raises(
        ComponentError, match="no version satisfies '>=7' \\(available: 6.3.0, 6.2.0\\)"
    ):
        await load_component(ctf, NAME, ">=7")


async def test_load_component_ambiguous_deployable(ctf: CtfSource) -> None:
    with pytest.raises(
        ComponentError, match="has 3 resources of type helmChart or kustomize.ocm.fluxcd.io"
    ):
        await load_component(ctf, NAME, "6.2.0", deployable=("", {}))
    with pytest.raises(ComponentError, match="not a deployable"):
        await load_component(ctf, NAME, "6.2.0", deployable=("image", {}))


# --------------------------------------------------------------------------- directory sources


def _directory(fixtures_dir: Path, tmp_path: Path, version: str = "6.2.0") -> Path:
    d = tmp_path / "comp"
    (d / "blobs").mkdir(parents=True)
    (d / "component-descriptor.yaml").write_bytes(
        (fixtures_dir / "descriptors" / f"source-{version}.yaml").read_bytes()
    )
    for blob in (fixtures_dir / "ctf" / "blobs").iterdir():
        shutil.copy(blob, d / "blobs" / blob.name)
    return d


async def test_directory_source(fixtures_dir: Path, tmp_path: Path) -> None:
    import hashlib

    d = _directory(fixtures_dir, tmp_path)
    src = DirectorySource(d, repository=MIRROR)
    assert isinstance(src, ComponentSource)
    assert await src.list_versions(NAME) == ["6.2.0"]
    cv = await src.get(NAME, "6.2.0")
    assert (
        cv.descriptor_digest
        == "sha256:" + hashlib.sha256((d / "component-descriptor.yaml").read_bytes()).hexdigest()
    )
    lc = await load_component(
        src, NAME, "6.2.0", deployable=("chart", {}), configdata=("config", {})
    )
    assert "values.yaml" in lc.contents["chart"]
    # Kustomize needs the descriptor manifest: not derivable from a directory.
    res = next(r for r in cv.descriptor.resources if r.name == "manifests-gz")
    with pytest.raises(ComponentError, match="layers are unknown"):
        flux_source(cv, res, "kustomize")
    with pytest.raises(ComponentError, match="not found: .* holds acme.org/sack8s/podinfo:6.2.0"):
        await src.get(NAME, "6.3.0")


async def test_directory_named_blobs_and_escape(fixtures_dir: Path, tmp_path: Path) -> None:
    d = _directory(fixtures_dir, tmp_path)
    (d / "blobs" / "config.yaml").write_bytes(b"a: 1\n")
    (tmp_path / "secret").write_bytes(b"x")
    (d / "blobs" / "link").symlink_to(tmp_path / "secret")
    src = DirectorySource(d)
    cv = await src.get(NAME, "6.2.0")
    assert await src.blob(cv, "config.yaml", "application/yaml") == b"a: 1\n"
    with pytest.raises(ComponentError, match="resolves outside"):
        await src.blob(cv, "link", "application/yaml")
    with pytest.raises(ComponentError, match="neither a sha256 digest nor a relative file name"):
        await src.blob(cv, "../secret", "application/yaml")
    (d / "blobs" / f"sha256.{CONFIG}").write_bytes(b"tampered")
    with pytest.raises(ComponentError, match="digest mismatch"):
        await src.blob(cv, f"sha256:{CONFIG}", "application/yaml")


async def test_directory_needs_one_descriptor(fixtures_dir: Path, tmp_path: Path) -> None:
    d = _directory(fixtures_dir, tmp_path)
    (d / "component-descriptor.json").write_bytes(
        (fixtures_dir / "descriptors" / "source-6.2.0.json").read_bytes()
    )
    with pytest.raises(
        ComponentError,
        match="exactly one of component-descriptor.yaml, component-descriptor.json, found 2",
    ):
        await DirectorySource(d).list_versions(NAME)


async def test_descriptor_file_source(fixtures_dir: Path) -> None:
    src = DescriptorFileSource(
        fixtures_dir / "descriptors" / "copied-default-6.2.0.json",
        repository=Repository("127.0.0.1:5000", "copied-default", True),
    )
    cv = await src.get(NAME, "6.2.0")
    image = next(r for r in cv.descriptor.resources if r.name == "image")
    assert localized_reference(cv, image) == (
        "127.0.0.1:5000/copied-default/component-descriptors/acme.org/sack8s/podinfo@"
        "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
    )
    with pytest.raises(ComponentError, match="single descriptor file .* holds no resource content"):
        await src.blob(cv, f"sha256:{CONFIG}", "application/yaml")
