"""The README tells a newcomer how to see why tests skip and docs/testing.md lists what they read;
the docs name no machine of ours."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VAR = re.compile(r"SACK8S_[A-Z0-9_]+")


def _read_by_code() -> set[str]:
    found: set[str] = set()
    for root in ("function", "tests", "benchmarks"):
        for f in (REPO / root).rglob("*.py"):
            found |= set(VAR.findall(f.read_text()))
    found |= set(VAR.findall((REPO / ".ci" / "run").read_text()))
    return found


def test_testing_doc_lists_every_environment_variable_the_code_reads():
    testing = (REPO / "docs" / "testing.md").read_text()
    table = set(re.findall(r"^\| `(SACK8S_[A-Z0-9_]+)` \|", testing, re.M))
    missing = sorted(_read_by_code() - table)
    assert not missing, f"docs/testing.md's variable table lacks {missing}"
    assert {"SACK8S_ETCD", "SACK8S_HTPASSWD_BIN"} <= table


def test_readme_says_how_to_see_skip_reasons():
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "The default pytest options include `-rs`" in readme
    addopts = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^addopts = ".*-rs.*"$', addopts, re.M), (
        "the README's claim needs -rs in addopts"
    )


def test_docs_name_no_machine_path():
    pattern = re.compile(r"(?<![\w.])/(?:work|root|home|tmp|opt|srv|mnt)/[\w./-]*")
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        hits = pattern.findall(doc.read_text())
        assert not hits, f"{doc.relative_to(REPO)} names machine paths: {hits[:5]}"
