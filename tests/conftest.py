"""Shared test plumbing: where the outside world is, and strict mode.

Tests that need something outside the repository (the shared fixtures, the upstream CRDs,
the Crossplane CLI, a registry server binary) find it through an environment variable with
a default next to this checkout. When it is missing they skip with one line saying what was
skipped; under ``SACK8S_STRICT=1`` (set by ``.ci/run``) a missing dependency fails instead,
except for the opt-in tools in ``OPT_IN``, which these machines cannot have.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SACK8S_SHARED", REPO.parent / "shared")).resolve()
FIXTURES = Path(os.environ.get("SACK8S_FIXTURES", SHARED / "fixtures" / "ocm-cli-v0.9.1"))
CRDS = Path(os.environ.get("SACK8S_CRDS", SHARED / "crds"))
STRICT = os.environ.get("SACK8S_STRICT", "") not in ("", "0", "false")


def need(condition: bool, what: str) -> None:
    """Skip (or, in strict mode, fail) when an outside dependency is missing."""
    if condition:
        return
    if STRICT:
        pytest.fail(f"strict mode: {what}", pytrace=False)
    pytest.skip(what)


def need_path(path: Path, what: str, env: str) -> Path:
    need(path.exists(), f"{what} not found at {path} (set {env})")
    return path


def need_binary(name: str, env: str) -> str:
    found = os.environ.get(env) or shutil.which(name)
    need(bool(found) and Path(found).exists(), f"{name} not installed (set {env})")
    return str(found)


# Tools these machines cannot have (the Crossplane CLI, the OCM CLI, Flux helm-controller,
# function-go-templating): tests that use them are opt-in. They run when the variable names a
# binary (or the tool is on PATH); otherwise they skip with one line, in strict mode too.
OPT_IN = {
    "SACK8S_CROSSPLANE": "crossplane",
    "SACK8S_OCM_CLI": "ocm",
    "SACK8S_HELM_CONTROLLER": "helm-controller",
    "SACK8S_GO_TEMPLATING": "function-go-templating",
}


def opt_in_binary(env: str) -> Path:
    """The opt-in tool named by ``env``: a skip (never a strict failure) when it is absent.

    A variable that names a missing file is a mistake, not an opt-out: that fails.
    """
    name = OPT_IN[env]
    named = os.environ.get(env)
    if named:
        path = Path(named)
        if not path.exists():
            pytest.fail(f"{env}={named}: no such file", pytrace=False)
        return path
    found = shutil.which(name)
    if not found:
        pytest.skip(f"opt-in: {name} not available (set {env} to run these tests)")
    return Path(found)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return need_path(FIXTURES, "OCM CLI fixtures", "SACK8S_FIXTURES")


@pytest.fixture(scope="session")
def crds_dir() -> Path:
    return need_path(CRDS, "upstream CRDs", "SACK8S_CRDS")


@pytest.fixture(scope="session")
def crossplane_bin() -> Path:
    return opt_in_binary("SACK8S_CROSSPLANE")


@pytest.fixture(scope="session")
def ocm_bin() -> Path:
    return opt_in_binary("SACK8S_OCM_CLI")
