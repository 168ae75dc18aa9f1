"""A deployable is self-contained: nothing in it makes a controller fetch from elsewhere.

The function checks where Flux fetches the deployable from (:mod:`function.compose.fetchhosts`,
:func:`function.ocm.access.flux_source`), but the deployable's own files can name further
sources, and they are tenant-authored. kustomize-controller builds ``resources:``, ``bases:``
and ``components:`` entries that are URLs (``https://…``, ``git@…``, ``github.com/org/repo?ref=…``)
by cloning them unless ops run it with ``--no-remote-bases``, and it reads every file a
kustomization names (patches, generator inputs) wherever the path points; a Helm chart's
dependencies name chart repositories. So, in the files Flux will deploy:

* every path a ``kustomization.yaml`` names (and, recursively, every kustomization of a
  directory it names) must be a file or directory inside the deployable; a URL, a Git or SSH
  reference, an absolute path, a path that leaves the deployable, or one that names nothing
  there (kustomize would try it as a remote base) is refused, naming the file and the entry;
* every Helm dependency (``Chart.yaml``, and ``requirements.yaml`` for ``apiVersion: v1``
  charts; vendored subcharts in ``charts/`` recursively) must be vendored in ``charts/`` or
  come from ``file://`` inside the chart. A vendored dependency is accepted whatever its
  ``repository:`` says: helm-controller installs what the chart holds and fetches nothing.

Pure: files in, one :class:`ComponentError` (or the list of problems, for ``sack8s check``) out.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from function.cache import Memos, files_digest, memo
from function.errors import ComponentError, SackError
from function.ocm.access import Flavour
from function.yamlio import load_one

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
#: Fields whose entries may be files or directories (kustomize loads a directory's kustomization).
_DIRECTORY_FIELDS = ("resources", "bases", "components")
#: Fields whose string entries name files (inline YAML, with a line break, is skipped).
_FILE_FIELDS = (
    "crds",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "patchesStrategicMerge",
)
#: Fields whose inline entries configure a plugin (which could fetch what a URL names).
_PLUGIN_FIELDS = ("generators", "transformers", "validators")
#: Fields holding a list of objects with a ``path`` to a file.
_PATH_OBJECT_FIELDS = ("patches", "patchesJson6902", "replacements")
_GENERATORS = ("configMapGenerator", "secretGenerator", "helmChartInflationGenerator")
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:")
_REMOTE_MARKERS = ("?ref=", "?version=", "?submodules=", "?timeout=", "git::", "ssh:")
_KNOWN_HOSTS = ("github.com/", "gitlab.com/", "bitbucket.org/", "dev.azure.com/")
MAX_KUSTOMIZATIONS = 256


@dataclass(frozen=True)
class Problem:
    """One reference that leaves the deployable: the file, the entry and why."""

    file: str
    entry: str
    message: str

    def text(self) -> str:
        """``file: entry: message``, as errors show it."""
        return f"{self.file}: {self.entry}: {self.message}"


def is_remote(text: str) -> bool:
    """A URL, a Git/SSH reference or a go-getter style remote base (kustomize's remote forms)."""
    t = text.strip()
    low = t.lower()
    return (
        "://" in t
        or _SCP_LIKE.match(t) is not None
        or any(m in low for m in _REMOTE_MARKERS)
        or low.startswith(_KNOWN_HOSTS)
        or "//" in t.strip("/")
    )


def _inline(entry: str) -> bool:
    """A YAML or JSON document written in the entry itself, not a file name."""
    t = entry.strip()
    return "\n" in t or t.startswith(("{", "[")) or ": " in t


def _short(text: str) -> str:
    return repr(text[:120] + ("..." if len(text) > 120 else ""))


def _directories(files: Mapping[str, bytes]) -> frozenset[str]:
    """Every directory the file paths imply (``""`` for the root), computed once per walk so
    each entry is one lookup, however many entries and files a hostile deployable has.
    """
    dirs = {""}
    for f in files:
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return frozenset(dirs)


def _resolve(base: str, entry: str) -> str | None:
    """``entry`` relative to the directory ``base``, normalised; None when it leaves the root."""
    if entry.startswith("/") or entry.startswith("\\") or "\\" in entry or "\x00" in entry:
        return None
    joined = posixpath.normpath(posixpath.join(base or ".", entry))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return None
    return "" if joined == "." else joined


def _kustomization_in(files: Mapping[str, bytes], directory: str) -> str | None:
    for name in KUSTOMIZATION_FILES:
        path = f"{directory}/{name}" if directory else name
        if path in files:
            return path
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, str):
                yield v


class _Kustomize:
    """Walks the kustomizations reachable from one or more roots, collecting problems."""

    def __init__(self, files: Mapping[str, bytes], memos: Memos | None = None) -> None:
        self.files = files
        self.memos = memos  # parsed kustomizations, shared with the ConfigData engine
        self.dirs = _directories(files)
        self.problems: list[Problem] = []
        self.seen: set[str] = set()

    def add(self, file: str, entry: str, message: str) -> None:
        self.problems.append(Problem(file, entry, message))

    def walk(self, kfile: str) -> None:
        if kfile in self.seen or len(self.seen) >= MAX_KUSTOMIZATIONS:
            return
        self.seen.add(kfile)
        try:
            doc = load_one(self.files[kfile], kfile, memos=self.memos)
        except SackError as e:
            self.add(kfile, "-", f"cannot be read: {e.message}")
            return
        if not isinstance(doc, Mapping):
            return
        base = posixpath.dirname(kfile)
        for field in _DIRECTORY_FIELDS:
            for i, entry in enumerate(_strings(doc.get(field))):
                self.path(kfile, f"{field}[{i}]", base, entry, directory_ok=True)
        for field in _FILE_FIELDS:
            for i, entry in enumerate(_strings(doc.get(field))):
                if _inline(entry):  # an inline patch (data) or plugin configuration
                    if field in _PLUGIN_FIELDS and is_remote(entry):
                        self.add(
                            kfile, f"{field}[{i}]", "an inline plugin configuration names a URL"
                        )
                    continue
                self.path(kfile, f"{field}[{i}]", base, entry)
        for field in _PATH_OBJECT_FIELDS:
            items = doc.get(field)
            for i, item in enumerate(items if isinstance(items, list) else []):
                if isinstance(item, Mapping) and isinstance(item.get("path"), str):
                    self.path(kfile, f"{field}[{i}].path", base, item["path"])
        for field in _GENERATORS:
            items = doc.get(field)
            for i, item in enumerate(items if isinstance(items, list) else []):
                if not isinstance(item, Mapping):
                    continue
                for key in ("files", "envs", "env"):
                    for j, entry in enumerate(_strings(item.get(key))):
                        source = entry.split("=", 1)[1] if "=" in entry else entry
                        where = f"{field}[{i}].{key}" + (f"[{j}]" if key != "env" else "")
                        self.path(kfile, where, base, source)
                for key in ("repo", "chartRepoUrl", "chartHome"):
                    value = item.get(key)
                    if isinstance(value, str) and value:
                        self.remote_or_path(kfile, f"{field}[{i}].{key}", base, value)
        charts = doc.get("helmCharts")
        for i, item in enumerate(charts if isinstance(charts, list) else []):
            if isinstance(item, Mapping) and isinstance(item.get("repo"), str) and item["repo"]:
                self.add(
                    kfile,
                    f"helmCharts[{i}].repo",
                    f"{_short(item['repo'])} is a chart repository outside the deployable",
                )
        globals_ = doc.get("helmGlobals")
        if isinstance(globals_, Mapping) and isinstance(globals_.get("chartHome"), str):
            home = globals_["chartHome"]
            self.path(kfile, "helmGlobals.chartHome", base, home, directory_ok=True)
        openapi = doc.get("openapi")
        if isinstance(openapi, Mapping) and isinstance(openapi.get("path"), str):
            self.path(kfile, "openapi.path", base, openapi["path"])

    def remote_or_path(self, kfile: str, entry: str, base: str, value: str) -> None:
        if is_remote(value):
            self.add(kfile, entry, f"{_short(value)} is a remote location")
        else:
            self.path(kfile, entry, base, value, directory_ok=True)

    def path(
        self, kfile: str, entry: str, base: str, value: str, *, directory_ok: bool = False
    ) -> None:
        if is_remote(value):
            self.add(
                kfile,
                entry,
                f"{_short(value)} is a remote base (a URL or a Git reference): "
                "kustomize-controller would fetch it from outside the component; vendor it "
                "into the deployable",
            )
            return
        target = _resolve(base, value)
        if target is None:
            self.add(kfile, entry, f"{_short(value)} points outside the deployable")
            return
        if target in self.files:
            return
        if directory_ok and target in self.dirs:
            nested = _kustomization_in(self.files, target)
            if nested is not None:
                self.walk(nested)
            return
        self.add(
            kfile,
            entry,
            f"{_short(value)} names no {'file or directory' if directory_ok else 'file'} in the "
            "deployable" + (" (kustomize would try it as a remote base)" if directory_ok else ""),
        )


def kustomize_problems(
    files: Mapping[str, bytes], path: str | None = None, memos: Memos | None = None
) -> list[Problem]:
    """Problems of the kustomization at ``path`` (the claim's ``deploy.path``) and of everything
    it names; ``path=None`` checks every kustomization in the deployable (``sack8s check``).
    """
    walker = _Kustomize(files, memos)
    if path is None:
        roots = sorted(f for f in files if posixpath.basename(f) in KUSTOMIZATION_FILES)
    else:
        directory = _resolve("", path.strip() or ".")
        found = _kustomization_in(files, directory) if directory is not None else None
        if directory is None:
            roots = []  # admission refuses such a deploy.path before this runs
        elif found:
            roots = [found]
        else:
            # None there: kustomize-controller generates one over the directory, taking in
            # every subdirectory that has a kustomization, so each of those is a root.
            prefix = f"{directory}/" if directory else ""
            roots = sorted(
                f
                for f in files
                if f.startswith(prefix) and posixpath.basename(f) in KUSTOMIZATION_FILES
            )
    for kfile in roots:
        walker.walk(kfile)
    return walker.problems


def _vendored(files: Mapping[str, bytes], archives: frozenset[str], root: str, name: str) -> bool:
    """``name`` is in the chart's ``charts/``: as a directory, or as ``<name>-<version>.tgz``
    (``archives``: every ``.tgz`` path without its version, computed once per chart).
    """
    charts = f"{root}/charts" if root else "charts"
    return f"{charts}/{name}/Chart.yaml" in files or f"{charts}/{name}" in archives


def _archives(files: Mapping[str, bytes]) -> frozenset[str]:
    """``charts/<name>`` for every ``charts/<name>-<version>.tgz`` (every split at a ``-``,
    since both names and versions may contain one).
    """
    out = set()
    for f in files:
        if f.endswith(".tgz") and "/charts/" in f"/{f}":
            stem = f[: -len(".tgz")]
            for i, c in enumerate(stem):
                if c == "-":
                    out.add(stem[:i])
    return frozenset(out)


def _chart_dependencies(files: Mapping[str, bytes], root: str) -> Iterator[tuple[str, int, Any]]:
    chart_file = f"{root}/Chart.yaml" if root else "Chart.yaml"
    try:
        chart = load_one(files[chart_file], chart_file)
    except SackError:
        return  # the chart's own reader reports an unreadable Chart.yaml
    if not isinstance(chart, Mapping):
        return
    sources = [(chart_file, chart.get("dependencies"))]
    if chart.get("apiVersion") == "v1":
        req = f"{root}/requirements.yaml" if root else "requirements.yaml"
        if req in files:
            try:
                doc = load_one(files[req], req)
            except SackError:
                doc = None
            if isinstance(doc, Mapping):
                sources.append((req, doc.get("dependencies")))
    for file, deps in sources:
        for i, dep in enumerate(deps if isinstance(deps, list) else []):
            yield file, i, dep


def helm_problems(files: Mapping[str, bytes]) -> list[Problem]:
    """Problems of the chart's dependencies and of every vendored subchart directory's."""
    problems: list[Problem] = []
    archives = _archives(files)
    subcharts = (f for f in files if f.startswith("charts/") and f.endswith("/Chart.yaml"))
    roots = ["", *sorted(posixpath.dirname(f) for f in subcharts)]
    for root in roots[:MAX_KUSTOMIZATIONS]:
        for file, i, dep in _chart_dependencies(files, root):
            if not isinstance(dep, Mapping):
                continue
            name = dep.get("name")
            repo = dep.get("repository")
            repo = repo.strip() if isinstance(repo, str) else ""
            entry = f"dependencies[{i}]" + (f" ({str(name)[:60]})" if name else "")
            if repo.lower().startswith("file://"):
                target = _resolve(root, repo[len("file://") :])
                if target is None:
                    problems.append(
                        Problem(file, entry, f"repository {_short(repo)} points outside the chart")
                    )
                continue
            if not repo or (isinstance(name, str) and _vendored(files, archives, root, name)):
                continue
            problems.append(
                Problem(
                    file,
                    entry,
                    f"repository {_short(repo)} is outside the chart and the dependency is not "
                    "vendored in charts/: package the chart with its dependencies (helm "
                    "dependency build)",
                )
            )
    return problems


def problems(
    flavour: Flavour, files: Mapping[str, bytes], path: str | None, memos: Memos | None = None
) -> list[Problem]:
    """Every reference in the deployable that would make Flux fetch from elsewhere.

    Args:
        flavour: ``helm`` or ``kustomize``.
        files: The deployable's files by path.
        path: The Kustomize directory built (``spec.deploy.path``); None for Helm.
        memos: The edge's memo tables (parsed kustomizations), None to compute.
    """
    return helm_problems(files) if flavour == "helm" else kustomize_problems(files, path, memos)


def _memoised(
    flavour: Flavour, files: Mapping[str, bytes], path: str | None, memos: Memos | None
) -> list[Problem]:
    """:func:`problems`, remembered by the files' content digest (hashed once per files
    *object*, which the storage cache hands every warm request; the ConfigData engine's memo
    shares that digest), so a warm reconcile does not parse the kustomizations or Chart.yaml
    again.
    """
    if memos is None or not (
        isinstance(files, MappingProxyType) and all(type(v) is bytes for v in files.values())
    ):
        return problems(flavour, files, path, memos)
    key = (flavour, path, memos.digest_of(files, files_digest))
    return memo(
        "selfcontained",
        key,
        lambda: problems(flavour, files, path, memos),
        lambda found: 200 + sum(len(p.text()) + 100 for p in found),
        memos,
    )


def check(
    flavour: Flavour,
    files: Mapping[str, bytes],
    path: str | None,
    where: str,
    memos: Memos | None = None,
) -> None:
    """One ComponentError naming the first file and entry that leave the deployable
    (``memos``: the edge's memo tables).
    """
    found = _memoised(flavour, files, path, memos)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ComponentError(
            where,
            f"{found[0].text()}{more}; a deployable must hold everything Flux deploys",
        )
