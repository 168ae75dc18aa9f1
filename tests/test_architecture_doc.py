"""docs/architecture.md is regenerated from the code and names nothing that does not exist.

The module table is generated (hack/architecture.py): a module added, moved or renamed without
regenerating the doc fails here. The hand-written paths (a request, an image reference, a claim
value) and the cache table name modules and functions in backticks: each must exist, so the
prose cannot drift silently from the tree either.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"


def _generator():
    spec = importlib.util.spec_from_file_location("architecture", REPO / "hack/architecture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_module_table_is_generated_from_the_code():
    gen = _generator()
    assert gen.current() == gen.table(), (
        "docs/architecture.md's module table is stale: run python hack/architecture.py --write"
    )


@cache
def _names(path: Path) -> frozenset[str]:
    """Top-level names of a module, and Class.method for its classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(f"{node.name}.{sub.name}")
                    elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                        names.add(f"{node.name}.{sub.target.id}")
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def _module(rel: str) -> Path | None:
    """``compose/core`` or ``function/compose/core`` or ``core`` → the one module file."""
    rel = rel.removeprefix("function/")
    direct = REPO / "function" / f"{rel}.py"
    if direct.is_file():
        return direct
    package = REPO / "function" / rel / "__init__.py"
    if package.is_file():
        return package
    hits = [p for p in (REPO / "function").rglob("*.py") if p.as_posix().endswith(f"/{rel}.py")]
    return hits[0] if len(hits) == 1 else None


def test_every_module_and_name_the_prose_mentions_exists():
    text = DOC.read_text(encoding="utf-8")
    prose = text.split("<!-- modules:end -->", 1)[1]
    missing, checked = [], 0
    for raw in re.findall(r"`([^`\s]+)`", prose):
        token = raw.rstrip("/").split("(", 1)[0]
        if token.endswith(".md") or token.startswith(("docs/", "tests/", "hack/")):
            if not (REPO / token).exists():
                missing.append(token)
            continue
        checked += 1
        m = re.fullmatch(r"((?:function/)?[a-z_0-9/]+?)\.py", token)
        if m:
            if _module(m.group(1)) is None:
                missing.append(token)
            continue
        # compose/core.compose, configdata/fluxmutation.mutate, ocm/access.flux_source
        m = re.fullmatch(r"((?:function/)?[a-z_0-9]+(?:/[a-z_0-9]+)+)\.([A-Za-z_][\w.]*)", token)
        if m:
            path = _module(m.group(1))
            if path is None or m.group(2) not in _names(path):
                missing.append(token)
            continue
        if token.startswith("function/") and not (REPO / token).exists():
            missing.append(token)
    assert checked >= 60, checked  # the prose was read: the paths name that many places
    assert not missing, f"docs/architecture.md names what the code no longer has: {missing}"


def test_every_cache_table_is_in_the_cache_section():
    """Every memo table and cache the code declares has a row under "Where each cache lives"."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Where each cache lives", 1)[1]
    tree = ast.parse((REPO / "function/cache.py").read_text(encoding="utf-8"))
    shares = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign | ast.AnnAssign)
        and "_SHARES" in [t.id for t in getattr(n, "targets", [getattr(n, "target", None)])]
    )
    tables = {k.value for k in shares.keys}
    assert len(tables) >= 8, tables  # the parse found the memo tables
    absent = sorted(t for t in tables if f"Memos.{t}" not in section and f"`{t}`" not in section)
    assert not absent, f"memo tables without a row in docs/architecture.md: {absent}"
