"""OciSource against Debian's docker-registry serving what OCM CLI v0.9.1 wrote (FACTS.md)."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json

import pytest
from conftest import FIXTURES
from support.oci_env import (
    COMPONENT,
    basic_auth_registry,
    fault_proxy,
    fixture_registry,
    proxy,
)

from function.cache import Cache
from function.errors import ComponentError
from function.ocm.descriptor import parse_descriptor
from function.ocm.model import Repository
from function.ocm.oci import AllowedHost, OciSource, RegistryAccess, open_registry

pytestmark = pytest.mark.registry

DESCRIPTOR_MANIFESTS = {
    "source": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095",
    "by-ref": "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095",
    "copied-default": "sha256:65f37a0f9d1fdf139672b0202ec7c55d516779b4aa7cceb268a98aa22a3d3476",
    "copied-oci": "sha256:76d8802cd5c18997b1e3e1a726a359d6163b0a4c8e58a1178c1a5ab18467525f",
}
CHART_MANIFEST = "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


def source_for(host: str, base: str, cache: Cache | None = None, **limits) -> OciSource:
    access = RegistryAccess.build([AllowedHost(host, plain_http=True)], **limits)
    return OciSource(Repository(host, base, plain_http=True), access=access, cache=cache or Cache())


@pytest.mark.parametrize("mode", sorted(DESCRIPTOR_MANIFESTS))
async def test_every_transfer_mode_resolves_to_the_stored_descriptor(fixture_registry, mode):
    async with source_for(fixture_registry.host, mode) as src:
        cv = await src.get(COMPONENT, "6.2.0")
    stored = (FIXTURES / "descriptors" / f"{mode}-6.2.0.json").read_bytes()
    expected = parse_descriptor(
        stored, "application/vnd.ocm.software.component-descriptor.v2+json", "stored"
    )
    assert cv.descriptor == expected
    assert dict(cv.descriptor.raw) == json.loads(stored)
    assert cv.descriptor_digest == DESCRIPTOR_MANIFESTS[mode]
    assert [l.media_type for l in cv.layers] == [
        "application/vnd.ocm.software.component-descriptor.v2+json",
        "application/x-tar",
        "application/x-tar+gzip",
        "application/yaml",
    ]
    assert cv.repository == Repository(fixture_registry.host, mode, plain_http=True)


@pytest.mark.parametrize("mode", sorted(DESCRIPTOR_MANIFESTS))
async def test_chart_manifest_and_layer_and_plain_blobs(fixture_registry, mode):
    async with source_for(fixture_registry.host, mode) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        chart = {r.name: r for r in cv.descriptor.resources}["chart"]
        ref = chart.access["localReference"]
        assert ref == CHART_MANIFEST
        manifest = json.loads(await src.blob(cv, ref, chart.access["mediaType"]))
        (layer,) = manifest["layers"]
        assert layer["mediaType"] == MT_CHART_LAYER
        tgz = await src.blob(cv, layer["digest"], layer["mediaType"])
        assert tgz[:2] == b"\x1f\x8b" and gzip.decompress(tgz)
        config = {r.name: r for r in cv.descriptor.resources}["config"]
        data = await src.blob(cv, config.access["localReference"], config.access["mediaType"])
        assert data.startswith(b"apiVersion")
        assert "sha256:" + hashlib.sha256(data).hexdigest() == config.access["localReference"]


async def test_version_listing_decodes_tags(fixture_registry):
    async with source_for(fixture_registry.host, "source") as src:
        assert sorted(await src.list_versions(COMPONENT)) == ["6.2.0", "6.3.0"]
        cv = await src.get(COMPONENT, "6.3.0")
        assert cv.version == "6.3.0"
        assert (
            cv.descriptor_digest
            == "sha256:30de57abc2e2993f9e5de0724ac6a1008ed8333e9e40e9c79b22030b25adfb1f"
        )
    async with source_for(fixture_registry.host, "copied-oci") as src:
        assert await src.list_versions(COMPONENT) == ["6.2.0"]


async def test_location_factory_defaults_to_the_repository_host_only(fixture_registry):
    src = open_registry(Repository(fixture_registry.host, "source", plain_http=True), cache=Cache())
    async with src:
        assert (await src.get(COMPONENT, "6.2.0")).descriptor_digest == DESCRIPTOR_MANIFESTS[
            "source"
        ]
        assert src.access.allowed(fixture_registry.host).plain_http


async def test_plain_http_refused_unless_the_host_is_marked(fixture_registry):
    access = RegistryAccess.build([AllowedHost(fixture_registry.host, plain_http=False)])
    async with OciSource(Repository(fixture_registry.host, "source", True), access, Cache()) as src:
        with pytest.raises(ComponentError, match="not marked plain-HTTP"):
            await src.get(COMPONENT, "6.2.0")


async def test_host_not_on_allowlist_is_refused_before_connecting(fixture_registry, proxy):
    access = RegistryAccess.build([AllowedHost("registry.example:5000", plain_http=True)])
    async with OciSource(Repository(proxy.host, "source", True), access, Cache()) as src:
        with pytest.raises(ComponentError, match="not in the registry allowlist") as err:
            await src.get(COMPONENT, "6.2.0")
    assert proxy.host in str(err.value) and COMPONENT in str(err.value)
    assert proxy.requests == []


async def test_missing_version_is_one_clear_error(fixture_registry):
    async with source_for(fixture_registry.host, "source") as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "9.9.9")
    msg = str(err.value)
    assert f"component {COMPONENT}:9.9.9" in msg and fixture_registry.host in msg and "404" in msg
    assert type(err.value) is ComponentError


async def test_missing_component_listing(fixture_registry):
    async with source_for(fixture_registry.host, "source") as src:
        with pytest.raises(ComponentError, match="no such repository"):
            await src.list_versions("acme.org/sack8s/nothing")


async def test_oversized_blob_is_refused(fixture_registry):
    async with source_for(fixture_registry.host, "source", max_blob_bytes=600) as src:
        cv = await src.get(COMPONENT, "6.2.0")  # descriptor layer 2242 B is capped separately
        tar = next(l for l in cv.layers if l.media_type == "application/x-tar")  # 4608 bytes
        with pytest.raises(ComponentError, match="exceeds the 600 byte limit") as err:
            await src.blob(cv, tar.digest, tar.media_type)
    assert f"{COMPONENT}:6.2.0" in str(err.value) and tar.digest in str(err.value)


# -- cache -------------------------------------------------------------------------------------


def _ttl_clock():
    now = [1000.0]
    return now, (lambda: now[0])


async def test_second_read_makes_no_registry_request(proxy):
    cache = Cache(ttl=60)
    async with source_for(proxy.host, "source", cache) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        await src.blob(cv, CHART_MANIFEST, MT_MANIFEST)
        await src.list_versions(COMPONENT)
        first = len(proxy.requests)
        assert first == cache.stats.registry_requests and first > 0
        again = await src.get(COMPONENT, "6.2.0")
        await src.blob(again, CHART_MANIFEST, MT_MANIFEST)
        await src.list_versions(COMPONENT)
    # a new source sharing the cache (a new request) is just as quiet
    async with source_for(proxy.host, "source", cache) as src2:
        await src2.get(COMPONENT, "6.2.0")
        await src2.blob(again, CHART_MANIFEST, MT_MANIFEST)
    assert len(proxy.requests) == first
    assert cache.stats.registry_requests == first
    assert again is cv


async def test_ttl_expiry_refetches_tags_but_never_digests(proxy):
    now, clock = _ttl_clock()
    cache = Cache(ttl=60, clock=clock)
    async with source_for(proxy.host, "source", cache) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        await src.list_versions(COMPONENT)
        await src.blob(cv, CHART_MANIFEST, MT_MANIFEST)
        proxy.requests.clear()
        now[0] += 61
        await src.list_versions(COMPONENT)
        again = await src.get(COMPONENT, "6.2.0")
        await src.blob(cv, CHART_MANIFEST, MT_MANIFEST)
    paths = [r.path for r in proxy.requests]
    assert paths == [
        f"/v2/source/component-descriptors/{COMPONENT}/tags/list?n=1000",
        f"/v2/source/component-descriptors/{COMPONENT}/manifests/6.2.0",
    ]
    assert again is cv  # same index digest: the parsed version comes from the digest-keyed entry
    assert cache.stats.expirations == 2


async def test_concurrent_identical_fetches_are_coalesced(proxy):
    cache = Cache()
    async with source_for(proxy.host, "source", cache) as src:
        results = await asyncio.gather(*(src.get(COMPONENT, "6.2.0") for _ in range(8)))
    assert all(r is results[0] for r in results)
    single = len(proxy.requests)
    assert single == 4  # tag (index), descriptor manifest, config, descriptor layer: nothing twice
    assert cache.stats.coalesced >= 7
    assert len({r.path for r in proxy.requests}) == single


@pytest.mark.parametrize(
    "mode, deployable", [("source", "chart"), ("copied-default", "manifests-gz")]
)
async def test_location_to_loaded_component(fixture_registry, mode, deployable):
    """The whole path the function takes: location text -> open_source -> load_component."""
    from function.ocm.fetch import load_component
    from function.ocm.location import open_source, parse_location

    loc = parse_location(f"oci::http://{fixture_registry.host}/{mode}//{COMPONENT}")
    src = open_source(loc)
    assert isinstance(src, OciSource)
    async with src:
        loaded = await load_component(
            src, COMPONENT, ">=6.2.0 <6.3.0", deployable=(deployable, {}), configdata=("", {})
        )
    assert loaded.component.version == "6.2.0"
    assert loaded.component.descriptor_digest == DESCRIPTOR_MANIFESTS[mode]
    files = {name for content in loaded.contents.values() for name in content}
    assert ("Chart.yaml" in files) if deployable == "chart" else ("kustomization.yaml" in files)
