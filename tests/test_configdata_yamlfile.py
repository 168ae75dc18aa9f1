"""Applying substitutions to YAML text: the file stays the author's, multi-document rules are strict."""

from __future__ import annotations

import pytest

from function.configdata.engine import apply_to_file
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.errors import InvalidConfigData


def sub(
    path: str, value, file: str = "f.yaml", rule: str = "configuration.rules[0]"
) -> Substitution:
    return Substitution(rule, "path", file, parse_path(path), value)


DEPLOY = """\
# leading comment
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app  # the name
  annotations:
    "a.b/c": 'x'
spec:
  replicas: 1  # how many
  template:
    spec:
      containers:
        - name: app
          image: "ghcr.io/a/b:1" # pinned later
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
data:
  A: "1"
"""


def test_round_trip_keeps_comments_order_quotes_and_separators():
    r = apply_to_file(
        DEPLOY,
        "f.yaml",
        [
            sub("spec.template.spec.containers[0].image", "r.io/a/b@sha256:" + "e" * 64),
            sub("spec.replicas", 3),
            sub('metadata.annotations["a.b/c"]', "y"),
        ],
    )
    out = r.text
    assert out.startswith("# leading comment\n---\napiVersion: apps/v1\n")
    assert "  replicas: 3  # how many\n" in out
    assert '          image: "r.io/a/b@sha256:' + "e" * 64 + '" # pinned later\n' in out
    assert "    \"a.b/c\": 'y'\n" in out
    assert "  name: app  # the name\n" in out
    assert "\n---\napiVersion: v1\nkind: ConfigMap\n" in out
    assert '  A: "1"\n' in out
    assert [(c.document, c.old) for c in r.changes] == [(0, "ghcr.io/a/b:1"), (0, 1), (0, "x")]


def test_unchanged_file_is_returned_verbatim():
    r = apply_to_file(DEPLOY, "f.yaml", [sub("x", 1, file="other.yaml")])
    assert r.text == DEPLOY and r.changes == () and len(r.not_applicable) == 1


def test_missing_key_is_created_in_the_document_where_its_parent_exists():
    r = apply_to_file(DEPLOY, "f.yaml", [sub("data.B", "new")])
    assert r.changes[0].document == 1 and r.changes[0].created == 1 and r.changes[0].old is None
    assert r.text.endswith('  A: "1"\n  B: new\n')


def test_path_in_several_documents_is_ambiguous():
    with pytest.raises(InvalidConfigData) as e:
        apply_to_file(DEPLOY, "f.yaml", [sub("metadata.name", "x")])
    assert "exists in documents 0, 1: ambiguous" in str(e.value)
    assert "configuration.rules[0].path (file f.yaml)" in str(e.value)


def test_creatable_in_several_documents_is_ambiguous():
    with pytest.raises(InvalidConfigData) as e:
        apply_to_file(DEPLOY, "f.yaml", [sub("metadata.labels", {"a": "b"})])
    assert "could be created in documents 0, 1: ambiguous" in str(e.value)


def test_deeper_existing_prefix_wins():
    # spec.template exists only in document 0; document 1 has no spec at all
    r = apply_to_file(DEPLOY, "f.yaml", [sub("spec.template.metadata.labels.app", "x")])
    assert r.changes[0].document == 0 and r.changes[0].created == 3


def test_resolving_nowhere_names_each_document():
    with pytest.raises(InvalidConfigData) as e:
        apply_to_file(DEPLOY, "f.yaml", [sub("spec.template.spec.containers[5].image", "x")])
    msg = str(e.value)
    assert "resolves in none of the 2 documents" in msg and "out of range" in msg


def test_single_document_errors_name_the_path():
    with pytest.raises(InvalidConfigData) as e:
        apply_to_file("a: 1\n", "f.yaml", [sub("a.b", 2)])
    assert "path a.b: key 'b' applied to a, which is a scalar (int)" in str(e.value)


def test_single_document_creates_deep_keys_like_yq():
    r = apply_to_file("a: {}\n", "f.yaml", [sub("x.y.z", 2)])
    assert r.text == "a: {}\nx:\n  y:\n    z: 2\n"


def test_later_substitution_sees_earlier_value_as_old():
    r = apply_to_file("a: 1\n", "f.yaml", [sub("a", 2, rule="localization[0]"), sub("a", 3)])
    assert [(c.rule, c.old, c.value) for c in r.changes] == [
        ("localization[0]", 1, 2),
        ("configuration.rules[0]", 2, 3),
    ]
    assert r.text == "a: 3\n"


def test_sequence_indentation_is_kept():
    text = "list:\n- a: 1\n  b: 2\nother:\n  - 1\n"
    r = apply_to_file(text, "f.yaml", [sub("list[0].a", 5)])
    # one style per file: the first one found wins (mixed styles are normalised to it)
    assert r.text == "list:\n- a: 5\n  b: 2\nother:\n- 1\n"


def test_wide_indentation_is_kept():
    text = "m:\n    k:\n        - a: 1\n          b: 2\n"
    r = apply_to_file(text, "f.yaml", [sub("m.k[0].a", 5)])
    assert r.text == text.replace("a: 1", "a: 5")


def test_map_values_become_block_yaml():
    r = apply_to_file("spec: {}\n", "f.yaml", [sub("spec.resources", {"limits": {"cpu": "1"}})])
    assert "resources:\n    limits:\n      cpu: '1'\n" in r.text


def test_invalid_yaml_names_the_file():
    with pytest.raises(Exception) as e:
        apply_to_file("a: [\n", "f.yaml", [sub("a", 1)])
    assert "f.yaml" in str(e.value) and "not valid YAML" in str(e.value)


def test_block_scalars_keep_their_style():
    text = "data:\n  conf: |\n    a=1\n    b=2\n"
    r = apply_to_file(text, "f.yaml", [sub("data.conf", "a=3\nb=4\n")])
    assert r.text == "data:\n  conf: |\n    a=3\n    b=4\n"


def test_empty_file_is_an_empty_map():
    r = apply_to_file(
        "# just a comment\n", "values.yaml", [sub("image.tag", "1", file="values.yaml")]
    )
    assert r.text.endswith("image:\n  tag: '1'\n")
    assert r.changes[0].created == 2


def test_created_keys_are_logged_at_debug(caplog):
    import logging

    with caplog.at_level(logging.DEBUG, logger="function.configdata.substitution"):
        apply_to_file("a: {}\n", "f.yaml", [sub("a.b", 1)])
    assert (
        "created missing key(s): configuration.rules[0]: f.yaml document 0 a.b: None -> 1 [created]"
        in caplog.text
    )


from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from function.configdata.paths import get

_keys = st.from_regex(r"[a-z][a-z0-9_.-]{0,6}", fullmatch=True)
_scalars = st.one_of(st.integers(-5, 5), st.booleans(), st.text(max_size=8), st.none())
_docs = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(_keys, inner, min_size=1, max_size=3),
    ),
    max_leaves=12,
).filter(lambda d: isinstance(d, dict))


def _leaf_paths(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaf_paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaf_paths(v, prefix + (i,))
    elif prefix:
        yield prefix


@settings(max_examples=150, deadline=None)
@given(_docs, st.data(), st.one_of(_scalars, st.text(max_size=20)))
def test_substitution_changes_exactly_one_value(doc, data, value):
    import io

    from function.configdata.paths import Path as P

    buf = io.StringIO()
    YAML(typ="safe", pure=True).dump(doc, buf)
    text = buf.getvalue()
    try:  # ruamel's own dumper sometimes writes flow YAML it cannot read back ({a: :0})
        assume(YAML(typ="safe", pure=True).load(text) == doc)
    except Exception:
        assume(False)
    leaves = list(_leaf_paths(doc))
    if not leaves:
        return
    steps = data.draw(st.sampled_from(leaves))
    r = apply_to_file(text, "f.yaml", [Substitution("r", "path", "f.yaml", P(steps), value)])
    after = YAML(typ="safe", pure=True).load(r.text)
    assert get(after, P(steps)) == value
    for other in leaves:
        if other != steps:
            assert get(after, P(other)) == get(doc, P(other))


@pytest.mark.parametrize("value", ["\x85", "a\u2028b", "x\x85y "])
def test_unicode_line_breaks_survive(value):
    r = apply_to_file("a: 'old'\n", "f.yaml", [sub("a", value)])
    assert YAML(typ="safe").load(r.text) == {"a": value}
