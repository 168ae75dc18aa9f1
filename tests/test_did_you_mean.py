"""A rule path that creates a key next to a similar one: "did you mean" from configure, mutate
and the function's Warning; a genuinely new key stays allowed and -v still says [created]."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from support.ctfedit import bundled_configdata, bundled_descriptor, with_configdata
from support.examples import dump, load
from support.settle import reporting

from function.cli import main
from function.configdata.suggestions import edit_distance, similar_keys

REPO = Path(__file__).resolve().parents[1]
BACKEND = REPO / "tests" / "data" / "configdata" / "backend"

DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 1  # the team's default
  template:
    spec:
      containers:
        - name: app
          image: ghcr.io/acme/app:1
          imagePullPolicy: IfNotPresent
"""


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def configdata(tmp_path: Path, *rules: str) -> Path:
    cd = tmp_path / "cd.yaml"
    cd.write_text(
        "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\nconfiguration:\n  rules:\n"
        + "".join(f"    - {r}\n" for r in rules)
    )
    (tmp_path / "deploy.yaml").write_text(DEPLOY)
    (tmp_path / "values.yaml").write_text("replicas: 3\n")
    return cd


def configure(tmp_path: Path, cd: Path, *extra: str):
    return run(
        "configure",
        "--config-data",
        str(cd),
        "--values",
        str(tmp_path / "values.yaml"),
        "--root",
        str(tmp_path),
        *extra,
        "deploy.yaml",
    )


def warnings(stderr: str) -> list[str]:
    return [
        x for x in stderr.splitlines() if x.startswith("sack8s: warning: ") and "did you mean" in x
    ]


def test_typo_is_reported_and_still_written(tmp_path):
    cd = configdata(tmp_path, "{file: deploy.yaml, path: spec.replcias, value: (( replicas ))}")
    r = configure(tmp_path, cd)
    assert r.exit_code == 0, r.stderr
    assert (
        "  replcias: 3\n" in r.stdout and "replicas: 1  # the team's default" in r.stdout
    )  # allowed, as upstream
    (w,) = warnings(r.stderr)
    assert (
        "ConfigData configuration.rules[0] (file deploy.yaml): path spec.replcias creates key 'replcias' "
        "in document 0 next to existing 'replicas': did you mean spec.replicas?"
    ) in w
    r = configure(tmp_path, cd, "-v")
    assert "spec.replcias: None -> 3 [created]" in r.stderr


def test_case_and_deeper_paths(tmp_path):
    cd = configdata(
        tmp_path,
        "{file: deploy.yaml, path: spec.Replicas, value: 2}",
        "{file: deploy.yaml, path: 'spec.template.spec.containers[0].imagePulPolicy', value: Always}",
    )
    r = configure(tmp_path, cd)
    assert r.exit_code == 0, r.stderr
    w1, w2 = warnings(r.stderr)
    assert "creates key 'Replicas'" in w1 and "did you mean spec.replicas?" in w1
    assert "did you mean spec.template.spec.containers[0].imagePullPolicy?" in w2


def test_a_genuinely_new_key_is_quiet(tmp_path):
    cd = configdata(
        tmp_path,
        "{file: deploy.yaml, path: spec.paused, value: true}",
        "{file: deploy.yaml, path: metadata.labels.team, value: a}",  # labels: created, nothing near
    )
    r = configure(tmp_path, cd, "-v")
    assert r.exit_code == 0, r.stderr
    assert warnings(r.stderr) == []
    assert "spec.paused: None -> True [created]" in r.stderr
    assert "metadata.labels.team: None -> 'a' [created]" in r.stderr


def test_mutate_reports_it_too(tmp_path):
    root = tmp_path / "root"
    (root / "manifests").mkdir(parents=True)
    (root / "manifests" / "deploy.yaml").write_text(
        (BACKEND / "manifests" / "deploy.yaml").read_text()
    )
    cd = yaml.safe_load((BACKEND / "config.yaml").read_text())
    cd["configuration"]["rules"][0]["path"] = "spec.replica"
    (tmp_path / "cd.yaml").write_text(yaml.safe_dump(cd))
    r = run(
        "mutate",
        "--config-data",
        str(tmp_path / "cd.yaml"),
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "--values",
        str(BACKEND / "values.yaml"),
        "--root",
        str(root),
        "manifests/deploy.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert any(
        "path spec.replica creates key 'replica'" in w and "did you mean spec.replicas?" in w
        for w in warnings(r.stderr)
    ), r.stderr


def test_the_function_warns(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    text = bundled_configdata().replace(
        "  rules:\n",
        "  rules:\n    - value: (( replicas ))\n      file: values.yaml\n      path: replicaCont\n",
        1,
    )
    ctf = with_configdata(tmp_path / "ctf", text)
    # The OCM Component verified this component's descriptor: the gate opens for it.
    observed = reporting(
        load(REPO / "examples/observed/helm/observed.yaml"), bundled_descriptor(ctf=ctf)
    )
    r = run(
        "render",
        "examples/xr.yaml",
        "--composition",
        "examples/composition.yaml",
        "--component",
        str(ctf),
        "--observed",
        str(dump(observed, tmp_path / "observed.yaml")),
    )
    assert r.exit_code == 0, r.stderr
    (w,) = [x for x in r.stderr.splitlines() if "did you mean" in x]
    assert w.startswith(
        "Warning ConfigDataWarning: ConfigData (resource config) configuration.rules[0] (file values.yaml)"
    )
    assert (
        "creates key 'replicaCont' in document 0 next to existing 'replicaCount': did you mean replicaCount?"
        in w
    )
    docs = list(yaml.safe_load_all(r.stdout))
    (release,) = [d for d in docs if d["kind"] == "HelmRelease"]
    assert release["spec"]["values"]["replicaCont"] == 2  # still written: a new key is allowed
    xr = docs[0]
    assert xr["status"]["configData"]["unusedValues"] == []  # replicas and message reach the chart


@pytest.mark.parametrize(
    "a, b, d",
    [
        ("replicas", "replcias", 1),
        ("replicas", "replica", 1),
        ("replicas", "Replicas", 1),
        ("abc", "abc", 0),
        ("kitten", "sitting", 3),
        ("", "ab", 2),
    ],
)
def test_edit_distance(a, b, d):
    assert edit_distance(a, b, limit=5) == d


def test_similar_keys_thresholds():
    assert similar_keys("replcias", ["replicas", "template"]) == ("replicas",)
    assert similar_keys("B", ["A", "b"]) == ("b",)  # short keys: by case only
    assert similar_keys("env", ["dev"]) == ()
    assert similar_keys("port", ["ports", "post", "name"]) == ("ports", "post")
    assert similar_keys("image", ["image"]) == ()  # the key itself is no suggestion
