"""Image references must split exactly as go-containerregistry did for upstream's controller."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from function.configdata.localize import field_value
from function.ocm.imageref import BadReference, image_name, parse_reference

D = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "ref, image, registry, repository, fqr, tag",
    [
        (
            "nginx",
            "index.docker.io/library/nginx:latest",
            "index.docker.io",
            "library/nginx",
            "index.docker.io/library/nginx",
            "latest",
        ),
        (
            "nginx:1.25",
            "index.docker.io/library/nginx:1.25",
            "index.docker.io",
            "library/nginx",
            "index.docker.io/library/nginx",
            "1.25",
        ),
        (
            "docker.io/nginx:1",
            "index.docker.io/library/nginx:1",
            "index.docker.io",
            "library/nginx",
            "index.docker.io/library/nginx",
            "1",
        ),
        (
            "bitnami/redis:7",
            "index.docker.io/bitnami/redis:7",
            "index.docker.io",
            "bitnami/redis",
            "index.docker.io/bitnami/redis",
            "7",
        ),
        (
            f"nginx@{D}",
            f"index.docker.io/library/nginx@{D}",
            "index.docker.io",
            "library/nginx",
            "index.docker.io/library/nginx",
            D,
        ),
        (
            "ghcr.io/stefanprodan/podinfo:6.2.0",
            "ghcr.io/stefanprodan/podinfo:6.2.0",
            "ghcr.io",
            "stefanprodan/podinfo",
            "ghcr.io/stefanprodan/podinfo",
            "6.2.0",
        ),
        (
            f"ghcr.io/stefanprodan/podinfo:6.2.0@{D}",
            f"ghcr.io/stefanprodan/podinfo@{D}",
            "ghcr.io",
            "stefanprodan/podinfo",
            "ghcr.io/stefanprodan/podinfo",
            f"6.2.0@{D}",
        ),
        (
            "localhost:5000/x:1",
            "localhost:5000/x:1",
            "localhost:5000",
            "x",
            "localhost:5000/x",
            "1",
        ),
        (
            "localhost:5000/team/app",
            "localhost:5000/team/app:latest",
            "localhost:5000",
            "team/app",
            "localhost:5000/team/app",
            "latest",
        ),
        (
            f"127.0.0.1:5000/upstream/podinfo:6.2.0@{D}",
            f"127.0.0.1:5000/upstream/podinfo@{D}",
            "127.0.0.1:5000",
            "upstream/podinfo",
            "127.0.0.1:5000/upstream/podinfo",
            f"6.2.0@{D}",
        ),
        (
            f"127.0.0.1:5000/base/component-descriptors/acme.org/x@{D}",
            f"127.0.0.1:5000/base/component-descriptors/acme.org/x@{D}",
            "127.0.0.1:5000",
            "base/component-descriptors/acme.org/x",
            "127.0.0.1:5000/base/component-descriptors/acme.org/x",
            D,
        ),
        # ggcr v0.21.7 (pinned by ocm-controller v0.32.0's go.mod; commit 4b7672c7 "preserve
        # localhost registry references", ref_test.go "localhost/testimage:mytag"): a first
        # segment "localhost" is a registry; any other one without '.' or ':' is not.
        ("localhost/foo:1", "localhost/foo:1", "localhost", "foo", "localhost/foo", "1"),
        (
            f"localhost/foo:1@{D}",
            f"localhost/foo@{D}",
            "localhost",
            "foo",
            "localhost/foo",
            f"1@{D}",
        ),
        (
            "localhost/team/app",
            "localhost/team/app:latest",
            "localhost",
            "team/app",
            "localhost/team/app",
            "latest",
        ),
        (
            "localhostx/foo:1",
            "index.docker.io/localhostx/foo:1",
            "index.docker.io",
            "localhostx/foo",
            "index.docker.io/localhostx/foo",
            "1",
        ),
        ("Localhost/foo:1", None, None, None, None, None),
    ],
)
def test_fields_follow_go_containerregistry(ref, image, registry, repository, fqr, tag):
    if (
        image is None
    ):  # ggcr compares "localhost" case-sensitively: "Localhost" is a repository, and invalid
        with pytest.raises(BadReference):
            parse_reference(ref)
        return
    r = parse_reference(ref)
    assert field_value(r, "image") == image
    assert field_value(r, "registry") == registry
    assert field_value(r, "repository") == repository
    assert field_value(r, "fullyQualifiedRepository") == fqr
    assert field_value(r, "tag") == tag


@pytest.mark.parametrize(
    "ref, fragment",
    [
        ("", "repository name must be specified"),
        ("Upper/Case:1", "invalid characters"),
        ("repo:", "no tag name after the colon"),
        ("repo@sha256:abc", "64 lowercase hex"),
        ("repo@md5:" + "a" * 32, "unsupported digest algorithm"),
        ("a@b@c", "more than one '@'"),
        ("http://ghcr.io/x:1", "must not carry a URL scheme"),
        ("repo:" + "t" * 129, "1 to 128"),
    ],
)
def test_bad_references_name_the_problem(ref, fragment):
    with pytest.raises(BadReference) as e:
        parse_reference(ref, where="ConfigData localization[0].resource")
    assert fragment in str(e.value)
    assert e.value.where == "ConfigData localization[0].resource"


def test_image_name_strips_tag_and_digest_but_not_port():
    assert image_name("localhost:5000/x:1") == "localhost:5000/x"
    assert image_name(f"ghcr.io/a/b:1@{D}") == "ghcr.io/a/b"
    assert image_name("nginx") == "nginx"


_seg = st.from_regex(r"[a-z0-9]{1,8}(?:[._-][a-z0-9]{1,8})?", fullmatch=True)
_host = st.one_of(
    st.just(""),
    st.from_regex(r"[a-z]{1,8}\.[a-z]{2,4}", fullmatch=True),
    st.from_regex(r"[a-z]{1,8}(\.[a-z]{1,4})?:[0-9]{2,5}", fullmatch=True),
)
_tag = st.one_of(st.just(""), st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True))
_digest = st.one_of(
    st.just(""), st.from_regex(r"[a-f0-9]{64}", fullmatch=True).map(lambda h: "sha256:" + h)
)


@settings(max_examples=300)
@given(_host, st.lists(_seg, min_size=1, max_size=4), _tag, _digest)
def test_generated_references_round_trip(host, segs, tag, digest):
    repo = "/".join(segs)
    ref = (
        (f"{host}/" if host else "")
        + repo
        + (f":{tag}" if tag else "")
        + (f"@{digest}" if digest else "")
    )
    r = parse_reference(ref)
    assert r.digest == digest
    assert r.identifier == (digest or tag or "latest")
    if host:
        assert r.registry == host and r.repository == repo
    # Name() parses back to itself: localization output is a valid, stable reference.
    again = parse_reference(r.name)
    assert (
        again.name == r.name and again.registry == r.registry and again.repository == r.repository
    )
    if digest:
        assert "@" in r.name and f":{tag}@" not in r.name
    # what a tag rule writes: TAG@DIGEST, the digest, or the tag; "repo:" + it parses back pinned
    assert r.pinned_tag == (f"{tag}@{digest}" if tag and digest else digest or tag or "latest")
    if tag:
        pinned = parse_reference(f"{r.fully_qualified_repository}:{r.pinned_tag}")
        assert (pinned.digest, pinned.tag) == (digest, tag)


@settings(max_examples=500)
@given(st.text(max_size=80))
def test_arbitrary_text_only_raises_our_error(text):
    try:
        r = parse_reference(text)
    except BadReference as e:
        assert e.reason == "InvalidImageReference"
    else:
        assert r.registry and r.repository and r.identifier
