"""``package/`` is what ``crossplane xpkg build`` needs (issue 22, item 4).

The Crossplane CLI is not available here, so the rules its build applies (crank v2.2.4,
``cmd/crank/xpkg/build.go`` and ``internal/xpkg``; crossplane-runtime's ``pkg/parser``) are
re-stated and checked for the documented command (docs/image.md)::

    crossplane xpkg build --package-root=package --examples-root=examples \
      --embed-runtime-image-tarball=dist/function-sack8s-image.tar \
      --ignore 'xrd*.yaml,crossplane-rbac.yaml,component/inputs/chart/*/*.yaml,component/inputs/chart/*/*/*.yaml'

* files: every non-empty ``*.yaml``/``*.yml`` below the root, minus ``--ignore`` (Go
  ``filepath.Match`` against root + pattern, so ``*`` never crosses a ``/``); the same filters
  apply below ``--examples-root``;
* the package: exactly one ``meta.pkg.crossplane.io`` object, a ``Function`` whose
  ``spec.crossplane.version`` is a semver constraint, and nothing else but CRDs (the function
  input's); documents holding only comments or separators are skipped;
* the examples: every document decodes as an object with a kind (a comment-only document
  before a ``---`` fails the build there: crossplane/crossplane#5504).

The docker-archive itself is checked in tests/test_image.py (it needs the built image).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


IGNORE = [
    "xrd*.yaml",
    "crossplane-rbac.yaml",
    # the bundled example component's Helm chart input (make-component.py packs it): a chart's
    # Chart.yaml, values.yaml and templates are no Kubernetes objects
    "component/inputs/chart/*/*.yaml",
    "component/inputs/chart/*/*/*.yaml",
]  # --ignore, relative to --package-root and --examples-root


def go_match(pattern: str, path: str) -> bool:
    """Go's filepath.Match: like fnmatch, but ``*`` never crosses a ``/``."""
    ps, xs = pattern.split("/"), path.split("/")
    return len(ps) == len(xs) and all(
        fnmatch.fnmatchcase(x, p) for p, x in zip(ps, xs, strict=False)
    )


def xpkg_files(root: Path) -> list[Path]:
    """The files crank's build reads below root: YAML, non-empty, not ignored (buildFilters)."""
    return sorted(
        f
        for f in root.rglob("*")
        if f.is_file()
        and f.suffix in (".yaml", ".yml")
        and f.stat().st_size > 0
        and not any(go_match(str(root / pat), str(f)) for pat in IGNORE)
    )


def yaml_chunks(files: list[Path]) -> list[tuple[Path, str]]:
    """Documents as apimachinery's YAMLReader splits them (crank reads the files as one stream)."""
    out = []
    for f in files:
        buf: list[str] = []
        for line in f.read_text().splitlines(keepends=True):
            if line.startswith("---") and (
                len(line) == 3 or line[3:].strip() == "" or line[3:].strip().startswith("#")
            ):
                if buf:
                    out.append((f, "".join(buf)))
                buf = []
            else:
                buf.append(line)
        if buf:
            out.append((f, "".join(buf)))
    return out


def empty_yaml(chunk: str) -> bool:
    return all(
        s == "" or s in ("---", "...") or s.startswith("#")
        for s in (ln.lstrip() for ln in chunk.split("\n"))
    )


SEMVER_CONSTRAINT = re.compile(
    r"^\s*(?:[<>=!~^]{0,2}\s*v?\d+(?:\.(?:\d+|x|\*)){0,2}(?:-[0-9A-Za-z.-]+)?"
    r"(?:\s*,?\s*|\s*\|\|\s*))+$"
)


def test_package_root_is_a_function_package() -> None:
    """crank v2.2.4 internal/xpkg: NewFunctionLinter = OneMeta, IsFunction, PackageValidSemver, and
    every other object a CRD; meta.pkg.crossplane.io/v1 Function has only spec.crossplane,
    spec.dependsOn and spec.capabilities (unknown fields would be dropped silently)."""
    root = REPO / "package"
    files = xpkg_files(root)
    assert root / "crossplane.yaml" in files
    metas, objects = [], []
    for f, chunk in yaml_chunks(files):
        if empty_yaml(chunk):
            continue
        doc = yaml.safe_load(chunk)
        assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), (f, chunk[:200])
        (metas if doc["apiVersion"].startswith("meta.pkg.crossplane.io/") else objects).append(
            (f, doc)
        )
    assert len(metas) == 1, [str(f) for f, _ in metas]
    _, meta = metas[0]
    assert (
        meta["apiVersion"] in ("meta.pkg.crossplane.io/v1", "meta.pkg.crossplane.io/v1beta1")
        and meta["kind"] == "Function"
    )
    assert set(meta) <= {"apiVersion", "kind", "metadata", "spec"}
    assert set(meta["spec"]) <= {"crossplane", "dependsOn", "capabilities"}, meta["spec"]
    assert set(meta["spec"]["crossplane"]) == {"version"}
    assert SEMVER_CONSTRAINT.match(meta["spec"]["crossplane"]["version"]), meta["spec"][
        "crossplane"
    ]["version"]
    assert objects, "the function input CRD (package/input/) is part of the package"
    for f, doc in objects:
        assert (doc["apiVersion"], doc["kind"]) == (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
        ), f


def test_examples_parse_as_package_examples() -> None:
    """crank's examples parser: every non-empty document of --examples-root (with --ignore applied
    there too) must decode as an object with a kind; a comment-only document before a ``---``
    fails the build (crossplane/crossplane#5504)."""
    files = xpkg_files(EXAMPLES)
    assert EXAMPLES / "xr.yaml" in files and EXAMPLES / "xrd.yaml" not in files
    for f, chunk in yaml_chunks(files):
        if chunk == "":
            continue
        doc = yaml.safe_load(chunk)
        assert isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion"), (
            str(f),
            chunk[:200],
        )


def test_go_match_is_go_filepath_match() -> None:
    assert go_match("/p/xrd*.yaml", "/p/xrd-claims.yaml")
    assert not go_match("/p/xrd*.yaml", "/p/input/xrd.yaml")  # * does not cross /
    assert not go_match("/p/xrd*.yaml", "/p/crossplane.yaml")
