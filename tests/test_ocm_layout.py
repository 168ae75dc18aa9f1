"""One OCM layout walk (function/ocm/layout.py), the same cases over both storages.

Every case changes the layout the OCM CLI v0.9.1 wrote, in the same way, in a copy of the
fixture CTF and in a copy of the fixture registry storage served by the real
``docker-registry``; the CTF source and the OCI source must then agree: the same component
version, or the same error.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, need_path
from support.oci_env import COMPONENT, blob_path, tampered_registry

from function.cache import Cache
from function.errors import ComponentError
from function.ocm.ctf import CtfSource
from function.ocm.layout import MT_COMPONENT_CONFIG_LEGACY, encode_tag
from function.ocm.model import ComponentVersion, Repository
from function.ocm.oci import AllowedHost, OciSource, RegistryAccess

INDEX = "sha256:93ce79480c74f8cd235435cef7f61d796f415865bb909126556b09f528ca28a0"
DESCRIPTOR_MANIFEST = "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095"
DESCRIPTOR_LAYER = "sha256:6e4882aea244716c0b8db6c7aac33be318a37300bca8eaadba7dae08e4c80f07"
CHART_MANIFEST = "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class Storage:
    """The writes a case makes, on either storage: read and add blobs, point a tag."""

    def read(self, digest: str) -> bytes:
        raise NotImplementedError

    def write(self, data: bytes) -> str:
        raise NotImplementedError

    def tag(self, tag: str, digest: str, media_type: str) -> None:
        raise NotImplementedError

    def doc(self, digest: str) -> dict[str, Any]:
        return json.loads(self.read(digest))

    def put(self, doc: dict[str, Any]) -> str:
        return self.write(json.dumps(doc).encode())


class CtfStorage(Storage):
    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, digest: str) -> bytes:
        return (self.root / "blobs" / digest.replace(":", ".")).read_bytes()

    def write(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (self.root / "blobs" / digest.replace(":", ".")).write_bytes(data)
        return digest

    def tag(self, tag: str, digest: str, media_type: str) -> None:
        path = self.root / "artifact-index.json"
        index = json.loads(path.read_bytes())
        arts = [a for a in index["artifacts"] if a.get("tag") != tag]
        arts.append(
            {
                "repository": f"component-descriptors/{COMPONENT}",
                "tag": tag,
                "digest": digest,
                "mediaType": media_type,
            }
        )
        index["artifacts"] = arts
        path.write_text(json.dumps(index))


class RegistryStorage(Storage):
    """distribution's filesystem layout (blobs by digest, a repository's manifest revisions and tags)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = (
            root / "docker/registry/v2/repositories/source/component-descriptors" / COMPONENT
        )

    def read(self, digest: str) -> bytes:
        return blob_path(self.root, digest).read_bytes()

    def write(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        p = blob_path(self.root, digest)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        rev = self.repo / "_manifests/revisions/sha256" / digest.split(":")[1] / "link"
        rev.parent.mkdir(parents=True, exist_ok=True)
        rev.write_text(digest)
        return digest

    def tag(self, tag: str, digest: str, media_type: str) -> None:
        current = self.repo / "_manifests/tags" / tag / "current/link"
        current.parent.mkdir(parents=True, exist_ok=True)
        current.write_text(digest)


Tamper = Callable[[Storage], None]


def _untouched(s: Storage) -> None:
    pass


def _children_reversed(s: Storage) -> None:
    index = s.doc(INDEX)
    index["manifests"].reverse()
    s.tag("6.2.0", s.put(index), MT_INDEX)


def _no_artifact_type(s: Storage) -> None:
    index = s.doc(INDEX)
    for child in index["manifests"]:
        child.pop("artifactType", None)
    s.tag("6.2.0", s.put(index), MT_INDEX)


def _tag_on_descriptor_manifest(s: Storage) -> None:
    s.tag("6.2.0", DESCRIPTOR_MANIFEST, MT_MANIFEST)


def _tag_on_chart_manifest(s: Storage) -> None:
    s.tag("6.2.0", CHART_MANIFEST, MT_MANIFEST)


def _config_type(media_type: str, *, keep_artifact_type: bool) -> Tamper:
    def tamper(s: Storage) -> None:
        manifest = s.doc(DESCRIPTOR_MANIFEST)
        manifest["config"]["mediaType"] = media_type
        if not keep_artifact_type:
            manifest.pop("artifactType", None)
        s.tag("6.2.0", s.put(manifest), MT_MANIFEST)

    return tamper


def _descriptor_layer_flipped(s: Storage) -> None:
    data = bytearray(s.read(DESCRIPTOR_LAYER))
    data[10] ^= 0x01
    if isinstance(s, CtfStorage):
        (s.root / "blobs" / DESCRIPTOR_LAYER.replace(":", ".")).write_bytes(bytes(data))
    else:
        blob_path(s.root, DESCRIPTOR_LAYER).write_bytes(bytes(data))


def _other_version_tag(s: Storage) -> None:
    s.tag(encode_tag("6.2.0+x"), INDEX, MT_INDEX)


# (case, tamper, version asked for, error fragment or None for success)
CASES = [
    ("as written by the OCM CLI", _untouched, "6.2.0", None),
    ("index child found by type, not position", _children_reversed, "6.2.0", None),
    (
        "index without the descriptor artifactType",
        _no_artifact_type,
        "6.2.0",
        "has no child with artifactType application/vnd.ocm.software.component-descriptor.v2",
    ),
    ("tag on the descriptor manifest itself", _tag_on_descriptor_manifest, "6.2.0", None),
    (
        "tag on a manifest that is no OCM descriptor",
        _tag_on_chart_manifest,
        "6.2.0",
        "is not an OCM component descriptor manifest",
    ),
    (
        "legacy Gardener config type",
        _config_type(MT_COMPONENT_CONFIG_LEGACY, keep_artifact_type=False),
        "6.2.0",
        None,
    ),
    (
        "foreign config type, descriptor artifactType",
        _config_type("application/x-other", keep_artifact_type=True),
        "6.2.0",
        None,
    ),
    (
        "foreign config type, no artifactType",
        _config_type("application/x-other", keep_artifact_type=False),
        "6.2.0",
        "is not an OCM component descriptor manifest (config media type 'application/x-other')",
    ),
    ("descriptor layer changed", _descriptor_layer_flipped, "6.2.0", "digest mismatch"),
    (
        "tag naming another version",
        _other_version_tag,
        "6.2.0+x",
        f"the stored descriptor is {COMPONENT}:6.2.0, not {COMPONENT}:6.2.0+x",
    ),
]


async def _get_from_ctf(tmp_path: Path, tamper: Tamper, version: str) -> ComponentVersion:
    root = tmp_path / "ctf"
    shutil.copytree(need_path(FIXTURES / "ctf", "fixture CTF", "SACK8S_FIXTURES"), root)
    tamper(CtfStorage(root))
    return await CtfSource(root).get(COMPONENT, version)


async def _get_from_registry(start_registry: Any, tamper: Tamper, version: str) -> ComponentVersion:
    reg = start_registry(lambda root: tamper(RegistryStorage(root)))
    access = RegistryAccess.build([AllowedHost(reg.host, plain_http=True)])
    async with OciSource(Repository(reg.host, "source", plain_http=True), access, Cache()) as src:
        return await src.get(COMPONENT, version)


@pytest.mark.registry
@pytest.mark.parametrize("case, tamper, version, error", CASES, ids=[c[0] for c in CASES])
async def test_both_storages_walk_the_layout_alike(
    case, tamper, version, error, tmp_path, tampered_registry
):
    outcomes: dict[str, Any] = {}
    for storage, get in (
        ("ctf", lambda: _get_from_ctf(tmp_path, tamper, version)),
        ("registry", lambda: _get_from_registry(tampered_registry, tamper, version)),
    ):
        try:
            outcomes[storage] = await get()
        except ComponentError as e:
            outcomes[storage] = e
    ctf, registry = outcomes["ctf"], outcomes["registry"]
    if error is None:
        assert isinstance(ctf, ComponentVersion), f"CTF: {ctf}"
        assert isinstance(registry, ComponentVersion), f"registry: {registry}"
        assert (ctf.name, ctf.version, ctf.descriptor_digest) == (
            COMPONENT,
            version,
            registry.descriptor_digest,
        )
        assert ctf.layers == registry.layers and len(ctf.layers) == 4
        assert ctf.descriptor.resources == registry.descriptor.resources
    else:
        for storage, got in outcomes.items():
            assert isinstance(got, ComponentError), f"{storage} read {got!r}"
            assert f"component {COMPONENT}:{version}" in str(got), (storage, str(got))
            assert error in str(got), (storage, str(got))
        assert "CTF" in str(ctf) and "at registry" in str(registry)
