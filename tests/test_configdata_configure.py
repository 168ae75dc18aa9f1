"""Configuration: defaults merged under values, JSON Schema enforced on both, dotted references only."""

from __future__ import annotations

from pathlib import Path

import pytest

from function.configdata.configure import deep_merge, merged_values, plan_configuration
from function.configdata.model import parse_configdata
from function.errors import InvalidConfigData, InvalidValues

DATA = Path(__file__).parent / "data" / "configdata"
BACKEND = parse_configdata((DATA / "backend" / "config.yaml").read_bytes())


def cd(body: str):
    return parse_configdata("apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\n" + body)


def test_backend_example_with_upstream_values():
    subs = plan_configuration(BACKEND, {"message": "This is a test message Pipeline Backend"})
    assert [(s.rule, s.file, str(s.path), s.value) for s in subs] == [
        ("configuration.rules[0]", "manifests/deploy.yaml", "spec.replicas", 1),
        (
            "configuration.rules[1]",
            "manifests/configmap.yaml",
            "data.PODINFO_CACHE_SERVER",
            "tcp://redis:6379",
        ),
        (
            "configuration.rules[2]",
            "manifests/configmap.yaml",
            "data.PODINFO_UI_MESSAGE",
            "This is a test message Pipeline Backend",
        ),
    ]


def test_deep_merge_is_yq_multiply():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert deep_merge(base, {"a": {"c": [3]}, "e": 2}) == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_user_value_of_wrong_type():
    with pytest.raises(InvalidValues) as e:
        plan_configuration(BACKEND, {"replicas": "three"})
    assert "values.replicas: 'three' is not of type 'integer'" in str(e.value)
    assert "properties/replicas/type" in str(e.value)
    assert e.value.where == "ConfigData configuration.schema"


def test_unknown_user_key():
    with pytest.raises(InvalidValues) as e:
        plan_configuration(BACKEND, {"replica": 2})
    assert "Additional properties are not allowed ('replica' was unexpected)" in str(e.value)


def test_defaults_violating_the_schema_fail_the_merged_check():
    bad = cd(
        "configuration:\n  defaults: {replicas: 1}\n  schema:\n    type: object\n"
        "    properties: {replicas: {type: string}}\n  rules: []\n"
    )
    with pytest.raises(InvalidValues) as e:
        merged_values(bad, {})
    assert "merged values (defaults + values).replicas: 1 is not of type 'string'" in str(e.value)


def test_required_is_checked_on_merged_values_only():
    c = cd(
        "configuration:\n  defaults: {a: 1}\n  schema:\n    type: object\n    required: [a, b]\n  rules: []\n"
    )
    with pytest.raises(InvalidValues) as e:
        merged_values(c, {})
    assert "'b' is a required property" in str(e.value) and "merged values" in str(e.value)
    assert merged_values(c, {"b": 2}) == {"a": 1, "b": 2}


def test_huge_values_are_not_echoed():
    with pytest.raises(InvalidValues) as e:
        plan_configuration(BACKEND, {"replicas": ["x" * 50] * 1000})
    assert len(str(e.value)) < 400
    assert "<list of 1000 items>" in str(e.value)


def test_draft07_schema_is_accepted():
    c = cd(
        "configuration:\n  schema:\n    $schema: http://json-schema.org/draft-07/schema#\n    type: object\n"
        "    properties: {count: {type: integer, exclusiveMinimum: 0}}\n  rules: []\n"
    )
    with pytest.raises(InvalidValues) as e:
        merged_values(c, {"count": 0})
    assert "values.count: 0 is less than or equal to the minimum of 0" in str(e.value)


def test_invalid_schema_is_a_configdata_error():
    c = cd("configuration:\n  schema: {type: objekt}\n  rules: []\n")
    with pytest.raises(InvalidConfigData) as e:
        merged_values(c, {})
    assert "configuration.schema: is not a valid JSON Schema" in str(e.value)


def test_values_must_be_a_map():
    with pytest.raises(InvalidValues):
        merged_values(BACKEND, ["a"])  # type: ignore[arg-type]


def test_missing_reference_names_rule_and_key():
    c = cd("configuration:\n  rules:\n  - {value: (( app.name )), file: a.yaml, path: x}\n")
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {"app": {}})
    msg = str(e.value)
    assert "configuration.rules[0].value (file a.yaml)" in msg and "'app.name'" in msg


def test_literals_and_nested_references():
    c = cd(
        "configuration:\n  defaults: {img: {tag: '1'}, ports: [80, 443]}\n  rules:\n"
        "  - {value: 3, file: a.yaml, path: x}\n"
        "  - {value: {t: (( img.tag )), p: '(( ports[1] ))'}, file: a.yaml, path: w}\n"
        "  - {value: ((img)), file: a.yaml, path: z}\n"
    )
    subs = plan_configuration(c, None)
    assert [s.value for s in subs] == [3, {"t": "1", "p": 443}, {"tag": "1"}]


def test_no_configuration_no_substitutions():
    assert plan_configuration(cd("localization: []\n"), {"x": 1}) == ()
