"""Every registry failure is ONE error naming component, version, registry and what failed,
never a credential or a response body. Faults come from a loopback proxy in front of the
real registry (tests/support/faultproxy.py) and from tampered copies of the storage."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest
from support.faultproxy import MARKER
from support.oci_env import (
    COMPONENT,
    PASSWORD,
    USER,
    blob_path,
    fault_proxy,
    fixture_registry,
    proxy,
    tampered_registry,
)
from support.registry import free_port

from function.cache import Cache
from function.errors import ComponentError, DigestMismatch, SourceUnavailable
from function.ocm.model import Repository
from function.ocm.oci import AllowedHost, BasicCredential, CredentialSet, OciSource, RegistryAccess
from function.ocm.oci.client import RegistryClient, RegistryError

pytestmark = pytest.mark.registry

DESCRIPTOR_LAYER = "sha256:6e4882aea244716c0b8db6c7aac33be318a37300bca8eaadba7dae08e4c80f07"
CONFIG_BLOB = "sha256:e87797c7f6ed3fc253fc3c7ca1fcaa74b56959b189c34a2166f32998fc249f80"
DESCRIPTOR_MANIFEST = "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095"
INDEX = "sha256:93ce79480c74f8cd235435cef7f61d796f415865bb909126556b09f528ca28a0"
YAML_BLOB = "sha256:29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051"


def source(host: str, *extra_hosts: str, timeout: float = 2.0, **kw) -> OciSource:
    access = RegistryAccess.build(
        [
            AllowedHost(host, plain_http=True),
            *(AllowedHost(h, plain_http=True) for h in extra_hosts),
        ],
        credentials=CredentialSet(default=BasicCredential(USER, PASSWORD)),
        timeout=timeout,
        **kw,
    )
    return OciSource(Repository(host, "source", plain_http=True), access, Cache())


def assert_one_clean_error(exc: BaseException, host: str, *, version: str | None = "6.2.0") -> str:
    msg = str(exc)
    assert f"component {COMPONENT}" + (f":{version}" if version else "") in msg
    assert f"registry {host}" in msg
    for secret in (PASSWORD, MARKER):
        assert secret not in msg
        assert secret not in repr(exc)
        assert secret not in str(getattr(exc, "__context__", "") or "")
    assert exc.__cause__ is None
    return msg


@pytest.fixture(autouse=True)
def no_secrets_in_logs(caplog):
    caplog.set_level(logging.DEBUG)
    yield
    assert PASSWORD not in caplog.text and MARKER not in caplog.text


# -- transient: SourceUnavailable ---------------------------------------------------------------


async def test_unreachable_registry():
    host = f"127.0.0.1:{free_port()}"
    async with source(host) as src:
        with pytest.raises(SourceUnavailable) as err:
            await src.get(COMPONENT, "6.2.0")
    assert "cannot connect" in assert_one_clean_error(err.value, host)


@pytest.mark.parametrize(
    "fault, expect",
    [
        ("reset", "connection broken"),
        ("500", "HTTP 500"),
        ("truncate", "connection broken"),
    ],
)
async def test_transient_faults(proxy, fault, expect):
    proxy.fault(fault, when=lambda m, p: "/blobs/" in p)
    async with source(proxy.host) as src:
        with pytest.raises(SourceUnavailable) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = assert_one_clean_error(err.value, proxy.host)
    assert expect in msg and "sha256:" in msg


async def test_stall_past_the_client_timeout(proxy):
    proxy.stall_seconds = 3.0
    proxy.fault("stall", when=lambda m, p: "/manifests/6.2.0" in p)
    async with source(proxy.host, timeout=0.5) as src:
        with pytest.raises(SourceUnavailable) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = assert_one_clean_error(err.value, proxy.host)
    assert "timed out" in msg and "tag 6.2.0" in msg


# -- permanent: ComponentError -------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, expect", [("401", "unauthorized (HTTP 401)"), ("403", "access denied (HTTP 403)")]
)
async def test_auth_failures(proxy, status, expect):
    proxy.fault(status)
    async with source(proxy.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    assert type(err.value) is ComponentError
    assert expect in assert_one_clean_error(err.value, proxy.host)
    if status == "401":  # the basic credentials were offered once, then given up
        assert [bool(r.headers.get("authorization")) for r in proxy.requests] == [False, True]


async def test_corrupted_body_byte_is_a_digest_mismatch(proxy):
    proxy.fault("corrupt", when=lambda m, p: p.endswith(DESCRIPTOR_LAYER))
    async with source(proxy.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    # content that does not hash to its digest: refused as such, never retried as transient
    assert type(err.value) is DigestMismatch
    msg = assert_one_clean_error(err.value, proxy.host)
    assert "digest mismatch" in msg and DESCRIPTOR_LAYER in msg


async def test_corrupted_tag_manifest_does_not_match_advertised_digest(proxy):
    proxy.fault("corrupt", when=lambda m, p: p.endswith("/manifests/6.2.0"))
    async with source(proxy.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    assert "digest mismatch: registry says " + INDEX in assert_one_clean_error(
        err.value, proxy.host
    )


async def test_redirect_to_a_disallowed_host_is_refused_before_connecting(proxy):
    proxy.fault("redirect", when=lambda m, p: "/blobs/" in p)
    async with source(proxy.host) as src:
        cv_err = None
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
        cv_err = err.value
    msg = assert_one_clean_error(cv_err, proxy.host)
    assert "refused redirect to host 169.254.169.254: not in the registry allowlist" in msg


async def test_redirect_to_an_allowed_host_is_followed_without_credentials(proxy, fixture_registry):
    # the proxy sends blob GETs to the real registry (an allowlisted "storage" host)
    proxy.redirect_to = f"http://{fixture_registry.host}/v2/source/component-descriptors/{COMPONENT}/blobs/{YAML_BLOB}"
    proxy.fault("redirect", when=lambda m, p: p.endswith(YAML_BLOB))
    try:
        async with source(proxy.host, fixture_registry.host) as src:
            cv = await src.get(COMPONENT, "6.2.0")
            data = await src.blob(cv, YAML_BLOB, "application/yaml")
        assert data.startswith(b"apiVersion")
        async with source(proxy.host) as src:  # the storage host is not allowed here
            cv = await src.get(COMPONENT, "6.2.0")
            with pytest.raises(
                ComponentError, match=f"refused redirect to host {fixture_registry.host}"
            ):
                await src.blob(cv, YAML_BLOB, "application/yaml")
    finally:
        proxy.redirect_to = FaultProxyDefaults.redirect_to


class FaultProxyDefaults:
    redirect_to = "http://169.254.169.254/latest/meta-data/"


def test_https_to_http_downgrade_is_refused():
    access = RegistryAccess.build(
        [AllowedHost("reg.example", plain_http=True), AllowedHost("store.example")]
    )
    client = RegistryClient(access)
    with pytest.raises(RegistryError, match="from https to plain http"):
        client.check_url("http://reg.example/x", previous="https://store.example/y")
    with pytest.raises(RegistryError, match="not in the registry allowlist"):
        client.check_url("https://169.254.169.254/latest")
    with pytest.raises(RegistryError, match="scheme 'file'"):
        client.check_url("file:///etc/passwd")
    assert client.check_url("https://store.example/v2/").host == "store.example"


async def test_oversized_content_length_aborts(proxy):
    async with source(proxy.host, max_blob_bytes=100) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        with pytest.raises(ComponentError, match="exceeds the 100 byte limit") as err:
            await src.blob(cv, YAML_BLOB, "application/yaml")
    assert_one_clean_error(err.value, proxy.host)


async def test_oversized_body_without_content_length_aborts_while_streaming(proxy):
    proxy.fault("chunked", when=lambda m, p: p.endswith(YAML_BLOB))
    async with source(proxy.host, max_blob_bytes=100) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        with pytest.raises(ComponentError, match="response exceeds the 100 byte limit") as err:
            await src.blob(cv, YAML_BLOB, "application/yaml")
    assert_one_clean_error(err.value, proxy.host)
    async with source(proxy.host) as src:  # chunked within the cap is fine
        cv = await src.get(COMPONENT, "6.2.0")
        assert (await src.blob(cv, YAML_BLOB, "application/yaml")).startswith(b"apiVersion")


# -- tampered storage -------------------------------------------------------------------------------


def _repo_dir(root: Path, base: str = "source") -> Path:
    return root / "docker/registry/v2/repositories" / base / "component-descriptors" / COMPONENT


def _put_manifest(root: Path, doc: dict, tag: str) -> str:
    data = json.dumps(doc).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    p = blob_path(root, digest)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    rev = _repo_dir(root) / "_manifests/revisions/sha256" / digest.split(":")[1] / "link"
    rev.parent.mkdir(parents=True, exist_ok=True)
    rev.write_text(digest)
    current = _repo_dir(root) / "_manifests/tags" / tag / "current/link"
    current.write_text(digest)
    return digest


async def test_tampered_descriptor_blob(tampered_registry):
    def tamper(root: Path) -> None:
        p = blob_path(root, DESCRIPTOR_LAYER)
        data = bytearray(p.read_bytes())
        data[10] ^= 0x01
        p.write_bytes(bytes(data))

    reg = tampered_registry(tamper)
    async with source(reg.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = assert_one_clean_error(err.value, reg.host)
    assert "digest mismatch" in msg and "component descriptor " + DESCRIPTOR_LAYER in msg


async def test_missing_config_blob(tampered_registry):
    reg = tampered_registry(lambda root: blob_path(root, CONFIG_BLOB).unlink())
    async with source(reg.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = assert_one_clean_error(err.value, reg.host)
    assert "component config " + CONFIG_BLOB in msg


async def test_index_without_descriptor_child(tampered_registry):
    def tamper(root: Path) -> None:
        index = json.loads(blob_path(root, INDEX).read_bytes())
        for child in index["manifests"]:
            child.pop("artifactType", None)
        _put_manifest(root, index, "6.2.0")

    reg = tampered_registry(tamper)
    async with source(reg.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    assert (
        "no child with artifactType application/vnd.ocm.software.component-descriptor.v2"
        in assert_one_clean_error(err.value, reg.host)
    )


async def test_descriptor_child_found_by_type_not_position(tampered_registry):
    def tamper(root: Path) -> None:
        index = json.loads(blob_path(root, INDEX).read_bytes())
        index["manifests"].reverse()
        _put_manifest(root, index, "6.2.0")

    reg = tampered_registry(tamper)
    async with source(reg.host) as src:
        cv = await src.get(COMPONENT, "6.2.0")
    assert cv.descriptor_digest == DESCRIPTOR_MANIFEST


async def test_tag_on_a_plain_manifest_is_the_descriptor_manifest(tampered_registry):
    def tamper(root: Path) -> None:
        (_repo_dir(root) / "_manifests/tags/6.2.0/current/link").write_text(DESCRIPTOR_MANIFEST)

    reg = tampered_registry(tamper)
    async with source(reg.host) as src:
        cv = await src.get(COMPONENT, "6.2.0")
    assert cv.descriptor_digest == DESCRIPTOR_MANIFEST
    assert cv.descriptor.name == COMPONENT


async def test_tag_on_a_foreign_manifest(tampered_registry):
    chart = "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"

    def tamper(root: Path) -> None:
        (_repo_dir(root) / "_manifests/tags/6.2.0/current/link").write_text(chart)

    reg = tampered_registry(tamper)
    async with source(reg.host) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    assert "is not an OCM component descriptor manifest" in assert_one_clean_error(
        err.value, reg.host
    )
