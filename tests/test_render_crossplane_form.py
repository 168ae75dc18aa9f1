"""``sack8s render`` takes ``crossplane render``'s habits (issue 34, item 5), without the CLI.

The positional ``XR COMPOSITION FUNCTIONS`` form, ``-o/--observed-resources``,
``-e/--required-resources``, ``-r`` (results as ``kind: Result`` documents on stdout), ``-x``,
the metadata crank v2.2.4's ``SetComposedResourceMetadata`` adds, and ``-v`` logs on stderr
with a policy as without. tests/test_crossplane_cli.py compares the two tools' outputs field
by field where the Crossplane CLI is installed (opt-in).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from function.cli import main
from function.edge.render import CONDITION_TIME, composed_metadata

REPO = Path(__file__).resolve().parents[1]
XR, COMP, FUNCTIONS = "examples/xr.yaml", "examples/composition.yaml", "examples/functions.yaml"


def run(*args: str):
    return CliRunner().invoke(main, ["render", *args], catch_exceptions=False)


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_positional_form_is_the_composition_flag():
    a = run(XR, COMP, FUNCTIONS, "-o", "examples/observed/helm")
    b = run(XR, "--composition", COMP, "--observed", "examples/observed/helm")
    c = run(XR, COMP, "--observed-resources", "examples/observed/helm")
    assert a.exit_code == b.exit_code == c.exit_code == 0, a.stderr + b.stderr + c.stderr
    assert a.stdout == b.stdout == c.stdout
    assert len(docs(a.stdout)) > 10


def test_required_resources_short_and_long():
    claim = ["examples/claim.yaml", "examples/composition-claim.yaml", FUNCTIONS]
    obs = ["-o", "examples/observed/claim"]
    a = run(*claim, *obs, "-e", "examples/required")
    b = run(*claim, *obs, "--required-resources", "examples/required")
    assert a.exit_code == b.exit_code == 0, a.stderr
    assert a.stdout == b.stdout
    assert "Kustomization" in a.stdout


def test_composition_twice_is_a_usage_error():
    r = run(XR, COMP, "--composition", COMP)
    assert r.exit_code == 2
    assert "either as an argument or as --composition" in r.stderr


def test_functions_file_must_exist():
    r = run(XR, COMP, "nope.yaml")
    assert r.exit_code == 1
    assert "nope.yaml: does not exist" in r.stderr


def test_composed_objects_carry_crossplanes_metadata():
    r = run(XR, COMP, "-o", "examples/observed/helm")
    xr = yaml.safe_load(Path(REPO / XR).read_text())
    for obj in docs(r.stdout)[1:]:
        meta = obj["metadata"]
        assert meta["labels"]["crossplane.io/composite"] == "podinfo", meta
        assert meta["ownerReferences"] == [
            {
                "apiVersion": xr["apiVersion"],
                "kind": xr["kind"],
                "name": "podinfo",
                "uid": "",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert "crossplane.io/claim-name" not in meta["labels"]  # an XR, not a claim


def test_claim_labels_follow_the_claim():
    r = run("examples/claim.yaml", "examples/composition-claim.yaml", "-e", "examples/required")
    assert r.exit_code == 0, r.stderr
    for obj in docs(r.stdout)[1:]:
        labels = obj["metadata"]["labels"]
        assert labels["crossplane.io/claim-name"] == "podinfo"
        assert labels["crossplane.io/claim-namespace"] == "team-a"
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "XSACK8sComponentVersion"


def test_composed_metadata_as_crank_sets_it():
    xr = {
        "apiVersion": "g/v1",
        "kind": "X",
        "metadata": {"name": "a", "namespace": "ns", "labels": {"crossplane.io/composite": "root"}},
    }
    other = {"apiVersion": "v1", "kind": "O", "name": "o", "uid": "u"}
    stale = {**other, "controller": True}
    (got,) = composed_metadata(
        xr, [{"kind": "ConfigMap", "metadata": {"ownerReferences": [other, stale]}}]
    )
    meta = got["metadata"]
    assert meta["generateName"] == "root-"  # nested XR: the root's name
    assert meta["namespace"] == "ns"  # a namespaced XR composes into its namespace
    assert meta["labels"] == {"crossplane.io/composite": "root"}
    assert meta["ownerReferences"][0] == other  # another controller is replaced, others kept
    assert meta["ownerReferences"][1]["name"] == "a" and len(meta["ownerReferences"]) == 2
    named = composed_metadata(xr, [{"kind": "ConfigMap", "metadata": {"name": "n"}}])[0]
    assert "generateName" not in named["metadata"]


def test_results_as_documents_on_stdout():
    r = run(XR, COMP, FUNCTIONS, "-r")
    assert r.exit_code == 0, r.stderr
    results = [d for d in docs(r.stdout) if d.get("kind") == "Result"]
    assert results == [
        {
            "apiVersion": "render.crossplane.io/v1beta1",
            "kind": "Result",
            "step": "compose",
            "severity": "SEVERITY_NORMAL",
            "message": results[0]["message"],
        }
    ]
    assert "composed objects wait for Namespace" in results[0]["message"]
    assert "Normal WaitingForNamespace" not in r.stderr  # as documents, not twice
    assert docs(r.stdout)[-1]["kind"] == "Result"  # after the composed objects, as crank


def test_include_full_xr():
    r = run(XR, COMP, "-x")
    xr = yaml.safe_load(Path(REPO / XR).read_text())
    out = docs(r.stdout)[0]
    assert out["spec"] == xr["spec"]
    assert out["metadata"] == xr["metadata"]
    assert out["status"]["component"]["version"] == "6.2.0"


@pytest.mark.parametrize("policy", [True, False], ids=["with-policy", "without-policy"])
def test_verbose_logs_every_stage_on_stderr(policy):
    args = [XR, COMP, "-o", "examples/observed/helm"] if policy else [XR]
    r = run(*args, "-v")
    assert all(d for d in docs(r.stdout))  # stdout stays a YAML stream
    assert "filename=" not in r.stdout
    if policy:
        assert r.exit_code == 0, r.stderr
        for stage in ("admitted", "required resources resolved", "component loaded", "composed"):
            assert stage in r.stderr, (stage, r.stderr)
    else:  # no policy: nothing is allowed, the Fatal is logged too
        assert r.exit_code == 1
        assert "fatal" in r.stderr and "not in the policy allowlist" in r.stderr


def test_xr_ready_condition_as_crank_computes_it():
    """Creating while the function holds the XR not ready, Available once everything is;
    every condition stamped with crank's fixed time; the function's conditions follow."""
    first = docs(run(XR, COMP).stdout)[0]["status"]["conditions"]
    assert first[0] == {
        "type": "Ready",
        "status": "False",
        "reason": "Creating",
        "lastTransitionTime": CONDITION_TIME,
    }
    assert [c["type"] for c in first] == ["Ready", "DeploymentReady", "ConfigDataWarnings"]
    assert {c["lastTransitionTime"] for c in first} == {CONDITION_TIME}
    settled = docs(run(XR, COMP, "--settle").stdout)[0]["status"]["conditions"]
    assert settled[0] == {
        "type": "Ready",
        "status": "True",
        "reason": "Available",
        "lastTransitionTime": CONDITION_TIME,
    }
