"""One exit-status contract for every sack8s command: 0 ok, 1 bad input, 2 usage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from function.cli import main

REPO = Path(__file__).resolve().parents[1]
CTF = REPO / "examples" / "component" / "ctf"
BACKEND = REPO / "tests" / "data" / "configdata" / "backend"
CD = ["--config-data", str(BACKEND / "config.yaml")]
VALUES = ["--values", str(BACKEND / "values.yaml")]
COMMANDS = [
    "serve",
    "render",
    "xrd",
    "inspect",
    "localize",
    "configure",
    "mutate",
    "check",
    "component",
    "component build",
]


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    "args",
    [
        ["nosuchcommand"],
        ["render"],  # missing argument
        ["render", "examples/xr.yaml", "--bogus"],
        ["xrd", "--variant", "bogus"],
        ["inspect"],
        ["inspect", str(CTF), "--bogus"],
        ["localize", *CD, "x.yaml"],  # missing --component
        ["configure", *CD, "x.yaml"],  # missing --values
        ["mutate", *CD, *VALUES, "x.yaml"],
        ["serve", "--bogus"],
        ["check", *CD],  # neither --component nor --root
        ["check", "--root", str(BACKEND)],  # missing --config-data
        ["component", "build"],  # missing --out
        ["component", "build", "--out", "x"],  # neither --constructor nor --name/--version
    ],
)
def test_usage_errors_exit_2(args):
    r = run(*args)
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stdout == "" and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["render", "nope.yaml"], "XR_OR_CLAIM.yaml nope.yaml: does not exist"),
        (
            ["render", "examples/xr.yaml", "--composition", "nope.yaml"],
            "--composition nope.yaml: does not exist",
        ),
        (["render", "examples/xr.yaml", "--observed", "nope"], "--observed nope: does not exist"),
        (["render", "examples"], "XR_OR_CLAIM.yaml examples: is a directory"),
        (["xrd", "--policy", "nope.yaml"], "--policy nope.yaml: does not exist"),
        (
            ["check", "--config-data", "nope.yaml", "--root", "."],
            "--config-data nope.yaml: does not exist",
        ),
        (["check", *CD, "--root", "nope"], "--root nope: does not exist"),
        (["inspect", "./nope"], "does not exist"),
        (
            ["configure", "--config-data", "nope.yaml", *VALUES, "x.yaml"],
            "--config-data nope.yaml: no such file",
        ),
        (
            [
                "localize",
                *CD,
                "--component",
                "./nope",
                "--root",
                str(BACKEND),
                "manifests/deploy.yaml",
            ],
            "nope does not exist",
        ),
    ],
)
def test_a_missing_file_is_bad_input_exit_1(args, fragment, monkeypatch):
    monkeypatch.chdir(REPO)
    r = run(*args)
    assert r.exit_code == 1, (r.exit_code, r.output)
    assert r.stdout == "" and "Usage:" not in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert fragment in r.stderr


def test_bad_input_in_a_file_exits_1(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    bad = tmp_path / "policy.yaml"
    bad.write_text("namespaces: 3\n")
    r = run("xrd", "--variant", "rbac", "--policy", str(bad))
    assert r.exit_code == 1 and "input.namespaces" in r.stderr and "Traceback" not in r.stderr
    r = run("render", str(bad))
    assert r.exit_code == 1 and "spec.component: Field required" in r.stderr


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_documents_the_contract(command):
    r = run(*(command.split() if command else []), "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert "Exit status: 0 success; 1 bad input" in text and "2 usage" in text, command


def test_the_installed_script_keeps_the_contract(tmp_path):
    """The same through the console script, as a CI job calls it."""
    sack8s = Path(sys.executable).with_name("sack8s")
    assert (
        subprocess.run(
            [str(sack8s), "render", str(tmp_path / "missing.yaml")], capture_output=True
        ).returncode
        == 1
    )
    assert subprocess.run([str(sack8s), "render", "--bogus"], capture_output=True).returncode == 2
    assert subprocess.run([str(sack8s), "xrd"], capture_output=True).returncode == 0


def test_as_errors_name_the_file_read_and_the_as_name(tmp_path):
    broken = tmp_path / "rendered.yaml"
    broken.write_text("spec: [unclosed\n")
    r = run(
        "configure",
        *CD,
        *VALUES,
        "--root",
        str(BACKEND),
        "--as",
        "manifests/deploy.yaml",
        str(broken),
    )
    assert r.exit_code == 1
    (line,) = r.stderr.strip().splitlines()
    assert (
        "manifests/deploy.yaml" in line
        and f"FILE {broken}, read as --as manifests/deploy.yaml" in line
    )
    r = CliRunner().invoke(
        main,
        ["configure", *CD, *VALUES, "--as", "manifests/deploy.yaml", "-"],
        input="spec: [unclosed\n",
    )
    assert r.exit_code == 1 and "(FILE stdin, read as --as manifests/deploy.yaml)" in r.stderr
    # a rule error on the file names both too
    (tmp_path / "list.yaml").write_text("- a\n")
    r = run(
        "configure",
        *CD,
        *VALUES,
        "--root",
        str(BACKEND),
        "--as",
        "manifests/deploy.yaml",
        str(tmp_path / "list.yaml"),
    )
    assert (
        r.exit_code == 1
        and "read as --as manifests/deploy.yaml" in r.stderr
        and "list.yaml" in r.stderr
    )


def test_http_image_reference_is_read_without_its_scheme(tmp_path):
    """The OCM CLI writes imageReference http://HOST/... for a plain-HTTP registry; the scheme says
    how to reach the registry and is dropped from what the cluster pulls (docs/ocm-sources.md §2)."""
    out = tmp_path / "out"
    for resource in ("config", "manifests-gz"):
        assert (
            run(
                "inspect", str(CTF), "--version", "6.2.0", "--extract", resource, "-o", str(out)
            ).exit_code
            == 0
        )
    r = run(
        "localize",
        "--config-data",
        str(out / "config.yaml"),
        "--component",
        f"{CTF}//acme.org/sack8s/podinfo:6.2.0",
        "--root",
        str(out / "manifests-gz"),
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert "image: 127.0.0.1:5000/upstream/podinfo@sha256:11342fe5" in r.stdout
    assert "http://" not in r.stdout
    rep = run("inspect", str(CTF)).stdout
    assert "note       the http:// of the access is dropped from the reference" in rep
    for doc in ("docs/ocm-sources.md", "docs/configdata.md"):
        text = " ".join((REPO / doc).read_text().split())
        assert "scheme is dropped" in text, doc
