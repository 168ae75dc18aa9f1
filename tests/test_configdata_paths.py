"""yq-style rule paths: the supported subset parses, everything else is our error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from function.configdata.paths import PathMiss, format_path, get, parse_path, reach, set_value
from function.errors import InvalidConfigData


@pytest.mark.parametrize(
    "text, steps",
    [
        ("spec.replicas", ("spec", "replicas")),
        (".spec.replicas", ("spec", "replicas")),
        (
            "spec.template.spec.containers[0].image",
            ("spec", "template", "spec", "containers", 0, "image"),
        ),
        ("data.PODINFO_UI_MESSAGE", ("data", "PODINFO_UI_MESSAGE")),
        ('metadata.annotations["a.b/c"]', ("metadata", "annotations", "a.b/c")),
        ('.["x.y"]', ("x.y",)),
        ('["x.y"].z', ("x.y", "z")),
        ('a."b.c".d', ("a", "b.c", "d")),
        ('a["say \\"hi\\""]', ("a", 'say "hi"')),
        ("items[10][2]", ("items", 10, 2)),
        ("a-b.c_d.0", ("a-b", "c_d", "0")),
    ],
)
def test_supported_paths(text, steps):
    assert parse_path(text).steps == steps


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        (".", "whole document"),
        ("a..b", "empty key"),
        ("a.", "ends with '.'"),
        ("a[-1]", "unsupported selector"),
        ("a[*]", "unsupported selector"),
        ("a | b", "unsupported character"),
        ('a["b', "unterminated"),
        ("a[0]b", "missing '.'"),
        (".a.b |= 1", "unsupported character"),
        ("a.b ", "whitespace"),
    ],
)
def test_unsupported_paths_are_our_error(text, fragment):
    with pytest.raises(InvalidConfigData) as e:
        parse_path(text, where="ConfigData configuration.rules[0].path (file x.yaml)")
    assert fragment in str(e.value)
    assert "configuration.rules[0].path" in str(e.value)


def test_format_quotes_only_when_needed():
    assert format_path(("spec", "containers", 0, "image")) == "spec.containers[0].image"
    assert format_path(("metadata", "annotations", "a.b/c")) == 'metadata.annotations["a.b/c"]'
    assert format_path(("x.y",)) == '["x.y"]'


def test_set_creates_missing_map_keys_and_reports_old():
    doc = {"spec": {"replicas": 1}}
    assert set_value(doc, parse_path("spec.replicas"), 3) == (1, 0)
    assert set_value(doc, parse_path("spec.strategy.type"), "Recreate") == (None, 2)
    assert doc == {"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}}


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("spec.containers[3].image", "out of range: spec.containers has 1 entries"),
        ("spec.replicas.x", "key 'x' applied to spec.replicas, which is a scalar (int)"),
        ("spec[0]", "index [0] applied to spec, which is a map"),
        ("spec.volumes[0].name", "cannot be created"),
        ("spec.containers.name", "which is a list"),
    ],
)
def test_unsettable_paths_say_where(path, fragment):
    doc = {"spec": {"replicas": 1, "containers": [{"image": "x"}]}}
    with pytest.raises(PathMiss) as e:
        reach(doc, parse_path(path))
    assert fragment in str(e.value)
    assert doc == {"spec": {"replicas": 1, "containers": [{"image": "x"}]}}


_key = st.one_of(
    st.from_regex(r"[A-Za-z0-9_-]{1,10}", fullmatch=True),
    st.text(min_size=0, max_size=10),
)
_step = st.one_of(_key, st.integers(min_value=0, max_value=10_000))


@settings(max_examples=500)
@given(st.lists(_step, min_size=1, max_size=8))
def test_format_parse_round_trip(steps):
    text = format_path(tuple(steps))
    assert parse_path(text).steps == tuple(steps)
    assert parse_path("." + text).steps == tuple(steps)  # the optional leading dot


@settings(max_examples=1000)
@given(st.text(max_size=60))
def test_arbitrary_text_only_raises_our_error(text):
    try:
        p = parse_path(text)
    except InvalidConfigData:
        return
    assert p.steps
    assert parse_path(format_path(p.steps)).steps == p.steps


@given(st.text(alphabet='abc.[]"0123\\ ', max_size=30))
def test_path_like_text_only_raises_our_error(text):
    try:
        parse_path(text)
    except InvalidConfigData:
        pass


def test_get_missing_is_default():
    assert get({"a": [1]}, parse_path("a[3]"), "d") == "d"
