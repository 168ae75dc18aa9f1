"""Descriptor parsing against the exact bytes OCM CLI v0.9.1 wrote, plus the other encodings."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from function.errors import ComponentError
from function.ocm.descriptor import (
    MEDIA_TYPE_JSON,
    MEDIA_TYPE_YAML,
    MEDIA_TYPE_YAML_TAR,
    parse_descriptor,
)

IMG = "11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
CHART_620 = "d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
CHART_630 = "e1f633a724caa539db05c12b81e19d8452ea5d6c328feb82bcd218da7888bf23"
TAR = "2bef48462c47fb8eabf5f64aec4984bf2f50a2bd67e07c40546eba424168f6bd"
TGZ = "8e58f26c448517d24f1aa8900dee2092e683ebb7ff210198be8760a79f63ba97"
CONFIG = "29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"

SOURCE_IMAGE = {
    "type": "ociArtifact",
    "imageReference": f"http://127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:{IMG}",
}
IMAGES = {
    "source": SOURCE_IMAGE,
    "by-ref": SOURCE_IMAGE,
    "ctf": SOURCE_IMAGE,
    "copied-default": {
        "type": "LocalBlob/v1",
        "localReference": f"sha256:{IMG}",
        "mediaType": MANIFEST,
        "referenceName": "upstream/podinfo:6.2.0",
    },
    "copied-oci": {
        "type": "ociArtifact/v1",
        "imageReference": "http://127.0.0.1:5000/copied-oci/upstream/podinfo:6.2.0",
    },
}
CASES = [(p, "6.2.0") for p in IMAGES] + [("source", "6.3.0"), ("ctf", "6.3.0")]


def _expected(path: str, version: str) -> dict[str, dict[str, str]]:
    chart = CHART_620 if version == "6.2.0" else CHART_630
    return {
        "image": IMAGES[path],
        "chart": {
            "type": "LocalBlob/v1",
            "localReference": f"sha256:{chart}",
            "mediaType": MANIFEST,
        },
        "manifests": {
            "type": "LocalBlob/v1",
            "localReference": f"sha256:{TAR}",
            "mediaType": "application/x-tar",
        },
        "manifests-gz": {
            "type": "LocalBlob/v1",
            "localReference": f"sha256:{TGZ}",
            "mediaType": "application/x-tar+gzip",
        },
        "config": {
            "type": "LocalBlob/v1",
            "localReference": f"sha256:{CONFIG}",
            "mediaType": "application/yaml",
        },
    }


@pytest.mark.parametrize("path,version", CASES)
@pytest.mark.parametrize(
    "ext,media_type",
    [("json", MEDIA_TYPE_JSON), ("json", None), ("yaml", MEDIA_TYPE_YAML), ("yaml", None)],
)
def test_fixture_descriptors_parse(
    fixtures_dir: Path, path: str, version: str, ext: str, media_type: str | None
) -> None:
    data = (fixtures_dir / "descriptors" / f"{path}-{version}.{ext}").read_bytes()
    d = parse_descriptor(data, media_type, "test")
    assert (d.name, d.version, d.provider) == ("acme.org/sack8s/podinfo", version, "acme.org")
    assert [r.name for r in d.resources] == [
        "image",
        "chart",
        "manifests",
        "manifests-gz",
        "config",
    ]
    assert {r.name: dict(r.access) for r in d.resources} == _expected(path, version)
    types = {r.name: (r.type, r.relation) for r in d.resources}
    assert types["image"] == ("ociImage", "external")
    assert types["chart"] == ("helmChart", "local")
    assert types["manifests-gz"] == ("kustomize.ocm.fluxcd.io", "local")
    assert types["config"] == ("configdata.ocm.software", "local")
    image = d.resources[0]
    assert image.digest is not None
    assert image.digest.oci == f"sha256:{IMG}"
    assert image.digest.normalisation_algorithm == "genericBlobDigest/v1"
    assert d.raw["meta"] == {"schemaVersion": "v2"}


def _v2(**component: object) -> dict:
    base = {
        "name": "acme.org/x/y",
        "version": "1.0.0",
        "provider": "acme.org",
        "resources": [
            {
                "name": "r",
                "version": "1.0.0",
                "type": "blob",
                "relation": "local",
                "access": {"type": "localBlob"},
            }
        ],
    }
    base.update(component)
    return {"meta": {"schemaVersion": "v2"}, "component": base}


def test_configured_schema_version_and_provider_object() -> None:
    doc = _v2(provider={"name": "acme", "labels": [{"name": "a", "value": 1}]})
    doc["meta"] = {"configuredSchemaVersion": "v2"}
    d = parse_descriptor(json.dumps(doc).encode(), MEDIA_TYPE_JSON, "t")
    assert d.provider == "acme"


def test_null_lists_and_missing_resources() -> None:
    d = parse_descriptor(
        json.dumps(_v2(resources=None, sources=None)).encode(), MEDIA_TYPE_JSON, "t"
    )
    assert d.resources == ()


def test_v3alpha1() -> None:
    text = """
apiVersion: ocm.software/v3alpha1
kind: ComponentVersion
metadata:
  name: github.com/open-component-model/myapp
  provider:
    name: ocm
  version: v1.0.0
spec:
  resources:
    - name: myimage
      relation: external
      type: ociImage
      version: v1.0.0
      extraIdentity: {architecture: amd64}
      access:
        type: ociArtifact
        imageReference: myprivateregistry.com/open-component-model/myimage:v1.0.0
"""
    d = parse_descriptor(text.encode(), None, "t")
    assert (d.name, d.version, d.provider) == (
        "github.com/open-component-model/myapp",
        "v1.0.0",
        "ocm",
    )
    assert d.resources[0].extra_identity == {"architecture": "amd64"}
    gardener = text.replace("ocm.software/v3alpha1", "ocm.gardener.cloud/v3alpha1")
    assert parse_descriptor(gardener.encode(), MEDIA_TYPE_YAML, "t").name == d.name


def _tar(files: dict[str, bytes], symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tf.addfile(info)
    return buf.getvalue()


def test_yaml_tar(fixtures_dir: Path) -> None:
    yaml_bytes = (fixtures_dir / "descriptors" / "source-6.2.0.yaml").read_bytes()
    for name in ("component-descriptor.yaml", "./component-descriptor.yaml"):
        data = _tar({name: yaml_bytes})
        assert parse_descriptor(data, MEDIA_TYPE_YAML_TAR, "t").version == "6.2.0"
        assert parse_descriptor(data, None, "t").version == "6.2.0"  # sniffed


def test_yaml_tar_refusals(fixtures_dir: Path) -> None:
    with pytest.raises(ComponentError, match="exactly one component-descriptor.yaml, found 0"):
        parse_descriptor(_tar({"other.yaml": b"a: 1"}), MEDIA_TYPE_YAML_TAR, "t")
    with pytest.raises(ComponentError, match="is not a regular file"):
        parse_descriptor(_tar({}, symlink="component-descriptor.yaml"), MEDIA_TYPE_YAML_TAR, "t")
    with pytest.raises(ComponentError, match="more than 16 entries"):
        parse_descriptor(_tar({f"f{i}": b"" for i in range(20)}), MEDIA_TYPE_YAML_TAR, "t")
    with pytest.raises(ComponentError, match="not a valid tar"):
        parse_descriptor(b"garbage", MEDIA_TYPE_YAML_TAR, "t")


@pytest.mark.parametrize(
    "mutate,message",
    [
        (
            lambda c: c["resources"][0]["access"].pop("type"),
            r"t: component.resources\[0\].access: missing type",
        ),
        (lambda c: c["resources"][0].pop("access"), r"component.resources\[0\].access: missing"),
        (lambda c: c["resources"][0].pop("name"), r"component.resources\[0\].name: missing"),
        (
            lambda c: c["resources"][0].update(version=1.0),
            r"component.resources\[0\].version: must be a string",
        ),
        (lambda c: c["resources"][0].update(relation="x"), r"relation: must be local or external"),
        (
            lambda c: c["resources"][0].update(digest={"value": "ab"}),
            r"digest.hashAlgorithm: missing",
        ),
        (lambda c: c.update(resources={"a": 1}), r"component.resources: must be a list"),
        (
            lambda c: c.update(name="../../etc"),
            r"component.name: .* not a valid OCM component name",
        ),
        (lambda c: c.update(version="1.0 0"), r"component.version: .* not a valid version"),
        (lambda c: c.pop("provider"), r"component.provider: missing"),
    ],
)
def test_errors_name_the_field(mutate, message: str) -> None:
    doc = _v2()
    mutate(doc["component"])
    with pytest.raises(ComponentError, match=message):
        parse_descriptor(json.dumps(doc).encode(), MEDIA_TYPE_JSON, "t")


def test_schema_errors() -> None:
    with pytest.raises(ComponentError, match="meta.schemaVersion: unsupported schema version 'v3'"):
        parse_descriptor(b'{"meta":{"schemaVersion":"v3"},"component":{}}', MEDIA_TYPE_JSON, "t")
    with pytest.raises(ComponentError, match="apiVersion: unsupported"):
        parse_descriptor(b"apiVersion: v1\nkind: Pod\n", None, "t")
    with pytest.raises(ComponentError, match="not valid JSON"):
        parse_descriptor(b"{", MEDIA_TYPE_JSON, "t")
    with pytest.raises(ComponentError, match="must be a mapping"):
        parse_descriptor(b"[1]", MEDIA_TYPE_JSON, "t")
    with pytest.raises(ComponentError, match="more than"):
        parse_descriptor(b" " * (5 * 1024 * 1024), MEDIA_TYPE_JSON, "t")


def test_yaml_alias_bomb_refused() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    with pytest.raises(ComponentError, match="alias bomb"):
        parse_descriptor(bomb.encode(), MEDIA_TYPE_YAML, "t")


# --------------------------------------------------------------------------- robustness

from hypothesis import given, settings
from hypothesis import strategies as st

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(
    st.binary(max_size=600),
    st.sampled_from([None, MEDIA_TYPE_JSON, MEDIA_TYPE_YAML, MEDIA_TYPE_YAML_TAR]),
)
@settings(max_examples=300, deadline=None)
def test_random_bytes_only_component_errors(data: bytes, media_type: str | None) -> None:
    try:
        parse_descriptor(data, media_type, "t")
    except ComponentError:
        pass


@given(_json_values)
@settings(max_examples=300, deadline=None)
def test_random_documents_only_component_errors(component: object) -> None:
    doc = {"meta": {"schemaVersion": "v2"}, "component": component}
    try:
        parse_descriptor(json.dumps(doc).encode(), MEDIA_TYPE_JSON, "t")
    except ComponentError:
        pass
