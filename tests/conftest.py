"""Shared test plumbing: where the outside world is, and strict mode.

Tests that need something outside the repository (the shared fixtures, the upstream CRDs,
the Crossplane CLI, a registry server binary) find it through an environment variable with
a default next to this checkout. When it is missing they skip with one line saying what was
skipped; under ``SACK8S_STRICT=1`` (set by ``.ci/run``) a missing dependency fails instead,
except for the opt-in tools in ``OPT_IN``, which these machines cannot have.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SACK8S_SHARED", REPO.parent / "shared")).resolve()
FIXTURES = Path(os.environ.get("SACK8S_FIXTURES", SHARED / "fixtures" / "ocm-cli-v0.9.1"))
CRDS = Path(os.environ.get("SACK8S_CRDS", SHARED / "crds"))
STRICT = os.environ.get("SACK8S_STRICT", "") not in ("", "0", "false")
# The test tools ../shared/tools builds or unpacks (kube-apiserver, kube-controller-manager, Flux
# source-/kustomize-controller, ESO, helm): install.sh puts them here, outside shared/.
TOOLS_SRC = SHARED / "tools"
TOOLS = Path(os.environ.get("SACK8S_TOOLS", Path.home() / ".cache" / "sack8s" / "tools"))
_INSTALL_TRIED: set[str] = set()


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


_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG.append(config)


def _say(message: str) -> None:
    """One line on the terminal now, past pytest's output capture."""
    capman = _CONFIG[0].pluginmanager.getplugin("capturemanager") if _CONFIG else None
    if capman is None:
        print(message, file=sys.stderr, flush=True)
        return
    with capman.global_and_fixture_disabled():
        print(f"\n{message}", file=sys.stderr, flush=True)


def _tool_ready(name: str, versions: dict[str, str]) -> bool:
    stamp = TOOLS / f".{name}.version"
    return (
        (TOOLS / name).exists() and stamp.exists() and stamp.read_text().strip() == versions[name]
    )


def need_tools(*names: str) -> Path:
    """``$SACK8S_TOOLS`` holding ``names`` at the versions ``../shared/tools/VERSIONS`` pins.

    What is missing is installed with ``install.sh`` once per session (under a lock on the
    directory, so two sessions never install into it at once); a tool that is not shipped
    unpacked is built from the Go module proxy, which takes minutes, and this says so.
    """
    install = need_path(TOOLS_SRC / "install.sh", "test tools (install.sh)", "SACK8S_SHARED")
    versions = {
        line.split()[0]: line.split()[1]
        for line in (TOOLS_SRC / "VERSIONS").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    missing = [n for n in names if not _tool_ready(n, versions)]
    todo = [n for n in missing if n not in _INSTALL_TRIED]
    if todo:
        _INSTALL_TRIED.update(todo)
        TOOLS.mkdir(parents=True, exist_ok=True)
        _say(
            f"sack8s tests: installing {' '.join(todo)} into {TOOLS} with {install} "
            "(tools not shipped unpacked are built from the Go module proxy: minutes each)"
        )
        with open(TOOLS / ".install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            todo = [n for n in todo if not _tool_ready(n, versions)]  # another session did it
            p = (
                subprocess.run(
                    [str(install), str(TOOLS), *todo],
                    capture_output=True,
                    text=True,
                    timeout=3600,
                    check=False,
                )
                if todo
                else None
            )
        if p is not None and p.returncode != 0:
            _say(f"install.sh failed:\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
        missing = [n for n in names if not _tool_ready(n, versions)]
    need(
        not missing,
        f"{', '.join(missing)} not installed in {TOOLS} by {install} (set SACK8S_TOOLS)",
    )
    return TOOLS
