"""``sack8s render --settle``: the reconciles a cluster would run, on a laptop (issue 34, item 1).

The settled output is what one render prints once every object it composes exists: the
bundled examples' committed observed state (``examples/observed``, written by
``make-observed.py`` from the same stand-in) gives the same composed objects. The stages on
stderr say what waited for what, in the function's order: Namespaces, then their contents,
then Flux behind the OCM gate.
"""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from function.cli import main
from function.edge import settle as settling
from function.edge.render import claim_to_xr, input_from_composition, load_docs

REPO = Path(__file__).resolve().parents[1]
DIGEST = {
    "hashAlgorithm": "SHA-256",
    "normalisationAlgorithm": "jsonNormalisation/v4alpha1",
    "value": "ab" * 32,
}


def run(*args: str):
    return CliRunner().invoke(main, ["render", *args], catch_exceptions=False)


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def by_key(objs: list[dict]) -> dict[str, dict]:
    return {
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: o for o in objs
    }


@pytest.mark.parametrize(
    "args, observed",
    [
        (["examples/xr.yaml", "examples/composition.yaml"], "examples/observed/helm"),
        (
            ["examples/xr-kustomize.yaml", "examples/composition.yaml"],
            "examples/observed/kustomize",
        ),
        (
            ["examples/claim.yaml", "examples/composition-claim.yaml", "-e", "examples/required"],
            "examples/observed/claim",
        ),
    ],
    ids=["helm", "kustomize", "claim"],
)
def test_settle_prints_what_the_settled_cluster_composes(args, observed):
    settled = run(*args, "--settle")
    assert settled.exit_code == 0, settled.stderr
    once = run(*args, "--observed", observed)
    assert once.exit_code == 0, once.stderr
    got, want = docs(settled.stdout), docs(once.stdout)
    assert by_key(got[1:]) == by_key(want[1:])
    kinds = {o["kind"] for o in got[1:]}
    assert {"OCIRepository", "Usage", "Component", "Namespace"} <= kinds
    assert kinds & {"HelmRelease", "Kustomization"}
    ready = {c["type"]: c for c in got[0]["status"]["conditions"]}["DeploymentReady"]
    assert ready["status"] == "True", ready

    # Stages on stderr, in the function's order; stdout is the YAML stream only.
    lines = [ln for ln in settled.stderr.splitlines() if ln.startswith("sack8s render --settle:")]
    text = "\n".join(lines)
    assert lines[0].endswith("reconcile 1: composes 2 new objects: Namespace x2"), text
    assert "waits: WaitingForNamespace:" in lines[1], text
    assert text.index("WaitingForNamespace") < text.index("WaitingForOCMComponent"), text
    flux = next(i for i, ln in enumerate(lines) if "OCIRepository" in ln)
    gate = next(i for i, ln in enumerate(lines) if "WaitingForOCMComponent" in ln)
    assert gate < flux, text
    assert lines[-1].startswith("sack8s render --settle: settled after 4 reconciles:"), text
    assert f"{len(got) - 1} composed objects" in lines[-1]
    assert "--settle` follows" not in settled.stderr  # no partial-output hint once settled


def test_plain_render_says_how_to_see_the_rest():
    r = run("examples/xr.yaml", "examples/composition.yaml")
    assert r.exit_code == 0, r.stderr
    assert "Normal WaitingForNamespace:" in r.stderr
    assert "`--settle` follows the reconciles" in r.stderr
    assert {d["kind"] for d in docs(r.stdout)[1:]} == {"Namespace"}
    full = run("examples/xr.yaml", "examples/composition.yaml", "-o", "examples/observed/helm")
    assert "--settle" not in full.stderr  # nothing waits: no hint


def test_settle_starts_from_what_is_observed():
    """With --observed, the first reconcile starts from it: nothing is composed twice."""
    r = run(
        "examples/xr.yaml",
        "examples/composition.yaml",
        "--observed",
        "examples/observed/helm-gated",
        "--settle",
    )
    assert r.exit_code == 0, r.stderr
    first = next(ln for ln in r.stderr.splitlines() if "reconcile 1:" in ln)
    assert "Namespace" not in first and "Component" in first, r.stderr


def test_settle_stops_at_a_fatal(tmp_path):
    bad = docs(Path(REPO / "examples/xr.yaml").read_text())[0]
    bad["spec"]["namespaces"] = [{"name": "kube-system", "mode": "create"}]
    (tmp_path / "xr.yaml").write_text(yaml.safe_dump(bad))
    r = run(str(tmp_path / "xr.yaml"), "examples/composition.yaml", "--settle")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert "kube-system" in r.stderr and "forbidden" in r.stderr


def test_settle_fails_when_the_reconciles_do_not_end(monkeypatch):
    monkeypatch.setattr(settling, "MAX_ROUNDS", 1)  # the Flux objects need a third reconcile
    r = run("examples/xr.yaml", "examples/composition.yaml", "--settle")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert "still composing new objects after 2 reconciles" in r.stderr


def _example() -> tuple[dict, dict]:
    comp = "examples/composition.yaml"
    policy = input_from_composition(load_docs([REPO / comp])[0], comp)
    return claim_to_xr(load_docs([REPO / "examples/xr.yaml"])[0]), policy


def test_component_reports_version_repository_and_digest_when_status_has_one():
    xr, policy = _example()
    result = asyncio.run(settling.converge(xr, policy))
    assert result.settled
    composed = result.last.resources
    status = copy.deepcopy(result.last.xr["status"])
    status["component"].pop("normalisedDigest", None)
    (plain,) = [o for o in settling.settle(composed, status) if o["kind"] == "Component"]
    (repo,) = [o for o in composed if o["kind"] == "Repository"]
    reported = plain["status"]["component"]
    assert reported["version"] == plain["spec"]["semver"] == status["component"]["version"]
    assert reported["repositorySpec"] == repo["spec"]["repositorySpec"]
    assert "digest" not in reported  # no normalised digest in status: none reported
    status["component"]["normalisedDigest"] = DIGEST
    (with_digest,) = [o for o in settling.settle(composed, status) if o["kind"] == "Component"]
    assert with_digest["status"]["component"]["digest"] == DIGEST
    (ns,) = [o for o in settling.settle(composed) if o["kind"] == "Namespace"][:1]
    assert ns["status"] == {"phase": "Active"}


def test_make_observed_help_writes_nothing(tmp_path):
    before = {p: p.stat().st_mtime_ns for p in (REPO / "examples/observed").rglob("*.yaml")}
    p = subprocess.run(
        [sys.executable, "examples/observed/make-observed.py", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0 and "--check" in p.stdout
    after = {p: p.stat().st_mtime_ns for p in (REPO / "examples/observed").rglob("*.yaml")}
    assert before == after


def test_committed_observed_state_is_what_make_observed_writes():
    p = subprocess.run(
        [sys.executable, "examples/observed/make-observed.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stderr
