"""Claim values no configuration rule consumes: a Warning (or a Fatal by policy), in status,
reported by `sack8s render` and by `sack8s configure`/`mutate`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from support.ctfedit import bundled_configdata, with_configdata

from function.cli import main
from function.configdata.model import parse_configdata
from function.configdata.unused import unused_values

REPO = Path(__file__).resolve().parents[1]
HELM = [
    "render",
    "examples/xr.yaml",
    "--composition",
    "examples/composition.yaml",
    "--observed",
    "examples/observed/helm",
]
KUSTOMIZE = [
    "render",
    "examples/xr-kustomize.yaml",
    "--composition",
    "examples/composition.yaml",
    "--observed",
    "examples/observed/kustomize",
]
BACKEND = REPO / "tests" / "data" / "configdata" / "backend"


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the example composition mirrors examples/component/ctf, relative


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def results(stderr: str, reason: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"Warning {reason}: ")]


def xr_status(stdout: str) -> dict:
    return next(d for d in yaml.safe_load_all(stdout) if d["kind"] == "SACK8sComponentVersion")[
        "status"
    ]


CHART_RULES = """    # the chart's own replica count and UI message (podinfo's ui.message)
    - value: (( replicas ))
      file: values.yaml
      path: replicaCount
    - value: (( message ))
      file: values.yaml
      path: ui.message
"""


def without_chart_rules(tmp_path: Path) -> list[str]:
    """``--component`` for a copy of the bundled CTF whose ConfigData configures only the
    Kustomize files (as the OCM CLI fixtures' did): the Helm example's values land nowhere."""
    text = bundled_configdata()
    assert CHART_RULES in text
    return ["--component", str(with_configdata(tmp_path / "ctf", text.replace(CHART_RULES, "")))]


def test_helm_example_uses_every_value():
    """The bundled ConfigData writes replicas and message into the chart too (replicaCount,
    ui.message), so the Helm example drops nothing."""
    r = run(*HELM)
    assert r.exit_code == 0, r.stderr
    assert results(r.stderr, "UnusedValues") == []
    assert xr_status(r.stdout)["configData"]["unusedValues"] == []


def test_helm_example_reports_the_values_that_land_nowhere(tmp_path):
    r = run(*HELM, *without_chart_rules(tmp_path))
    assert r.exit_code == 0, r.stderr
    (warning,) = results(
        r.stderr, "UnusedValues"
    )  # one entry of its own, apart from ConfigDataWarning
    assert (
        "spec.values: 2 value(s) reach no configuration rule of ConfigData (resource config)"
        in warning
    )
    assert "for the chart" in warning and ": message, replicas" in warning
    status = xr_status(r.stdout)["configData"]
    assert status["unusedValues"] == ["message", "replicas"]
    assert any("file deployment.yaml is not in the chart" in s for s in status["skipped"])


def test_kustomize_example_uses_every_value():
    r = run(*KUSTOMIZE)
    assert r.exit_code == 0, r.stderr
    assert results(r.stderr, "UnusedValues") == []
    assert xr_status(r.stdout)["configData"]["unusedValues"] == []


def test_policy_makes_unused_values_fatal(tmp_path):
    comp = yaml.safe_load((REPO / "examples/composition.yaml").read_text())
    comp["spec"]["pipeline"][0]["input"]["configData"] = {"unusedValues": "Fatal"}
    (tmp_path / "composition.yaml").write_text(yaml.safe_dump(comp))
    cut = without_chart_rules(tmp_path)
    r = run(*HELM[:2], "--composition", str(tmp_path / "composition.yaml"), *HELM[4:], *cut)
    assert r.exit_code == 1
    assert r.stdout == ""
    assert "spec.values: 2 value(s) reach no configuration rule" in r.stderr
    assert "configData.unusedValues: Fatal" in r.stderr
    # the examples consume every value they give: the same policy composes them
    r = run(*HELM[:2], "--composition", str(tmp_path / "composition.yaml"), *HELM[4:])
    assert r.exit_code == 0, r.stderr
    r = run(*KUSTOMIZE[:2], "--composition", str(tmp_path / "composition.yaml"), *KUSTOMIZE[4:])
    assert r.exit_code == 0, r.stderr


def test_configure_and_mutate_warn_about_values_no_rule_reads(tmp_path):
    (tmp_path / "cd.yaml").write_text(CD)
    (tmp_path / "a.yaml").write_text("spec:\n  replicas: 1\n")
    (tmp_path / "values.yaml").write_text(
        "replicas: 2\nreplcias: 3\nextra:\n  nested: true\nhosts: [a]\n"
        "image: {name: x}\nconfig: {}\n"
    )
    args = [
        "--config-data",
        str(tmp_path / "cd.yaml"),
        "--values",
        str(tmp_path / "values.yaml"),
        "--root",
        str(tmp_path),
        "a.yaml",
    ]
    r = run("configure", *args)
    assert r.exit_code == 0, r.stderr
    assert "replicas: 2" in r.stdout
    # hosts is read by a rule on b.yaml: the CLI counts every file's rules, so it is not unused
    (line,) = [x for x in r.stderr.splitlines() if "reach no configuration rule" in x]
    assert line.startswith("sack8s: warning: 2 value(s)") and line.endswith(
        ": extra.nested, replcias"
    )
    (tmp_path / "values.yaml").write_text("replicas: 2\nhosts: [a]\nimage: {name: x}\nconfig: {}\n")
    r = run("configure", *args)
    assert r.exit_code == 0 and "reach no configuration rule" not in r.stderr


CD = """
apiVersion: config.ocm.software/v1alpha1
kind: ConfigData
configuration:
  rules:
    - {file: a.yaml, path: spec.replicas, value: (( replicas ))}
    - {file: a.yaml, path: spec.image, value: {name: (( image.name )), pull: literal}}
    - {file: b.yaml, path: data.hosts, value: "(( hosts[0] ))"}
    - {file: b.yaml, path: data.all, value: (( config ))}
"""


@pytest.mark.parametrize(
    "values, files, unused",
    [
        ({"replicas": 2}, None, ()),
        ({"replicas": 2, "replcias": 3}, None, ("replcias",)),
        (
            {"image": {"name": "x", "tag": "1"}},
            None,
            ("image.tag",),
        ),  # a sibling of a consumed value
        ({"hosts": ["a", "b"]}, None, ()),  # (( hosts[0] )) reads into the list
        ({"config": {"deep": {"er": 1}}}, None, ()),  # (( config )) takes the whole map
        (
            {"replicas": 2, "hosts": ["a"]},
            ["a.yaml"],
            ("hosts",),
        ),  # rules on b.yaml are not applied
        ({"empty": {}, "a.b": 1}, None, ('["a.b"]', "empty")),  # paths in the rules' own syntax
        ({}, None, ()),
    ],
)
def test_unused_values_pure(values, files, unused):
    assert unused_values(parse_configdata(CD), values, files=files) == unused


SPIFF_CD = """
configuration:
  defaults:
    image: (( repo ":" tag ))
    repo: ghcr.io/acme/app
  rules:
    - {file: a.yaml, path: spec.image, value: (( image ))}
    - {file: a.yaml, path: spec.url, value: "tcp://(( host )):(( port ))"}
    - {file: a.yaml, path: spec.replicas, value: (( replicas * 2 ))}
    - {file: a.yaml, path: spec.tier, value: (( tier || "web" ))}
    - {file: a.yaml, path: metadata.name, value: (( name ))}
    - {file: a.yaml, path: metadata.labels, value: {app: (( .name ))}}
"""


@pytest.mark.parametrize(
    "values, unused",
    [
        # through the default image: (( repo ":" tag )), both of which the user may set
        ({"repo": "r", "tag": "1"}, ()),
        ({"tag": "1", "tga": "2"}, ("tga",)),
        ({"host": "h", "port": 1}, ()),  # interpolated text
        ({"replicas": 2}, ()),  # arithmetic
        ({"tier": "db"}, ()),  # the left side of ||
        ({"name": "x"}, ()),  # (( .name )) reads the values; (( name )) alone would not
        # a value that is itself an expression consumes what it refers to
        ({"tier": "(( flavour ))", "flavour": "db", "other": 1}, ("other",)),
    ],
)
def test_unused_values_follow_spiff_expressions(values, unused):
    assert unused_values(parse_configdata(SPIFF_CD), values) == unused


def test_a_rules_own_field_consumes_no_value():
    cd = parse_configdata(
        "configuration:\n  rules:\n  - {file: a.yaml, path: metadata.name, value: (( name ))}\n"
    )
    # spiff scoping: (( name )) is the rule's own name (subst-0), not the value
    assert unused_values(cd, {"name": "x"}) == ("name",)
