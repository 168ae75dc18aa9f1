"""sack8s check: lint a ConfigData against its deployable before a team publishes it.

Through the CLI as a team runs it: one line per finding, ``error|warning: rule: file: path: message``,
exit 1 on errors and 0 otherwise.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import need
from test_cli_mutate import SACK8S, run

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "component"
CD = EXAMPLE / "inputs" / "config" / "config.yaml"
SOURCE = f"ctf::{EXAMPLE / 'ctf'}//acme.org/sack8s/podinfo:6.2.0"
LINE = re.compile(r"^(error|warning): (\S+): (\S+): (\S+): (.+)$")


def check(*args: str):
    return run("check", *args)


def findings(result) -> list[tuple[str, str, str, str, str]]:
    out = []
    for line in result.stdout.splitlines():
        m = LINE.match(line)
        assert m, f"not a finding line: {line!r}"
        out.append(m.groups())
    return out


def write_cd(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text("apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\n" + body)
    return p


def test_the_bundled_example_is_clean():
    r = check("--config-data", str(CD), "--component", SOURCE)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert r.stdout == ""
    assert r.stderr.strip() == "sack8s: check: 0 error(s), 0 warning(s)"


def test_the_ocm_cli_fixture_configdata_is_refused_with_the_rule(fixtures_dir):
    cd = fixtures_dir / "inputs" / "config" / "config.yaml"
    r = check(
        "--config-data",
        str(cd),
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
    )
    assert r.exit_code == 1
    (f,) = findings(r)
    assert f[:4] == ("error", "localization[1].repository", "values.yaml", "image.repository")
    assert "without its registry '127.0.0.1:5000'" in f[4] and "fullyQualifiedRepository" in f[4]
    r = check(
        "--config-data",
        str(cd),
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        "--image-pairs",
        "warning",
    )
    assert r.exit_code == 0 and [f[0] for f in findings(r)] == ["warning"]


def test_every_problem_at_once(tmp_path):
    cd = write_cd(
        tmp_path,
        """\
localization:
  - {file: values.yaml, resource: {name: image}, fullyQualifiedRepository: image.repository, tag: image.tagg}
  - {file: templates/deployment.yaml, resource: {name: image}, image: spec.x}
  - {file: nope.yaml, resource: {name: image}, image: a}
  - {file: values.yaml, resource: {name: nope}, image: a}
  - {file: deployment.yaml, resource: {name: image}, image: "spec.template.spec.containers[3].image"}
  - {file: kustomization.yaml, resource: {name: image}, image: images}
configuration:
  defaults: {replicas: one}
  schema: {type: object, required: [message], properties: {replicas: {type: integer}, message: {type: string}}}
  rules:
    - {file: values.yaml, path: replicaCount, value: "(( replicas ))"}
    - {file: values.yaml, path: msg, value: "(( message ))"}
    - {file: values.yaml, path: "image.repository[0]", value: x}
    - {file: values.yaml, path: replicaCount, value: "(( a ? 1 : 2 ))"}
    - {file: deployment.yaml, path: "spec[*]", value: 1}
""",
    )
    r = check("--config-data", str(cd), "--component", SOURCE)
    assert r.exit_code == 1
    got = findings(r)

    def has(severity: str, rule: str, file: str, path: str, fragment: str) -> bool:
        return any(f[:4] == (severity, rule, file, path) and fragment in f[4] for f in got)

    assert has("warning", "localization[0].tag", "values.yaml", "image.tagg", "would be created")
    assert has(
        "error",
        "localization[1].image",
        "templates/deployment.yaml",
        "spec.x",
        "chart file other than values.yaml",
    )
    assert has("error", "localization[2].image", "nope.yaml", "-", "in none of the deployables")
    assert has(
        "error", "localization[3].resource", "-", "-", "no resource with identity {name=nope}"
    )
    assert has(
        "error",
        "localization[4].image",
        "deployment.yaml",
        "spec.template.spec.containers[3].image",
        "out of range",
    )
    assert has(
        "error", "localization[5].image", "kustomization.yaml", "images", "kustomization file"
    )
    assert has("warning", "configuration.schema", "-", "defaults", "every deployment must set it")
    assert has(
        "error",
        "configuration.defaults",
        "-",
        "defaults.replicas",
        "'one' is not of type 'integer'",
    )
    assert has(
        "warning", "configuration.rules[1]", "values.yaml", "msg", "the defaults do not supply it"
    )
    assert has("warning", "configuration.rules[1]", "values.yaml", "msg", "would be created")
    assert has("error", "configuration.rules[2]", "values.yaml", "image.repository[0]", "scalar")
    assert has(
        "error", "configuration.rules[3].value", "values.yaml", "replicaCount", "not supported"
    )
    assert any(f[1] == "configuration.rules[4].path" and f[0] == "error" for f in got), got
    assert len(got) == len(set(got)), "a finding is printed once"
    assert r.stderr.strip().endswith(
        f"{sum(f[0] == 'error' for f in got)} error(s), "
        f"{sum(f[0] == 'warning' for f in got)} warning(s)"
    )


def test_engine_warnings_are_printed(tmp_path):
    """Whatever the engine warns about while planning shows up, e.g. a Docker Hub repository."""
    comp = tmp_path / "component-descriptor.yaml"
    comp.write_text(
        "meta: {schemaVersion: v2}\ncomponent:\n  name: acme.org/app\n  version: 1.0.0\n  provider: acme\n"
        "  repositoryContexts: []\n  sources: []\n  componentReferences: []\n  resources:\n"
        "  - {name: image, type: ociImage, version: '1', relation: external,\n"
        "     access: {type: ociArtifact, imageReference: 'nginx:1.25@sha256:" + "ab" * 32 + "'}}\n"
    )
    root = tmp_path / "chart"
    root.mkdir()
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 1.0.0\n")
    (root / "values.yaml").write_text("image:\n  repository: nginx\n  tag: '1'\n")
    cd = write_cd(
        tmp_path,
        "localization:\n- {file: values.yaml, resource: {name: image}, repository: image.repository,"
        " tag: image.tag}\n",
    )
    r = check("--config-data", str(cd), "--component", str(comp), "--root", str(root))
    assert r.exit_code == 0, r.stdout
    (f,) = findings(r)
    assert f[:4] == ("warning", "localization[0].repository", "values.yaml", "image.repository")
    assert "fullyQualifiedRepository" in f[4]


def test_root_without_component_checks_files_and_paths(tmp_path):
    r = check("--config-data", str(CD), "--root", str(EXAMPLE / "inputs" / "kustomize"))
    assert r.exit_code == 0, r.stdout
    got = findings(r)
    assert ("warning", "localization", "-", "-") == got[0][:4] and "--component" in got[0][4]
    # one ConfigData serves chart and Kustomize directory: the chart's file is only a warning here
    assert ("warning", "localization[1].fullyQualifiedRepository", "values.yaml", "-") in [
        f[:4] for f in got
    ]
    assert ("warning", "configuration.rules[2]", "values.yaml", "-") in [f[:4] for f in got]
    assert all(f[0] == "warning" for f in got)


def test_unpinned_image_is_an_error_unless_allowed(tmp_path):
    comp = tmp_path / "component-descriptor.yaml"
    comp.write_text(
        "meta: {schemaVersion: v2}\ncomponent:\n  name: acme.org/app\n  version: 1.0.0\n  provider: acme\n"
        "  repositoryContexts: []\n  sources: []\n  componentReferences: []\n  resources:\n"
        "  - {name: image, type: ociImage, version: '1', relation: external,\n"
        "     access: {type: ociArtifact, imageReference: 'registry.acme.org/app:1'}}\n"
    )
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "deploy.yaml").write_text("spec:\n  image: x\n")
    cd = write_cd(
        tmp_path,
        "localization:\n- {file: deploy.yaml, resource: {name: image}, image: spec.image}\n",
    )
    r = check("--config-data", str(cd), "--component", str(comp), "--root", str(tmp_path / "d"))
    assert r.exit_code == 1
    (f,) = findings(r)
    assert f[:2] == ("error", "localization[0].resource") and "--allow-unpinned" in f[4]
    r = check(
        "--config-data",
        str(cd),
        "--component",
        str(comp),
        "--root",
        str(tmp_path / "d"),
        "--allow-unpinned",
    )
    assert r.exit_code == 0
    (f,) = findings(r)
    assert (
        f[:4] == ("warning", "localization[0].image", "deploy.yaml", "spec.image")
        and "not pinned" in f[4]
    )


def test_broken_configdata_is_one_error_line(tmp_path):
    cd = tmp_path / "cd.yaml"
    cd.write_text("apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\nlocalisation: []\n")
    r = check("--config-data", str(cd), "--component", SOURCE)
    assert r.exit_code == 1
    (f,) = findings(r)
    assert f[:2] == ("error", "ConfigData") and "localisation: unknown field" in f[4]


def test_usage_errors_exit_2_and_missing_files_exit_1_with_one_line():
    """The exit-code contract of every command (function/cli/exits.py)."""
    r = check("--config-data", str(CD))
    assert r.exit_code == 2 and r.stdout == ""
    assert "give --component SOURCE, --root DIR, or both" in r.stderr
    r = check("--config-data", str(CD), "--root", "/nonexistent/dir")
    assert (
        r.exit_code == 1
        and r.stderr.strip() == "sack8s: error: --root /nonexistent/dir: does not exist"
    )
    r = check(
        "--config-data", "/nonexistent/cd.yaml", "--root", str(EXAMPLE / "inputs" / "kustomize")
    )
    assert r.exit_code == 1 and "--config-data /nonexistent/cd.yaml: does not exist" in r.stderr
    r = check("--config-data", str(CD), "--root", str(CD))
    assert r.exit_code == 1 and "is a file" in r.stderr


def test_real_subprocess(fixtures_dir):
    need(SACK8S.exists(), "sack8s console script not found")
    p = subprocess.run(
        [
            str(SACK8S),
            "check",
            "--config-data",
            str(fixtures_dir / "inputs" / "config" / "config.yaml"),
            "--component",
            f"{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("error: localization[1].repository: values.yaml: image.repository: ")
    assert "Traceback" not in p.stderr


def test_a_warning_only_the_engine_gives_is_printed(tmp_path):
    """The function's own warning when no rule addresses a file of the deployable (fluxmutation.py)."""
    cd = write_cd(
        tmp_path,
        "localization:\n- {file: deployment.yaml, resource: {name: image}, image: spec.x}\n",
    )
    r = check(
        "--config-data",
        str(cd),
        "--component",
        SOURCE,
        "--root",
        str(EXAMPLE / "inputs" / "chart" / "podinfo"),
    )
    assert r.exit_code == 0, r.stdout
    got = findings(r)
    assert ("warning", "ConfigData", "-", "-") in [f[:4] for f in got]
    assert any("none of its 1 substitutions addresses a file of this chart" in f[4] for f in got), (
        got
    )


def test_new_engine_warnings_show_up_without_changes_to_check(monkeypatch):
    """Whatever the engine's plan (Plan.all_findings()) or mutation returns as warnings is printed,
    by its rule when it names one."""
    import dataclasses

    from function.configdata import engine, fluxmutation
    from function.configdata.findings import Finding

    real_plan, real_mutation = engine.plan, fluxmutation.mutation_for

    def plan(*a, **kw):
        p = real_plan(*a, **kw)
        new = Finding("MissingTypeMeta", "ConfigData: has no apiVersion/kind (read as v1alpha1)")
        return dataclasses.replace(p, findings=(*p.findings, new))

    def mutation_for(*a, **kw):
        m = real_mutation(*a, **kw)
        return dataclasses.replace(
            m,
            warnings=(
                *m.warnings,
                "ConfigData configuration.defaults.unused (file -): broken expression no rule uses",
            ),
        )

    monkeypatch.setattr(engine, "plan", plan)
    monkeypatch.setattr(fluxmutation, "mutation_for", mutation_for)
    r = check("--config-data", str(CD), "--component", SOURCE)
    assert r.exit_code == 0
    got = findings(r)
    assert (
        "warning",
        "ConfigData",
        "-",
        "-",
        "has no apiVersion/kind (read as v1alpha1)",
    ) in got, got
    assert (
        "warning",
        "configuration.defaults.unused",
        "-",
        "-",
        "broken expression no rule uses",
    ) in got, got
    assert len(got) == 2  # printed once, though every deployable's run returns it


def test_values_no_rule_consumes_are_reported(tmp_path):
    """--values: what a claim would give; a value no configuration rule reads is a warning by its path."""
    values = tmp_path / "values.yaml"
    values.write_text("replicas: 2\nmesage: typo\nextra: {deep: 1}\n")
    r = check("--config-data", str(CD), "--component", SOURCE, "--values", str(values))
    got = findings(r)
    unused = [f for f in got if f[1] == "values"]
    assert [f[3] for f in unused] == ["extra.deep", "mesage"], got
    assert all("reaches no configuration rule" in f[4] for f in unused)
    # the schema (additionalProperties: false) refuses the typo: the engine's error, once
    assert r.exit_code == 1 and any(f[0] == "error" and "mesage" in f[4] for f in got), got
    values.write_text("replicas: 2\n")
    r = check("--config-data", str(CD), "--component", SOURCE, "--values", str(values))
    assert r.exit_code == 0 and r.stdout == "", r.stdout


def test_a_created_key_next_to_a_similar_one_gets_did_you_mean(tmp_path):
    cd = write_cd(
        tmp_path,
        """\
configuration:
  defaults: {replicas: 2}
  rules:
    - {file: deployment.yaml, path: spec.replcias, value: "(( replicas ))"}
""",
    )
    r = check("--config-data", str(cd), "--root", str(EXAMPLE / "inputs" / "kustomize"))
    got = findings(r)
    hints = [f for f in got if "did you mean" in f[4]]
    assert len(hints) == 1, got
    rule, file, path, message = hints[0][1:]
    assert (rule, file, path) == ("configuration.rules[0]", "deployment.yaml", "spec.replcias")
    assert "'replicas'" in message and "spec.replicas" in message
    assert r.exit_code == 0  # a new key is allowed: a warning, never an error
