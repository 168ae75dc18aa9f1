"""The ConfigData model: strict on our keys, tolerant of what upstream writers add and upstream ignores."""

from __future__ import annotations

from pathlib import Path

import pytest

from function.configdata.model import parse_configdata
from function.errors import InvalidConfigData

DATA = Path(__file__).parent / "data" / "configdata"


def test_upstream_examples_parse():
    for name in ("backend", "frontend"):
        cd = parse_configdata((DATA / name / "config.yaml").read_bytes())
        assert cd.localization[0].image == "spec.template.spec.containers[0].image"
        assert cd.configuration is not None and len(cd.configuration.rules) == 3


def test_fixture_config_with_informational_name(fixtures_dir):
    cd = parse_configdata((fixtures_dir / "inputs/config/config.yaml").read_bytes())
    assert [r.name for r in cd.localization] == ["image", "chart-image"]
    assert cd.localization[1].targets() == [
        ("repository", "image.repository"),
        ("tag", "image.tag"),
    ]


BASE = "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\n"


@pytest.mark.parametrize(
    "text, fragment",
    [
        (
            "apiVersion: config.ocm.software/v1\nkind: ConfigData\n",
            "apiVersion: must be config.ocm.software/v1alpha1",
        ),
        ("apiVersion: config.ocm.software/v1alpha1\nkind: Config\n", "kind: must be ConfigData"),
        (BASE + "localisation: []\n", "localisation: unknown field"),
        (
            BASE + "localization:\n- file: a.yaml\n  image: x\n  resource: {name: i}\n  imgae: y\n",
            "localization[0].imgae: unknown field",
        ),
        (
            BASE + "configuration:\n  rules:\n  - value: 1\n    file: a.yaml\n",
            "configuration.rules[0].path: Field required",
        ),
        (
            BASE + "localization:\n- file: a.yaml\n  image: x\n  resource: {}\n",
            "localization[0].resource.name: Field required",
        ),
        ("- a\n", "must be a YAML map"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_invalid_configdata_names_the_field(text, fragment):
    with pytest.raises(InvalidConfigData) as e:
        parse_configdata(text, "ConfigData config.yaml")
    assert fragment in str(e.value)
    assert str(e.value).startswith("ConfigData config.yaml")


def test_alias_bomb_is_refused():
    bomb = (
        BASE
        + "metadata:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"  {chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
            f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
            for i in range(6)
        )
    )
    with pytest.raises(Exception) as e:
        parse_configdata(bomb)
    assert "alias bomb" in str(e.value)


def test_rule_files_are_normalised_and_confined():
    cd = parse_configdata(
        BASE + "localization:\n- {file: ./manifests//deploy.yaml, image: x, resource: {name: i}}\n"
        "configuration:\n  rules:\n  - {value: 1, file: ./a.yaml, path: x}\n"
    )
    assert cd.localization[0].file == "manifests/deploy.yaml"
    assert cd.configuration.rules[0].file == "a.yaml"
    for bad in ("../x.yaml", "/etc/x.yaml", "a/../../x.yaml"):
        with pytest.raises(InvalidConfigData) as e:
            parse_configdata(
                BASE + f"configuration:\n  rules:\n  - {{value: 1, file: '{bad}', path: x}}\n"
            )
        assert (
            "configuration.rules[0].file: must be a file path relative to the resource root"
            in str(e.value)
        )


def test_missing_type_meta_is_accepted_with_a_finding_saying_what_to_add():
    # ocm-controller v0.32.0 never checks apiVersion/kind (pkg/configdata/configdata.go embeds
    # metav1.TypeMeta, decoded leniently); its unit-test ConfigData (upstream-v1 cases 01, 08) has none.
    cd = parse_configdata("configuration:\n  rules: []\n", "ConfigData a.yaml")
    (f,) = cd.findings
    assert f.code == "MissingTypeMeta"
    assert f.message == (
        "ConfigData a.yaml: apiVersion and kind are missing; read as a v1 ConfigData (ocm-controller "
        "v1 never checked them): add 'apiVersion: config.ocm.software/v1alpha1' and 'kind: ConfigData'"
    )
    (f,) = parse_configdata("kind: ConfigData\n", "ConfigData a.yaml").findings
    assert (
        "apiVersion is missing" in f.message
        and "add 'apiVersion: config.ocm.software/v1alpha1'" in f.message
    )
    assert parse_configdata(BASE, "ConfigData a.yaml").findings == ()


def test_configdata_is_read_as_yaml_1_1_like_upstream_and_each_retyped_scalar_is_a_finding():
    # P10: upstream (sigs.k8s.io/yaml -> go-yaml v2) reads `[x, y]` in defaults as ["x", true].
    cd = parse_configdata(
        BASE + "configuration:\n  defaults:\n    b: [x, y, 'n', no, 0777, 1_000, '0777', on]\n"
        "    when: 2024-01-01\n  rules: []\n",
        "ConfigData a.yaml",
    )
    assert cd.configuration.defaults["b"] == ["x", True, "n", False, 511, 1000, "0777", True]
    assert (
        cd.configuration.defaults["when"] == "2024-01-01"
    )  # a string, as go-yaml v2 decodes into interface{}
    paths = [f.path for f in cd.findings]
    assert paths == [
        "configuration.defaults.b[1]",
        "configuration.defaults.b[3]",
        "configuration.defaults.b[4]",
        "configuration.defaults.b[5]",
        "configuration.defaults.b[7]",
    ]
    assert cd.findings[0].message == (
        "ConfigData a.yaml configuration.defaults.b[1]: the unquoted 'y' is read as true (YAML 1.1, as "
        'ocm-controller v1 and Kubernetes tools read it), where a YAML 1.2 reader sees "y": quote it if the '
        "string is meant, or write true"
    )


def test_yaml_1_1_keys_become_strings_as_sigs_k8s_yaml_makes_them():
    cd = parse_configdata(
        BASE + "configuration:\n  defaults: {x: 1, y: 2, on: 3, 1: 4}\n  rules: []\n"
    )
    assert cd.configuration.defaults == {
        "x": 1,
        "true": 3,
        "1": 4,
    }  # y and on are both true: the last wins


def test_a_yaml_1_1_boolean_where_a_string_belongs_says_so():
    with pytest.raises(InvalidConfigData) as e:
        parse_configdata(
            BASE + "configuration:\n  rules:\n  - {value: 1, file: a.yaml, path: y}\n",
            "ConfigData a.yaml",
        )
    assert str(e.value) == (
        "ConfigData a.yaml: configuration.rules[0].path: Input should be a valid string (the "
        "unquoted 'y' is true in YAML 1.1, as upstream read it: quote it)"
    )


def test_yaml_1_1_reader_refuses_what_json_cannot_carry():
    with pytest.raises(InvalidConfigData) as e:
        parse_configdata("? [a, b]\n: 1\n", "ConfigData a.yaml")
    assert "a map key must be a scalar" in str(e.value)
    cd = parse_configdata(BASE + 'metadata: {a: !!int "0x10", b: !!float 1, c: !!str 1}\n')
    assert cd.metadata == {"a": 16, "b": 1.0, "c": "1"}
    with pytest.raises(InvalidConfigData) as e:
        parse_configdata(BASE + "metadata: {a: !!int x}\n", "ConfigData a.yaml")
    assert "cannot decode 'x' as !!int" in str(e.value)
