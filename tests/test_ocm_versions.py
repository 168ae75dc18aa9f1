"""Version constraints in the Masterminds/Flux style."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from function.errors import ComponentError
from function.ocm.versions import is_exact, parse_semver, pick_version, satisfies

AVAILABLE = ["6.2.0", "6.3.0"]


@pytest.mark.parametrize(
    "constraint,expected",
    [
        ("6.2.0", "6.2.0"),
        ("v6.2.0", "6.2.0"),
        ("=6.3.0", "6.3.0"),
        (">=6.2.0 <7.0.0", "6.3.0"),
        (">=6.2.0, <7", "6.3.0"),
        ("~6.2", "6.2.0"),
        ("~6.2.0", "6.2.0"),
        ("^6", "6.3.0"),
        ("^6.2.0", "6.3.0"),
        ("6.x", "6.3.0"),
        ("6.2.*", "6.2.0"),
        ("*", "6.3.0"),
        ("6.2", "6.2.0"),
        ("<6.3.0", "6.2.0"),
        ("<= 6.2", "6.2.0"),
        (">6.2", "6.3.0"),
        ("!=6.3.0", "6.2.0"),
        ("6.2 - 6.2.9", "6.2.0"),
        ("5.x || 6.2.x", "6.2.0"),
        ("~> 6.3", "6.3.0"),
        (">= 6.2.0", "6.3.0"),
    ],
)
def test_fixture_versions(constraint: str, expected: str) -> None:
    assert pick_version(AVAILABLE, constraint, where="t") == expected


def test_prereleases_only_when_named() -> None:
    tags = ["1.0.0", "1.1.0-rc.1", "v1.0.1", "latest", "junk"]
    assert pick_version(tags, "^1", where="t") == "v1.0.1"
    assert pick_version(tags, ">=1.1.0-0", where="t") == "1.1.0-rc.1"
    assert pick_version(tags, "1.1.0-rc.1", where="t") == "1.1.0-rc.1"
    assert pick_version(tags, "latest", where="t") == "latest"  # an exact tag string always matches


def test_zero_major_caret() -> None:
    tags = ["0.1.0", "0.1.5", "0.2.0", "0.0.3", "0.0.4"]
    assert pick_version(tags, "^0.1.0", where="t") == "0.1.5"
    assert pick_version(tags, "^0.0.3", where="t") == "0.0.3"
    assert pick_version(tags, "^0", where="t") == "0.2.0"


def test_semver_ordering() -> None:
    tags = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1"]
    assert pick_version(tags, ">=1.0.0-0 <1.0.0-rc.0", where="t") == "1.0.0-beta.11"


def test_errors_list_available() -> None:
    with pytest.raises(
        ComponentError, match=r"^c: no version satisfies '>=7' \(available: 6.3.0, 6.2.0\)$"
    ):
        pick_version(AVAILABLE, ">=7", where="c")
    many = [f"1.{i}.0" for i in range(25)]
    with pytest.raises(
        ComponentError, match=r"available: 1.24.0, 1.23.0, .*, 1.15.0 and 15 more\)"
    ):
        pick_version(many, ">=2", where="c")
    with pytest.raises(ComponentError, match="'foo' is not a version"):
        pick_version(AVAILABLE, "foo", where="c")
    with pytest.raises(ComponentError, match="empty"):
        pick_version(AVAILABLE, " ", where="c")


def test_helpers() -> None:
    assert is_exact("6.2.0") and is_exact("v6.2.0") and is_exact("=6.2.0")
    assert not is_exact("6.2") and not is_exact("^6")
    assert parse_semver("01.2.3") is None
    assert satisfies("6.2.0", "~6.2", where="t") and not satisfies("6.3.0", "~6.2", where="t")


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_never_raises_anything_else(constraint: str) -> None:
    try:
        pick_version(AVAILABLE, constraint, where="t")
    except ComponentError:
        pass
