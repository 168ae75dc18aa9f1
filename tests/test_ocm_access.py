"""packaging.md §2 and §3 against the real descriptors (FACTS.md, FLUX.md)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from function.errors import ComponentError
from function.ocm.access import (
    FLUX_CONTENT_LAYER,
    HELM_CHART_LAYER,
    FluxSource,
    flux_source,
    normalize_access_type,
)
from function.ocm.descriptor import parse_descriptor
from function.ocm.images import localized_reference, parse_image_reference
from function.ocm.model import ComponentVersion, Descriptor, Digest, Layer, Repository, Resource

IMG = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
CHART = "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
TGZ = "sha256:8e58f26c448517d24f1aa8900dee2092e683ebb7ff210198be8760a79f63ba97"
TAR = "sha256:2bef48462c47fb8eabf5f64aec4984bf2f50a2bd67e07c40546eba424168f6bd"
DESC_MANIFEST = {
    "source": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095",
    "by-ref": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095",
    "copied-default": "sha256:65f37a0f9d1fdf139672b0202ec7c55d516779b4aa7cceb268a98aa22a3d3476",
    "copied-oci": "sha256:76d8802cd5c18997b1e3e1a726a359d6163b0a4c8e58a1178c1a5ab18467525f",
}
LAYERS = (
    Layer("application/vnd.ocm.software.component-descriptor.v2+json", "sha256:" + "6e" * 32, 2242),
    Layer("application/x-tar", TAR, 4608),
    Layer("application/x-tar+gzip", TGZ, 516),
    Layer(
        "application/yaml",
        "sha256:29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051",
        916,
    ),
)
REPO = "127.0.0.1:5000/{}/component-descriptors/acme.org/sack8s/podinfo"

LOCALIZED = {
    "source": f"127.0.0.1:5000/upstream/podinfo:6.2.0@{IMG}",
    "by-ref": f"127.0.0.1:5000/upstream/podinfo:6.2.0@{IMG}",
    "copied-default": f"127.0.0.1:5000/copied-default/component-descriptors/acme.org/sack8s/podinfo@{IMG}",
    "copied-oci": f"127.0.0.1:5000/copied-oci/upstream/podinfo:6.2.0@{IMG}",
}


def _cv(
    fixtures_dir: Path, path: str, *, repository: Repository | None | str = "default", layers=LAYERS
) -> ComponentVersion:
    d = parse_descriptor(
        (fixtures_dir / "descriptors" / f"{path}-6.2.0.json").read_bytes(), None, "t"
    )
    repo = (
        Repository(host="127.0.0.1:5000", base=path, plain_http=True)
        if repository == "default"
        else repository
    )
    return ComponentVersion(
        descriptor=d, repository=repo, descriptor_digest=DESC_MANIFEST[path], layers=layers
    )


def _res(cv: ComponentVersion, name: str) -> Resource:
    return next(r for r in cv.descriptor.resources if r.name == name)


@pytest.mark.parametrize("path", list(LOCALIZED))
def test_localized_reference_per_path(fixtures_dir: Path, path: str) -> None:
    cv = _cv(fixtures_dir, path)
    assert localized_reference(cv, _res(cv, "image")) == LOCALIZED[path]


@pytest.mark.parametrize("path", list(LOCALIZED))
def test_flux_chart(fixtures_dir: Path, path: str) -> None:
    cv = _cv(fixtures_dir, path)
    assert flux_source(cv, _res(cv, "chart"), "helm") == FluxSource(
        url="oci://" + REPO.format(path),
        digest=CHART,
        layer_media_type=HELM_CHART_LAYER,
        layer_operation="copy",
        host="127.0.0.1:5000",
        plain_http=True,
    )


@pytest.mark.parametrize("path", list(LOCALIZED))
def test_flux_kustomize_tgz(fixtures_dir: Path, path: str) -> None:
    cv = _cv(fixtures_dir, path)
    fs = flux_source(cv, _res(cv, "manifests-gz"), "kustomize", blob_head=b"\x1f\x8b\x08\x00")
    assert fs == FluxSource(
        url="oci://" + REPO.format(path),
        digest=DESC_MANIFEST[path],
        layer_media_type="application/x-tar+gzip",
        layer_operation="extract",
        host="127.0.0.1:5000",
        plain_http=True,
    )


def test_flux_source_digest_from_flux_md(fixtures_dir: Path) -> None:
    cv = _cv(fixtures_dir, "source")
    assert flux_source(cv, _res(cv, "manifests-gz"), "kustomize").digest.startswith(
        "sha256:b26fc226"
    )
    assert flux_source(cv, _res(cv, "chart"), "helm").digest.startswith("sha256:d3db565b")


@pytest.mark.parametrize("path", list(LOCALIZED))
def test_flux_plain_tar_says_compress(fixtures_dir: Path, path: str) -> None:
    cv = _cv(fixtures_dir, path)
    with pytest.raises(
        ComponentError, match=r"resource manifests: .*add `compress: true` to the `dir` input"
    ):
        flux_source(cv, _res(cv, "manifests"), "kustomize")


def test_flux_kustomize_checks(fixtures_dir: Path) -> None:
    cv = _cv(fixtures_dir, "source")
    res = _res(cv, "manifests-gz")
    with pytest.raises(ComponentError, match="gzip magic bytes 1f 8b"):
        flux_source(cv, res, "kustomize", blob_head=b"./\x00\x00")
    dup = _cv(
        fixtures_dir,
        "source",
        layers=LAYERS + (Layer("application/x-tar+gzip", "sha256:" + "ab" * 32, 1),),
    )
    with pytest.raises(ComponentError, match="has 2 layers of media type application/x-tar\\+gzip"):
        flux_source(dup, res, "kustomize")
    with pytest.raises(ComponentError, match="layers are unknown"):
        flux_source(_cv(fixtures_dir, "source", layers=()), res, "kustomize")


def test_no_repository(fixtures_dir: Path) -> None:
    cv = _cv(fixtures_dir, "copied-default", repository=None)
    with pytest.raises(
        ComponentError,
        match="resource image: .*read the component from \\(or map it to\\) a registry",
    ):
        localized_reference(cv, _res(cv, "image"))
    with pytest.raises(ComponentError, match="map it to"):
        flux_source(cv, _res(cv, "chart"), "helm")
    # An image by reference needs no repository.
    src = _cv(fixtures_dir, "source", repository=None)
    assert localized_reference(src, _res(src, "image")) == LOCALIZED["source"]


def test_plain_blobs_are_not_images(fixtures_dir: Path) -> None:
    cv = _cv(fixtures_dir, "source")
    with pytest.raises(
        ComponentError,
        match="resource config: access LocalBlob/v1 with mediaType 'application/yaml' is a plain blob",
    ):
        localized_reference(cv, _res(cv, "config"))
    with pytest.raises(
        ComponentError, match="resource config: access LocalBlob/v1 .* cannot serve as a Helm chart"
    ):
        flux_source(cv, _res(cv, "config"), "helm")


def _resource(access: dict, digest: Digest | None = None, name: str = "r") -> Resource:
    return Resource(
        name=name,
        version="1",
        type="ociImage",
        relation="external",
        access=MappingProxyType(access),
        digest=digest,
    )


def _cv_with(*resources: Resource, repository: Repository | None = None) -> ComponentVersion:
    d = Descriptor(name="acme.org/x", version="1.0.0", provider="acme", resources=resources)
    return ComponentVersion(
        descriptor=d,
        repository=repository or Repository("reg.example.com", "base"),
        descriptor_digest=DESC_MANIFEST["source"],
    )


SHA = "sha256:" + "a" * 64


def test_unpinned_reference() -> None:
    r = _resource({"type": "ociImage", "imageReference": "https://ghcr.io/org/app:1.0"})
    cv = _cv_with(r)
    with pytest.raises(
        ComponentError,
        match="resource r: access ociImage: image reference ghcr.io/org/app:1.0 has no digest",
    ):
        localized_reference(cv, r)
    assert localized_reference(cv, r, allow_unpinned=True) == "ghcr.io/org/app:1.0"
    with pytest.raises(ComponentError, match="stored outside the component"):
        flux_source(cv, r, "helm")
    # A digest with a non-pinning normalisation does not pin.
    other = _resource(r.access, Digest("SHA-256", "jsonNormalisation/v1", "a" * 64))
    with pytest.raises(ComponentError, match="has no digest"):
        localized_reference(_cv_with(other), other)


def test_pinned_by_oci_artifact_digest_and_mismatch() -> None:
    r = _resource(
        {"type": "OCIImage/v1", "imageReference": "ghcr.io/org/app:1.0"},
        Digest("sha256", "ociArtifactDigest/v1", "a" * 64),
    )
    assert localized_reference(_cv_with(r), r) == f"ghcr.io/org/app:1.0@{SHA}"
    bad = _resource(
        {"type": "ociArtifact", "imageReference": "ghcr.io/org/app:1.0@sha256:" + "b" * 64},
        r.digest,
    )
    with pytest.raises(ComponentError, match="differs from resource digest"):
        localized_reference(_cv_with(bad), bad)


def test_global_access() -> None:
    r = _resource(
        {
            "type": "localBlob",
            "localReference": SHA,
            "mediaType": "application/vnd.toi.ocm.software.package.v1+yaml",
            "globalAccess": {"type": "OCIImageLayer", "ref": "ghcr.io/org/comp", "digest": SHA},
        }
    )
    assert localized_reference(_cv_with(r), r) == f"ghcr.io/org/comp@{SHA}"
    g = _resource(
        {
            "type": "localBlob",
            "localReference": SHA,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "globalAccess": {
                "type": "ociArtifact",
                "imageReference": f"ghcr.io/org/chart:1.0@{SHA}",
            },
        }
    )
    assert localized_reference(_cv_with(g), g) == f"ghcr.io/org/chart:1.0@{SHA}"
    # Issue 31: Flux fetches what the function read (the local copy), never the globalAccess.
    assert flux_source(_cv_with(g), g, "helm") == FluxSource(
        "oci://reg.example.com/base/component-descriptors/acme.org/x",
        SHA,
        HELM_CHART_LAYER,
        "copy",
        "reg.example.com",
    )


def test_oci_artifact_flux_sources() -> None:
    """A deployable stored outside the component is refused (issue 31: the function reads only
    local blobs, and Flux deploys what the function read); a local Flux artifact is served."""
    r = _resource(
        {"type": "ociRegistry", "imageReference": "http://10.0.0.1:5000/charts/app:1.0"},
        Digest("SHA-256", "genericBlobDigest/v1", "a" * 64),
    )
    cv = _cv_with(r)
    for flavour in ("helm", "kustomize"):
        with pytest.raises(ComponentError, match="stored outside the component .*10.0.0.1:5000"):
            flux_source(cv, r, flavour)  # type: ignore[arg-type]
    local = _resource(
        {
            "type": "localBlob",
            "localReference": SHA,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
        }
    )
    assert flux_source(_cv_with(local), local, "kustomize") == FluxSource(
        "oci://reg.example.com/base/component-descriptors/acme.org/x",
        SHA,
        FLUX_CONTENT_LAYER,
        "extract",
        "reg.example.com",
    )


def test_unknown_access_type() -> None:
    r = _resource({"type": "s3/v1", "bucket": "b"})
    with pytest.raises(ComponentError, match="resource r: access type 's3/v1'"):
        localized_reference(_cv_with(r), r)
    with pytest.raises(ComponentError, match="resource r: access type 's3/v1' cannot serve"):
        flux_source(_cv_with(r), r, "kustomize")


@pytest.mark.parametrize(
    "raw,norm",
    [
        ("ociArtifact", "ociArtifact"),
        ("ociArtifact/v1", "ociArtifact"),
        ("OCIImage/v1", "ociArtifact"),
        ("ociRegistry", "ociArtifact"),
        ("ociImage", "ociArtifact"),
        ("OCIARTIFACT/V1", "ociArtifact"),
        ("localBlob", "localBlob"),
        ("LocalBlob/v1", "localBlob"),
        ("OCIImageLayer", "ociBlob"),
        ("s3", "s3"),
    ],
)
def test_normalize_access_type(raw: str, norm: str) -> None:
    assert normalize_access_type(raw) == norm


def test_parse_image_reference() -> None:
    r = parse_image_reference(f"http://127.0.0.1:5000/upstream/podinfo:6.2.0@{IMG}", "t")
    assert (r.host, r.path, r.tag, r.digest, r.scheme) == (
        "127.0.0.1:5000",
        "upstream/podinfo",
        "6.2.0",
        IMG,
        "http",
    )
    r = parse_image_reference("nginx:1.0", "t")
    assert (r.host, r.path, r.tag) == ("", "nginx", "1.0")
    with pytest.raises(ComponentError, match="not a valid OCI reference"):
        parse_image_reference("UPPER/Case:1", "t")
