"""Values a team gives: "did you mean" against the schema, the limits `inspect` shows, and
flat ConfigMaps (one key per value) typed by the schema -- in the CLI and in the function."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from function.cli import main
from function.cli.inspection import schema_values
from function.configdata.flatvalues import flat_values, is_flat, typed
from function.edge.render import input_from_composition, load_docs, render

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples/component/inputs/config/config.yaml"
KUSTOMIZE = REPO / "examples/component/inputs/kustomize"

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["size"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "debug": {"type": "boolean"},
        "size": {"type": "string", "enum": ["small", "medium", "large"]},
        "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 20},
        "optional": {"type": ["integer", "null"]},
        "image": {
            "type": "object",
            "description": "Where the image comes from.",
            "properties": {"tag": {"type": "string", "minLength": 1}},
        },
    },
}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write_cd(tmp_path: Path, schema: dict[str, Any], defaults: dict[str, Any]) -> Path:
    cd = tmp_path / "cd.yaml"
    cd.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.ocm.software/v1alpha1",
                "kind": "ConfigData",
                "configuration": {
                    "defaults": defaults,
                    "schema": schema,
                    "rules": [
                        {"value": "(( replicas ))", "file": "d.yaml", "path": "spec.replicas"}
                    ],
                },
            }
        )
    )
    (tmp_path / "d.yaml").write_text("spec:\n  replicas: 1\n")
    return cd


def configure(tmp_path: Path, values: str, *extra: str):
    return configure_with(
        tmp_path, write_cd(tmp_path, SCHEMA, {"replicas": 1, "size": "small"}), values, *extra
    )


def configure_with(tmp_path: Path, cd: Path, values: str, *extra: str):
    """``sack8s configure`` of ``d.yaml`` (what :func:`write_cd` writes) with ``values``."""
    (tmp_path / "v.yaml").write_text(values)
    return run(
        "configure",
        "--config-data",
        str(cd),
        "--values",
        str(tmp_path / "v.yaml"),
        "--root",
        str(tmp_path),
        *extra,
        "d.yaml",
    )


# ---------------------------------------------------------------- did you mean


@pytest.mark.parametrize(
    ("values", "fragments"),
    [
        (
            "replicsa: 3\n",
            [
                "values: Additional properties are not allowed ('replicsa' was unexpected)",
                "did you mean 'replicas'?",
                "(schema rule additionalProperties)",
            ],
        ),
        (
            "replicsa: 3\ndebgu: true\n",
            ["did you mean 'replicas' for 'replicsa', 'debug' for 'debgu'?"],
        ),
        ("size: meduim\n", ["values.size: 'meduim' is not one of", "did you mean 'medium'?"]),
        ("Replicas: 3\n", ["did you mean 'replicas'?"]),
    ],
)
def test_schema_errors_say_did_you_mean(tmp_path, values, fragments):
    r = configure(tmp_path, values)
    assert r.exit_code == 1, r.output
    (line,) = r.stderr.splitlines()
    for f in fragments:
        assert f in line, line


def test_no_suggestion_when_nothing_is_close(tmp_path):
    r = configure(tmp_path, "colour: red\n")
    assert r.exit_code == 1
    assert "'colour' was unexpected" in r.stderr
    assert "did you mean" not in r.stderr


def test_required_key_given_under_another_spelling(tmp_path):
    cd = write_cd(tmp_path, {**SCHEMA, "additionalProperties": True}, {"replicas": 1})
    r = configure_with(tmp_path, cd, "szie: small\n")
    assert r.exit_code == 1
    assert "'size' is a required property: 'szie' is given: did you mean 'size'?" in r.stderr


def test_the_function_says_did_you_mean_too(monkeypatch):
    monkeypatch.chdir(REPO)
    xr = load_docs(["examples/xr.yaml"])[0]
    xr["spec"]["values"] = {"inline": {"replicsa": 3}}
    policy = input_from_composition(load_docs(["examples/composition.yaml"])[0], "composition")
    out = asyncio.run(render(xr, policy, observed=load_docs(["examples/observed/helm"])))
    assert out.fatal is not None, out.results
    assert "'replicsa' was unexpected): did you mean 'replicas'?" in out.fatal.message
    assert not out.resources


# ---------------------------------------------------------------- inspect limits


def test_schema_values_show_type_default_required_and_limits():
    values = {v["name"]: v for v in schema_values(SCHEMA, {"replicas": 1, "image": {"tag": "x"}})}
    assert values["replicas"] == {
        "name": "replicas",
        "type": "integer",
        "limits": {"minimum": 1, "maximum": 10},
        "default": "1",
    }
    assert values["size"]["required"] is True
    assert values["size"]["limits"] == {"enum": ["small", "medium", "large"]}
    assert values["name"]["limits"] == {"minLength": 2, "maxLength": 20, "pattern": "^[a-z]+$"}
    assert values["image.tag"] == {
        "name": "image.tag",
        "type": "string",
        "limits": {"minLength": 1},
        "default": "x",
    }
    assert values["image"]["description"] == "Where the image comes from."


def test_inspect_prints_limits(tmp_path):
    r = run("inspect", str(REPO / "examples/component/ctf"))
    assert r.exit_code == 0, r.stderr
    assert "    replicas  (integer, default 1, minimum 0)" in r.stdout
    assert "one key per value (flat): message, replicas" in r.stdout
    r = run("inspect", "--json", str(REPO / "examples/component/ctf"))
    assert r.exit_code == 0, r.stderr
    (cd,) = json.loads(r.stdout)["configData"]
    by = {v["name"]: v for v in cd["values"]}
    assert by["replicas"]["limits"] == {"minimum": 0}
    assert cd["flatConfigMapKeys"] == ["message", "replicas"]


# ---------------------------------------------------------------- flat ConfigMaps


def test_typed_follows_the_schema_type():
    assert typed("3", ("integer",)) == 3
    assert typed("-3", ("integer",)) == -3
    assert typed("03", ("integer",)) == "03"  # not a JSON integer: the schema names it
    assert typed("2.5", ("number",)) == 2.5
    assert typed("2", ("number",)) == 2
    assert typed("true", ("boolean",)) is True
    assert typed("yes", ("boolean",)) == "yes"  # no YAML 1.1 booleans
    assert typed("3", ("string",)) == "3"
    assert typed("3", ("integer", "string")) == "3"  # a string is allowed: kept as written
    assert typed("1e999", ("number",)) == "1e999"  # never an infinity


def test_flat_only_when_every_key_is_a_scalar_property():
    assert is_flat({"replicas": "3", "size": "small"}, SCHEMA)
    assert not is_flat({"values.yaml": "replicas: 3\n"}, SCHEMA)  # the nested form
    assert not is_flat({"replicas": "3", "image": "x"}, SCHEMA)  # image is an object
    assert not is_flat({"replicas": "3"}, {"type": "object"})  # no properties
    assert flat_values({"replicas": "3", "optional": "4", "debug": "false"}, SCHEMA) == {
        "debug": False,
        "optional": 4,
        "replicas": 3,
    }


def cm(data: dict[str, str], namespace: str = "podinfo") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "podinfo-values", "namespace": namespace},
        "data": data,
    }


def test_cli_reads_a_flat_configmap(tmp_path):
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(cm({"replicas": "3", "message": "hi"})))
    r = run(
        "configure",
        "--config-data",
        str(CONFIG),
        "--values",
        str(tmp_path / "cm.yaml"),
        "--root",
        str(KUSTOMIZE),
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert "  replicas: 3\n" in r.stdout


def test_cli_flat_configmap_errors_name_the_key(tmp_path):
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(cm({"replicas": "3x", "message": "hi"})))
    args = [
        "configure",
        "--config-data",
        str(CONFIG),
        "--values",
        str(tmp_path / "cm.yaml"),
        "--root",
        str(KUSTOMIZE),
        "deployment.yaml",
    ]
    r = run(*args)
    assert r.exit_code == 1
    assert "values.replicas: '3x' is not of type 'integer'" in r.stderr
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(cm({"replicas": "3", "mesage": "hi"})))
    r = run(*args)
    assert r.exit_code == 1
    assert "'mesage' is no such property of the schema (did you mean 'message'?)" in r.stderr


def _render_with_configmap(data: dict[str, str]):
    xr = load_docs([REPO / "examples/xr.yaml"])[0]
    xr["spec"]["values"] = {"configMapRef": {"name": "podinfo-values"}}
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    # an XR without a claim reads its values ConfigMap from its first target namespace
    return asyncio.run(
        render(
            xr,
            policy,
            observed=load_docs([REPO / "examples/observed/helm"]),
            required=[cm(data)],
        )
    )


def test_function_reads_a_flat_configmap_typed_by_the_schema():
    out = _render_with_configmap({"replicas": "3", "message": "Hello, flat"})
    assert out.fatal is None, out.fatal
    (release,) = [d for d in out.resources if d["kind"] == "HelmRelease"]
    assert release["spec"]["values"]["replicaCount"] == 3
    assert release["spec"]["values"]["ui"]["message"] == "Hello, flat"


def test_function_nested_configmap_still_works_and_bad_flat_is_one_fatal():
    out = _render_with_configmap({"values.yaml": "replicas: 4\n"})
    (release,) = [d for d in out.resources if d["kind"] == "HelmRelease"]
    assert release["spec"]["values"]["replicaCount"] == 4
    out = _render_with_configmap({"replicas": "4", "colour": "red"})
    assert out.fatal is not None and not out.resources
    assert "set spec.values.configMapRef.key" in out.fatal.message
    assert "'colour' is no such property" in out.fatal.message


# ---------------------------------------------------------------- unused values


def test_unused_value_warning_says_did_you_mean(tmp_path):
    """A schema that allows other keys lets a typo through: it lands nowhere, and the warning
    that says so names the key the team probably meant."""
    cd = write_cd(tmp_path, {"type": "object"}, {"replicas": 1})
    r = configure_with(tmp_path, cd, "replicsa: 3\n")
    assert r.exit_code == 0, r.stderr
    assert "never applied: replicsa (did you mean 'replicas'?)" in r.stderr


def test_the_function_unused_values_warning_says_did_you_mean(tmp_path, monkeypatch):
    from support.ctfedit import bundled_configdata, with_configdata

    monkeypatch.chdir(REPO)
    text = bundled_configdata().replace("    additionalProperties: false\n", "", 1)
    assert "additionalProperties" not in text
    ctf = with_configdata(tmp_path / "ctf", text)
    xr = load_docs(["examples/xr.yaml"])[0]
    xr["spec"]["values"] = {"inline": {"replicsa": 3, "message": "hi"}}
    (tmp_path / "xr.yaml").write_text(yaml.safe_dump(xr))
    r = run(
        "render",
        str(tmp_path / "xr.yaml"),
        "--composition",
        "examples/composition.yaml",
        "--component",
        str(ctf),
        "--observed",
        "examples/observed/helm",
    )
    assert r.exit_code == 0, r.stderr
    (w,) = [x for x in r.stderr.splitlines() if "UnusedValues" in x]
    assert "not applied: replicsa (did you mean 'replicas'?)" in w
