"""Credentials (htpasswd basic auth, the bearer-token flow), TLS with a private CA, and a
component written by Gardener's Python OCM bindings, all against real registries on loopback."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from support.faultproxy import MARKER
from support.oci_env import (
    COMPONENT,
    PASSWORD,
    USER,
    basic_auth_registry,
    fault_proxy,
    fixture_registry,
    htpasswd_file,
    need_gardener_ocm,
    pki,
    proxy,
    tls_registry,
    token_registry,
)

from function.cache import Cache
from function.errors import ComponentError
from function.ocm.model import Repository
from function.ocm.oci import (
    AllowedHost,
    BasicCredential,
    CredentialSet,
    OciSource,
    RegistryAccess,
    credentials_from_request_data,
)

pytestmark = pytest.mark.registry

SOURCE_DM = "sha256:b26fc2267f0e35e832634e1dff37d72921e67d697108be284416c34392a78095"


def plain_source(host: str, creds: CredentialSet | None) -> OciSource:
    access = RegistryAccess.build(
        [AllowedHost(host, plain_http=True)], credentials=creds, timeout=5
    )
    return OciSource(Repository(host, "source", plain_http=True), access, Cache())


def dockerconfig(host: str, user: str, password: str) -> dict[str, bytes]:
    import base64
    import json

    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {".dockerconfigjson": json.dumps({"auths": {f"http://{host}": {"auth": auth}}}).encode()}


# -- basic auth (distribution htpasswd) --------------------------------------------------------


async def test_basic_auth_right_password_from_dockerconfigjson(basic_auth_registry, caplog):
    caplog.set_level(logging.DEBUG)
    creds = credentials_from_request_data(dockerconfig(basic_auth_registry.host, USER, PASSWORD))
    async with plain_source(basic_auth_registry.host, creds) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        assert await src.list_versions(COMPONENT) in (["6.3.0", "6.2.0"], ["6.2.0", "6.3.0"])
    assert cv.descriptor_digest == SOURCE_DM
    assert PASSWORD not in caplog.text


async def test_basic_auth_from_username_password_secret(basic_auth_registry):
    creds = credentials_from_request_data(
        {"username": USER.encode(), "password": PASSWORD.encode()}
    )
    async with plain_source(basic_auth_registry.host, creds) as src:
        assert (await src.get(COMPONENT, "6.2.0")).descriptor_digest == SOURCE_DM


@pytest.mark.parametrize("creds", ["wrong", "none", "other-host"])
async def test_basic_auth_wrong_or_missing_password(basic_auth_registry, creds):
    wrong = "not-" + PASSWORD
    cred_set = {
        "wrong": credentials_from_request_data(dockerconfig(basic_auth_registry.host, USER, wrong)),
        "none": None,
        "other-host": credentials_from_request_data(
            dockerconfig("registry.example", USER, PASSWORD)
        ),
    }[creds]
    async with plain_source(basic_auth_registry.host, cred_set) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = str(err.value)
    assert type(err.value) is ComponentError
    assert (
        "unauthorized (HTTP 401)" in msg
        and basic_auth_registry.host in msg
        and f"{COMPONENT}:6.2.0" in msg
    )
    assert PASSWORD not in msg and wrong not in msg and PASSWORD not in repr(err.value)


# -- bearer token flow: distribution's own token auth with a loopback token service --------------


def token_source(reg_host: str, realm_host: str | None, creds: CredentialSet | None) -> OciSource:
    hosts = [AllowedHost(reg_host, plain_http=True)] + (
        [AllowedHost(realm_host, plain_http=True)] if realm_host else []
    )
    access = RegistryAccess.build(hosts, credentials=creds, timeout=5)
    return OciSource(Repository(reg_host, "source", plain_http=True), access, Cache())


async def test_distribution_token_auth(token_registry):
    reg, tokens = token_registry
    tokens.requests.clear()
    creds = credentials_from_request_data(dockerconfig(reg.host, USER, PASSWORD))
    async with token_source(reg.host, tokens.host, creds) as src:
        assert sorted(await src.list_versions(COMPONENT)) == ["6.2.0", "6.3.0"]
        cv = await src.get(COMPONENT, "6.2.0")
        chart = await src.blob(
            cv,
            "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315",
            "application/vnd.oci.image.manifest.v1+json",
        )
    assert cv.descriptor_digest == SOURCE_DM and b"helm" in chart
    assert len(tokens.requests) == 1  # one token for the repository's pull scope, reused


@pytest.mark.parametrize("password", ["wrong", None])
async def test_distribution_token_auth_refused(token_registry, password):
    reg, tokens = token_registry
    creds = CredentialSet(default=BasicCredential(USER, "not-" + PASSWORD)) if password else None
    async with token_source(reg.host, tokens.host, creds) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = str(err.value)
    assert "token service refused the credentials (HTTP 401)" in msg and reg.host in msg
    assert PASSWORD not in msg and MARKER not in msg


async def test_token_realm_must_be_on_the_allowlist(token_registry):
    reg, tokens = token_registry
    tokens.requests.clear()
    creds = CredentialSet(default=BasicCredential(USER, PASSWORD))
    async with token_source(reg.host, None, creds) as src:
        with pytest.raises(
            ComponentError, match=f"host {tokens.host} is not in the registry allowlist"
        ):
            await src.get(COMPONENT, "6.2.0")
    assert tokens.requests == []


# -- bearer token flow (emulated by the proxy in front of the real registry) ----------------------


async def test_bearer_token_flow(proxy):
    proxy.token_auth = (USER, PASSWORD)
    creds = CredentialSet(by_host={proxy.host: BasicCredential(USER, PASSWORD)})
    async with plain_source(proxy.host, creds) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        await src.blob(
            cv,
            "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315",
            "application/vnd.oci.image.manifest.v1+json",
        )
    assert cv.descriptor_digest == SOURCE_DM
    token_gets = [r for r in proxy.requests if r.path.startswith("/token?")]
    assert len(token_gets) == 1  # one token for the repository scope, reused
    assert (
        "scope=repository%3Asource%2Fcomponent-descriptors%2Facme.org%2Fsack8s%2Fpodinfo%3Apull"
        in token_gets[0].path
    )
    assert token_gets[0].headers["authorization"].startswith("Basic ")
    after = proxy.requests[proxy.requests.index(token_gets[0]) + 1 :]
    assert after and all(r.headers.get("authorization", "").startswith("Bearer ") for r in after)


async def test_bearer_token_flow_wrong_password(proxy):
    proxy.token_auth = (USER, PASSWORD)
    creds = CredentialSet(default=BasicCredential(USER, "nope"))
    async with plain_source(proxy.host, creds) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = str(err.value)
    assert (
        "token service refused the credentials (HTTP 401)" in msg
        and MARKER not in msg
        and "nope" not in msg
    )


async def test_bearer_realm_must_be_allowlisted(proxy):
    proxy.token_auth = (USER, PASSWORD)
    # the realm is the proxy itself; allow only a differently-spelled host -> realm refused
    access = RegistryAccess.build([AllowedHost(proxy.host, plain_http=True)], timeout=5)
    src = OciSource(Repository(proxy.host, "source", True), access, Cache())
    proxy_port = proxy.port
    real_host = proxy.host
    try:
        proxy.port = 1  # the challenge now names realm http://127.0.0.1:1/token
        async with src:
            with pytest.raises(
                ComponentError, match="host 127.0.0.1:1 is not in the registry allowlist"
            ):
                await src.get(COMPONENT, "6.2.0")
    finally:
        proxy.port = proxy_port
    assert not any(r.path.startswith("/token") for r in proxy.requests) and real_host == proxy.host


# -- TLS with a private CA -----------------------------------------------------------------------


def tls_source(host: str, ca: str | None) -> OciSource:
    access = RegistryAccess.build([AllowedHost(host, ca_bundle=ca)], timeout=5)
    return OciSource(Repository(host, "copied-oci", plain_http=False), access, Cache())


async def test_tls_with_the_ca_bundle(tls_registry, pki):
    async with tls_source(tls_registry.host, pki.ca_pem) as src:
        cv = await src.get(COMPONENT, "6.2.0")
    assert (
        cv.descriptor_digest
        == "sha256:76d8802cd5c18997b1e3e1a726a359d6163b0a4c8e58a1178c1a5ab18467525f"
    )


async def test_tls_without_the_ca_bundle_is_a_clear_error(tls_registry):
    async with tls_source(tls_registry.host, None) as src:
        with pytest.raises(ComponentError) as err:
            await src.get(COMPONENT, "6.2.0")
    msg = str(err.value)
    assert type(err.value) is ComponentError
    assert (
        f"TLS certificate of {tls_registry.host} not trusted (configure a CA bundle for this host)"
        in msg
    )


async def test_tls_with_another_ca_is_refused(tls_registry, tmp_path):
    from support.tlsca import make_pki

    other = make_pki(tmp_path / "other", name="someone else")
    async with tls_source(tls_registry.host, other.ca_pem) as src:
        with pytest.raises(ComponentError, match="not trusted"):
            await src.get(COMPONENT, "6.2.0")


# -- written by gardener-ocm -----------------------------------------------------------------------


async def test_component_uploaded_by_gardener_ocm_reads_back(tls_registry, pki, monkeypatch):
    need_gardener_ocm()
    import oci.client
    import ocm
    import ocm.upload
    import requests

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(pki.ca_file))
    base = f"{tls_registry.host}/gardener"
    name, version = "acme.org/sack8s/gardener-made", "1.0.0+build.7"
    component = ocm.Component(
        name=name,
        version=version,
        repositoryContexts=[ocm.OciOcmRepository(baseUrl=base)],
        provider="acme.org",
        sources=[],
        componentReferences=[],
        resources=[
            ocm.Resource(
                name="image",
                version="6.2.0",
                type="ociImage",
                relation=ocm.ResourceRelation.EXTERNAL,
                access=ocm.OciAccess(imageReference="ghcr.io/stefanprodan/podinfo:6.2.0"),
            )
        ],
    )
    client = oci.client.Client(
        session=requests.Session(),
        max_retries=0,
        # OCI tags cannot hold "+": the OCM convention, which gardener-ocm leaves to the caller
        tag_preprocessing_callback=lambda tag: tag.replace("+", ".build-"),
    )
    ocm.upload.upload_component_descriptor(component, oci_client=client, on_exist="overwrite")

    access = RegistryAccess.build([AllowedHost(tls_registry.host, ca_bundle=pki.ca_pem)], timeout=5)
    async with OciSource(Repository(tls_registry.host, "gardener"), access, Cache()) as src:
        assert await src.list_versions(name) == [version]  # tag 1.0.0.build-build.7 decoded
        cv = await src.get(name, version)
    assert cv.descriptor.name == name and cv.descriptor.version == version
    (res,) = cv.descriptor.resources
    assert (
        res.name == "image" and res.access["imageReference"] == "ghcr.io/stefanprodan/podinfo:6.2.0"
    )
    assert (
        cv.layers[0].media_type
        == "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml+tar"
    )
    assert dataclasses.is_dataclass(cv)


async def test_revoked_bearer_token_is_replaced_once(proxy):
    proxy.token_auth = (USER, PASSWORD)
    creds = CredentialSet(default=BasicCredential(USER, PASSWORD))
    async with plain_source(proxy.host, creds) as src:
        cv = await src.get(COMPONENT, "6.2.0")
        proxy._token = "rotated-" + proxy._token  # the service revokes every token it gave out
        data = await src.blob(
            cv,
            "sha256:29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051",
            "application/yaml",
        )
    assert data.startswith(b"apiVersion")
    assert len([r for r in proxy.requests if r.path.startswith("/token?")]) == 2
