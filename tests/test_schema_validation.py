"""Everything shipped and rendered validates against the upstream schemas, without crank.

The Crossplane CLI (`crossplane beta validate`) is opt-in now (tests/test_crossplane_cli.py);
this is the default suite's check. Schemas: every CRD in ``$SACK8S_CRDS`` (Flux, ESO, OCM,
Crossplane's own in ``crossplane-v2.2.4/``), the XRDs and input CRD ``sack8s xrd`` generates,
and the Kubernetes built-in schemas for core kinds (see tests/support/structural.py for the
libraries and what each checks). A broken copy of any checked object fails, so the check can
fail; the e2e suite sends the same renders to a real API server.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.examples import (
    BROKEN,
    CASES,
    REPO,
    Case,
    broken_cases,
    claims_side,
    dump,
    load,
    load_text,
    shipped,
)
from support.structural import Validator

# Kinds no CRD describes: Crossplane's package metadata (read by `crossplane xpkg build`).
ALLOWED_MISSING = {
    ("meta.pkg.crossplane.io/v1", "Function"),
    ("meta.pkg.crossplane.io/v1beta1", "Function"),
}


def _sack8s(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("sack8s")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def validators(crds_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Validator]:
    """One validator for v2 XRs (the cluster XRD) and one for claims (the LegacyCluster XRD)."""
    tmp = tmp_path_factory.mktemp("schemas")
    crds = sorted(crds_dir.glob("*.yaml")) + sorted(crds_dir.glob("crossplane-*/*.yaml"))
    assert len(crds) >= 10, f"too few CRDs in {crds_dir}"

    def generated(variant: str) -> Path:
        proc = _sack8s("xrd", "--variant", variant)
        assert proc.returncode == 0, proc.stderr
        return dump(load_text(proc.stdout), tmp / f"{variant}.yaml")

    gen_input = generated("input")
    return {
        "cluster": Validator([*crds, generated("cluster"), gen_input], ALLOWED_MISSING),
        "claims": Validator([*crds, generated("claims"), gen_input], ALLOWED_MISSING),
    }


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for case in CASES:
        proc = _sack8s(*case.render_args())
        assert proc.returncode == 0, f"{case.id}: sack8s render failed:\n{proc.stderr}"
        docs = load_text(proc.stdout)
        # The desired XR carries status only; the API server holds it with the spec written.
        docs[0].setdefault("spec", load(case.xr)[0]["spec"])
        out[case.id] = docs
    return out


def _side(case: Case) -> str:
    return "claims" if case.is_claim else "cluster"


@pytest.mark.parametrize("path", shipped(), ids=lambda p: str(p.relative_to(REPO)))
def test_validate_shipped(validators: dict[str, Validator], path: Path) -> None:
    v = validators["claims" if claims_side(path) else "cluster"]
    problems = v.validate_all(load(path))
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_validate_rendered(
    validators: dict[str, Validator], rendered: dict[str, list[dict]], case: Case
) -> None:
    """The XR with status and every composed object, as `sack8s render` prints them."""
    docs = rendered[case.id]
    v = validators[_side(case)]
    problems = v.validate_all(docs)
    assert problems == [], "\n".join(problems)
    kinds = {d["kind"] for d in docs}
    # The check covered CRD-backed kinds and built-ins alike (not only what it knows). A first
    # render composes only the Namespaces (the rest waits for them to exist).
    if case.observed is None:
        assert kinds - {docs[0]["kind"]} == {"Namespace"}, kinds
    else:
        assert {"ExternalSecret", "Namespace", "ServiceAccount", "Role", "RoleBinding"} <= kinds
    assert any(v.schemas.get((d["apiVersion"], d["kind"])) for d in docs[:1]), "XR not checked"


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_validate_rejects_broken_copy(
    validators: dict[str, Validator], rendered: dict[str, list[dict]], broken: str
) -> None:
    good = rendered["helm-observed"]
    bad = broken_cases(good)[broken]
    problems = validators["cluster"].validate_all([*good, bad])
    assert problems, f"{broken} was accepted"
    assert any(BROKEN[broken] in p for p in problems), "\n".join(problems)
    assert validators["cluster"].validate_all(good) == []


# The validator's own Kubernetes rules, each shown to bite.


def _usage(**spec) -> dict:
    return {
        "apiVersion": "protection.crossplane.io/v1beta1",
        "kind": "Usage",
        "metadata": {"name": "u", "namespace": "team-a"},
        "spec": spec,
    }


def test_cel_rules_are_evaluated(validators: dict[str, Validator]) -> None:
    """Usage's CEL rule: "either spec.by or spec.reason must be specified"."""
    v = validators["cluster"]
    of = {"apiVersion": "v1", "kind": "Namespace", "resourceRef": {"name": "x"}}
    assert v.problems(_usage(of=of, reason="kept")) == []
    problems = v.problems(_usage(of=of))
    assert any("spec.by" in p and "spec.reason" in p for p in problems), problems


def test_cel_reserved_word_fields_are_escaped(validators: dict[str, Validator]) -> None:
    """A rule naming ``__namespace__`` sees the object's ``namespace`` field."""
    v = validators["cluster"]
    of = {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "x", "namespace": "b"}}
    problems = v.problems(_usage(of=of, reason="r"))
    assert any("cross-namespace" in p for p in problems), problems


def test_types_enums_and_names_are_checked(
    validators: dict[str, Validator], rendered: dict[str, list[dict]]
) -> None:
    import copy

    v = validators["cluster"]
    src = copy.deepcopy(next(d for d in rendered["helm-observed"] if d["kind"] == "OCIRepository"))
    src["spec"]["interval"] = 5
    src["metadata"]["name"] = "Not_A_Name"
    problems = v.problems(src)
    assert any("spec.interval" in p for p in problems), problems
    assert any("DNS-1123" in p for p in problems), problems
