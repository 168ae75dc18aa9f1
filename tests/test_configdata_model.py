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
    assert cd.localization[1].targets() == [("repository", "image.repository"), ("tag", "image.tag")]


BASE = "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\n"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("apiVersion: config.ocm.software/v1\nkind: ConfigData\n", "apiVersion: must be config.ocm.software/v1alpha1"),
        ("apiVersion: config.ocm.software/v1alpha1\nkind: Config\n", "kind: must be ConfigData"),
        ("kind: ConfigData\n", "apiVersion is missing"),
        (BASE + "localisation: []\n", "localisation: unknown field"),
        (BASE + "localization:\n- file: a.yaml\n  image: x\n  resource: {name: i}\n  imgae: y\n",
         "localization[0].imgae: unknown field"),
        (BASE + "configuration:\n  rules:\n  - value: 1\n    file: a.yaml\n", "configuration.rules[0].path: Field required"),
        (BASE + "localization:\n- file: a.yaml\n  image: x\n  resource: {}\n", "localization[0].resource.name: Field required"),
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
    bomb = BASE + "metadata:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"  {chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(6)
    )
    with pytest.raises(Exception) as e:
        parse_configdata(bomb)
    assert "alias bomb" in str(e.value)


def test_rule_files_are_normalised_and_confined():
    cd = parse_configdata(BASE + "localization:\n- {file: ./manifests//deploy.yaml, image: x, resource: {name: i}}\n"
                          "configuration:\n  rules:\n  - {value: 1, file: ./a.yaml, path: x}\n")
    assert cd.localization[0].file == "manifests/deploy.yaml"
    assert cd.configuration.rules[0].file == "a.yaml"
    for bad in ("../x.yaml", "/etc/x.yaml", "a/../../x.yaml"):
        with pytest.raises(InvalidConfigData) as e:
            parse_configdata(BASE + f"configuration:\n  rules:\n  - {{value: 1, file: '{bad}', path: x}}\n")
        assert "configuration.rules[0].file: must be a file path relative to the resource root" in str(e.value)
