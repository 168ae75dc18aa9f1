"""SOURCE strings as the OCM CLI writes them, and opening local sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from function.errors import ComponentError
from function.ocm.ctf import CtfSource
from function.ocm.directory import DescriptorFileSource, DirectorySource
from function.ocm.location import (
    Location,
    format_location,
    open_source,
    parse_location,
    parse_repository,
)
from function.ocm.model import Repository
from function.ocm.oci import OciSource

NAME = "acme.org/sack8s/podinfo"


@pytest.mark.parametrize(
    "text,repo,component,version",
    [
        (
            "oci::http://127.0.0.1:5000/source//acme.org/sack8s/podinfo:6.2.0",
            Repository("127.0.0.1:5000", "source", True),
            NAME,
            "6.2.0",
        ),
        (
            "OCIRegistry::https://ghcr.io/org/sub//acme.org/sack8s/podinfo",
            Repository("ghcr.io", "org/sub", False),
            NAME,
            None,
        ),
        (
            "http://host:5000/base//acme.org/sack8s/podinfo:1.0.0+build.1",
            Repository("host:5000", "base", True),
            NAME,
            "1.0.0+build.1",
        ),
        (
            "ghcr.io/org//acme.org/sack8s/podinfo:6.2.0",
            Repository("ghcr.io", "org", False),
            NAME,
            "6.2.0",
        ),
        (
            "oci://reg.local:5000/a/b//acme.org/sack8s/podinfo:v1",
            Repository("reg.local:5000", "a/b", False),
            NAME,
            "v1",
        ),
        ("OCI::ghcr.io//acme.org/sack8s/podinfo:1", Repository("ghcr.io", "", False), NAME, "1"),
    ],
)
def test_oci_sources(text: str, repo: Repository, component: str, version: str | None) -> None:
    loc = parse_location(text)
    assert loc == Location(kind="oci", repository=repo, component=component, version=version)
    assert parse_location(format_location(loc)) == loc


def test_oci_scheme_with_plain_http_flag() -> None:
    loc = parse_location("oci://10.1.2.3:5000/x//acme.org/sack8s/podinfo:6.2.0", plain_http=True)
    assert loc.repository == Repository("10.1.2.3:5000", "x", True)
    # A spelled scheme always wins over the flag.
    assert (
        parse_location("https://h.io/x//acme.org/a/b:1", plain_http=True).repository.plain_http
        is False
    )


def test_ctf_sources(fixtures_dir: Path) -> None:
    assert parse_location("ctf::./dir//acme.org/sack8s/podinfo:6.2.0") == Location(
        kind="ctf", path=Path("dir"), component=NAME, version="6.2.0"
    )
    assert parse_location("CommonTransportFormat::/tmp/x//acme.org/sack8s/podinfo").kind == "ctf"
    ctf = fixtures_dir / "ctf"
    assert parse_location(f"{ctf}//{NAME}:6.3.0") == Location(
        kind="ctf", path=ctf, component=NAME, version="6.3.0"
    )
    assert parse_location(str(ctf)) == Location(kind="ctf", path=ctf)


def test_local_kinds(tmp_path: Path, fixtures_dir: Path) -> None:
    (tmp_path / "component-descriptor.yaml").write_bytes(
        (fixtures_dir / "descriptors" / "source-6.2.0.yaml").read_bytes()
    )
    assert parse_location(str(tmp_path)).kind == "dir"
    assert parse_location(str(tmp_path / "component-descriptor.yaml")).kind == "descriptor"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ComponentError, match="holds neither artifact-index.json"):
        parse_location(str(empty))
    with pytest.raises(ComponentError, match="does not exist"):
        parse_location(str(tmp_path / "missing"))


def test_repository_form() -> None:
    assert parse_repository("oci::http://127.0.0.1:5000/source") == Location(
        kind="oci", repository=Repository("127.0.0.1:5000", "source", True)
    )
    assert parse_repository("ctf::./out").path == Path("out")
    with pytest.raises(ComponentError, match="names a component"):
        parse_repository("oci::http://127.0.0.1:5000/source//acme.org/a/b:1")


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "is empty"),
        ("foo::bar//acme.org/a/b:1", "unknown repository type 'foo'"),
        ("oci::http://127.0.0.1:5000/source//Not_A_Name:1", "not a valid OCM component name"),
        ("oci::http://127.0.0.1:5000/source//acme.org/a/b:", "empty version"),
        ("oci::http://bad host/x//acme.org/a/b:1", "not a registry host"),
        ("oci::http://h.io/UPPER//acme.org/a/b:1", "not valid in an OCI repository name"),
        ("ctf::http://h.io/x//acme.org/a/b:1", "is a local path, not a URL"),
        ("a\nb", "control characters"),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(ComponentError, match=message):
        parse_location(text)


def test_open_source(tmp_path: Path, fixtures_dir: Path) -> None:
    mirror = Repository("127.0.0.1:5000", "source", True)
    src = open_source(parse_location(str(fixtures_dir / "ctf")), registry_repository=mirror)
    assert isinstance(src, CtfSource) and src.repository == mirror
    (tmp_path / "component-descriptor.json").write_bytes(
        (fixtures_dir / "descriptors" / "source-6.2.0.json").read_bytes()
    )
    assert isinstance(open_source(parse_location(str(tmp_path))), DirectorySource)
    assert isinstance(
        open_source(parse_location(str(tmp_path / "component-descriptor.json"))),
        DescriptorFileSource,
    )
    oci = open_source(parse_location("oci::http://127.0.0.1:5000/source//acme.org/a/b:1"))
    assert isinstance(oci, OciSource) and oci.repository == Repository(
        "127.0.0.1:5000", "source", True
    )


# --------------------------------------------------------------------------- properties

_label = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
_host = st.builds(
    lambda labels, port: ".".join(labels) + (f":{port}" if port else ""),
    st.lists(_label, min_size=1, max_size=3),
    st.one_of(st.none(), st.integers(1, 65535)),
)
_base = st.lists(
    st.from_regex(r"[a-z0-9]{1,6}(?:[._-][a-z0-9]{1,4})?", fullmatch=True), max_size=3
).map("/".join)
_component = st.builds(
    lambda dom, tld, path: f"{dom}.{tld}/" + "/".join(path),
    _label,
    st.from_regex(r"[a-z]{2,4}", fullmatch=True),
    st.lists(_label, min_size=1, max_size=3),
)
_version = st.one_of(
    st.none(),
    st.from_regex(
        r"v?[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?:-rc\.[0-9])?(?:\+b[0-9])?", fullmatch=True
    ),
)


@given(_host, _base, st.booleans(), st.one_of(st.none(), _component), _version)
@settings(max_examples=200, deadline=None)
def test_oci_round_trip(
    host: str, base: str, plain: bool, component: str | None, version: str | None
) -> None:
    if component is None:
        version = None
    loc = Location(
        kind="oci", repository=Repository(host, base, plain), component=component, version=version
    )
    assert parse_location(format_location(loc)) == loc


@given(
    st.from_regex(r"/[a-z0-9_]{1,8}(?:/[a-z0-9_.-]{1,8}){0,3}", fullmatch=True),
    st.one_of(st.none(), _component),
    _version,
)
@settings(max_examples=100, deadline=None)
def test_ctf_round_trip(path: str, component: str | None, version: str | None) -> None:
    if component is None:
        version = None
    loc = Location(kind="ctf", path=Path(path), component=component, version=version)
    assert parse_location(format_location(loc)) == loc


@given(st.text(max_size=120))
@settings(max_examples=500, deadline=None)
def test_parser_never_raises_anything_else(text: str) -> None:
    for parse in (parse_location, parse_repository):
        try:
            parse(text)
        except ComponentError:
            pass


@given(
    st.lists(
        st.sampled_from(
            [
                "oci::",
                "ctf::",
                "http://",
                "//",
                ":",
                "/",
                "acme.org",
                "a",
                ".",
                "..",
                "@",
                " ",
                "1.0",
            ]
        ),
        max_size=12,
    )
)
@settings(max_examples=500, deadline=None)
def test_parser_never_raises_on_fragments(parts: list[str]) -> None:
    try:
        parse_location("".join(parts))
    except ComponentError:
        pass
