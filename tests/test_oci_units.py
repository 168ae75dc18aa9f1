"""Pure parts of the OCI source: challenge parsing, credentials, manifest discovery, the cache."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from function.cache import Cache
from function.errors import InvalidPolicy
from function.ocm.layout import (
    ACCEPT_MANIFESTS,
    LayoutError,
    decode_tag,
    encode_tag,
    find_descriptor_manifest,
    is_manifest_media_type,
)
from function.ocm.oci import (
    BasicCredential,
    CredentialSet,
    credentials_from_request_data,
    parse_www_authenticate,
)
from function.ocm.oci.config import AllowedHost, RegistryAccess, normalize_host

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64

# -- WWW-Authenticate ----------------------------------------------------------------------------


def test_parse_bearer_challenge():
    (c,) = parse_www_authenticate(
        'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"'
    )
    assert c.scheme == "bearer"
    assert c.params == {
        "realm": "https://auth.example/token",
        "service": "registry.example",
        "scope": "repository:a/b:pull,push",
    }


@pytest.mark.parametrize(
    "header, expected",
    [
        ('Basic realm="Registry Realm"', [("basic", {"realm": "Registry Realm"})]),
        ("Basic", [("basic", {})]),
        ("", []),
        (None, []),
        (
            'Basic realm="a", Bearer realm="b",service=c',
            [("basic", {"realm": "a"}), ("bearer", {"realm": "b", "service": "c"})],
        ),
        (
            "Bearer realm=https://x/token,service=svc",
            [("bearer", {"realm": "https://x/token", "service": "svc"})],
        ),
        ('Bearer REALM="r", Service="s"', [("bearer", {"realm": "r", "service": "s"})]),
        (r'Bearer realm="a\"b"', [("bearer", {"realm": 'a"b'})]),
        ("Negotiate abc==", [("negotiate", {})]),
        (
            'Bearer realm="unterminated',
            [("bearer", {"realm": ""})],
        ),  # garbage: an empty realm, unusable
    ],
)
def test_parse_www_authenticate_forms(header, expected):
    assert [(c.scheme, c.params) for c in parse_www_authenticate(header)] == expected


# -- credentials -----------------------------------------------------------------------------------


def _dcj(auths: dict) -> dict[str, bytes]:
    return {".dockerconfigjson": json.dumps({"auths": auths}).encode()}


def test_dockerconfigjson_auth_and_username_forms():
    auth = base64.b64encode(b"u1:p:with:colons").decode()
    creds = credentials_from_request_data(
        _dcj(
            {
                "https://Reg.Example:5000/v1/": {"auth": auth},
                "other.example": {"username": "u2", "password": "p2"},
                "token-only.example": {"identitytoken": "x"},
            }
        )
    )
    assert creds.for_host("reg.example:5000") == BasicCredential("u1", "p:with:colons")
    assert creds.for_host("OTHER.example") == BasicCredential("u2", "p2")
    assert creds.for_host("other.example:443") == BasicCredential("u2", "p2")
    assert creds.for_host("token-only.example") is None
    assert creds.for_host("unknown.example") is None


def test_username_password_secret():
    default = credentials_from_request_data({"username": b"u", "password": b"p"})
    assert default.for_host("any.example") == BasicCredential("u", "p")
    scoped = credentials_from_request_data(
        {"username": b"u", "password": b"p", "registry": b"https://r.example"}
    )
    assert (
        scoped.for_host("r.example") == BasicCredential("u", "p")
        and scoped.for_host("x.example") is None
    )


@pytest.mark.parametrize(
    "data, match",
    [
        ({".dockerconfigjson": b"{not json super-secret"}, "not valid JSON"),
        (_dcj({"r.example": {"auth": "!!!super-secret"}}), "auth is not base64"),
        (
            _dcj({"r.example": {"auth": base64.b64encode(b"super-secret").decode()}}),
            "auth is not base64",
        ),
        ({"username": b"u"}, "both username and password"),
        ({"token": b"super-secret"}, "neither .dockerconfigjson nor username/password"),
    ],
)
def test_bad_credential_secrets_never_echo_values(data, match):
    with pytest.raises(InvalidPolicy, match=match) as err:
        credentials_from_request_data(data)
    assert "super-secret" not in str(err.value)


def test_credential_repr_hides_password():
    cred = BasicCredential("user", "hunter2")
    assert "hunter2" not in repr(cred) and "hunter2" not in repr(CredentialSet(default=cred))


def test_allowlist_normalisation():
    access = RegistryAccess.build(
        ["Reg.Example:5000", AllowedHost("https://b.example/path", plain_http=True)]
    )
    assert access.allowed("reg.example:5000") is not None
    assert access.allowed("b.example").plain_http
    assert access.allowed("reg.example") is None
    assert normalize_host("http://user:pw@h.example:1/x") == "h.example:1"


# -- manifests ---------------------------------------------------------------------------------------


def test_accept_lists_all_four_types():
    for mt in (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ):
        assert mt in ACCEPT_MANIFESTS
        assert is_manifest_media_type(mt)
    assert not is_manifest_media_type("application/x-tar")
    assert not is_manifest_media_type("application/vnd.cncf.helm.chart.content.v1.tar+gzip")


def test_tag_encoding_round_trip():
    assert encode_tag("1.0.0+build.7") == "1.0.0.build-build.7"
    assert decode_tag(encode_tag("1.0.0+build.7")) == "1.0.0+build.7"


def test_descriptor_manifest_found_by_artifact_type_not_position():
    index = {
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": D1, "size": 3},
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": D2,
                "size": 5,
                "artifactType": "application/vnd.ocm.software.component-descriptor.v2",
            },
        ]
    }
    assert find_descriptor_manifest(index).digest == D2
    index["manifests"][1]["artifactType"] = "something/else"
    with pytest.raises(LayoutError, match="no child with artifactType"):
        find_descriptor_manifest(index)


# -- cache --------------------------------------------------------------------------------------------


async def test_cache_lru_by_bytes():
    cache = Cache(max_bytes=10)
    calls: list[str] = []

    def fetcher(key: str, size: int):
        async def fetch() -> bytes:
            calls.append(key)
            return b"x" * size

        return fetch

    await cache.immutable("a", fetcher("a", 4))
    await cache.immutable("b", fetcher("b", 4))
    await cache.immutable("a", fetcher("a", 4))  # hit; a is now most recent
    await cache.immutable("c", fetcher("c", 4))  # evicts b
    assert cache.size_bytes == 8 and cache.stats.evictions == 1
    await cache.immutable("a", fetcher("a", 4))
    await cache.immutable("b", fetcher("b", 4))
    assert calls == ["a", "b", "c", "b"]
    await cache.immutable("huge", fetcher("huge", 11))  # over budget: served, not kept
    assert cache.peek_immutable("huge") is None


async def test_cache_ttl():
    now = [0.0]
    cache = Cache(ttl=60, clock=lambda: now[0])
    n = [0]

    async def fetch() -> int:
        n[0] += 1
        return n[0]

    assert await cache.short_lived("tags", fetch) == 1
    now[0] = 59.9
    assert await cache.short_lived("tags", fetch) == 1
    now[0] = 60.0
    assert await cache.short_lived("tags", fetch) == 2
    assert cache.stats.expirations == 1


async def test_cache_coalesces_and_shares_errors_without_caching_them():
    cache = Cache()
    started = asyncio.Event()
    release = asyncio.Event()
    calls = [0]

    async def failing() -> bytes:
        calls[0] += 1
        started.set()
        await release.wait()
        raise RuntimeError("boom")

    tasks = [asyncio.create_task(cache.immutable("k", failing)) for _ in range(5)]
    await started.wait()
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert calls[0] == 1 and all(isinstance(r, RuntimeError) for r in results)
    assert cache.stats.coalesced == 4

    async def ok() -> bytes:
        calls[0] += 1
        return b"v"

    assert await cache.immutable("k", ok) == b"v" and calls[0] == 2
