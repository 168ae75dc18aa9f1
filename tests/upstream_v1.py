"""Runs upstream ocm-controller v0.32.0's own ConfigData cases through ``sack8s`` and classifies them.

The fixture (``$SACK8S_UPSTREAM_V1``, default ``../shared/fixtures/upstream-v1``) holds each
case's inputs and what upstream's code computed for them (``computed/step<N>-<mode>/files``
or ``error.txt``). Every step is run through the CLI (click runner) on upstream's own input
for that step: step 1 on ``source/``, step N on upstream's step N-1 output, so each step is
compared on its own. Each file of the step is run (``localize``/``configure``, one FILE at a
time) and compared with upstream's file, parsed (YAML or JSON), not byte for byte.

Observed classes, per step and then per case (the worst of its steps):

* ``match``: every file parses equal to upstream's;
* ``both-error``: upstream failed the step and the CLI fails on it too;
* ``refused``: upstream succeeded and the CLI refuses (exit 1) on some file;
* ``accepted``: upstream failed and the CLI succeeds on every file;
* ``mismatch``: some file differs.

``tests/test_upstream_v1.py`` holds the expectation table; ``python tests/upstream_v1.py``
prints what the code in ``sys.path`` observes (used to measure before/after a change).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SACK8S_SHARED", REPO.parent / "shared")).resolve()
UPSTREAM_V1 = Path(os.environ.get("SACK8S_UPSTREAM_V1", SHARED / "fixtures" / "upstream-v1"))
D = "sha256:7f0168496f273c1e2095703a050128114d339c580b0906cd124a93b66ae471e2"

# The probes' components are not in their case.yaml: these are the accesses that give the
# references upstream computed (computed/step1-localize/substitutions.json of P06, P07, P11).
PROBE_COMPONENTS: dict[str, list[dict[str, Any]]] = {
    "P06-probe-json-target": [
        {
            "name": "image",
            "access": {"type": "ociArtifact", "imageReference": "ghcr.io/acme/app:1.2.3"},
        },
    ],
    "P07-probe-reference-parts": [
        {
            "name": "tagged",
            "access": {"type": "ociArtifact", "imageReference": "ghcr.io/acme/app:1.2.3"},
        },
        {
            "name": "tag-and-digest",
            "access": {"type": "ociArtifact", "imageReference": f"ghcr.io/acme/app:1.2.3@{D}"},
        },
        {
            "name": "digest-only",
            "access": {"type": "ociArtifact", "imageReference": f"ghcr.io/acme/app@{D}"},
        },
        {
            "name": "dockerhub-short",
            "access": {"type": "ociArtifact", "imageReference": "nginx:1.25"},
        },
        {"name": "no-tag", "access": {"type": "ociArtifact", "imageReference": "ghcr.io/acme/app"}},
        {
            "name": "port-registry",
            "access": {"type": "ociArtifact", "imageReference": "localhost:5000/acme/app:1.0"},
        },
        {
            "name": "localblob-globalaccess",
            "access": {
                "type": "localBlob",
                "localReference": D,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+tar+gzip",
                "globalAccess": {
                    "type": "ociBlob",
                    "digest": D,
                    "size": 1,
                    "ref": "ghcr.io/mandelsoft/cnudie/component-descriptors/github.com/vasu1124/introspect",
                    "mediaType": "application/vnd.docker.distribution.manifest.v2+tar+gzip",
                },
            },
        },
    ],
    "P11-probe-localblob-without-globalaccess": [
        {
            "name": "image",
            "relation": "local",
            "access": {
                "type": "localBlob",
                "localReference": D,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
            },
        },
    ],
}


@dataclass
class FileRun:
    file: str
    exit_code: int
    stdout: str
    stderr: str
    upstream: Any  # parsed upstream file, or None when upstream failed the step
    same: bool | None  # parsed output equal to upstream's (None: not comparable)


@dataclass
class StepRun:
    mode: str
    upstream_error: str | None
    files: list[FileRun] = field(default_factory=list)

    @property
    def observed(self) -> str:
        failed = [f for f in self.files if f.exit_code != 0]
        if self.upstream_error is not None:
            return "both-error" if failed else "accepted"
        if failed:
            return "refused"
        return "match" if all(f.same for f in self.files) else "mismatch"

    def stderr(self) -> str:
        return "\n".join(f"[{f.file}] {f.stderr}" for f in self.files)


SEVERITY = ["match", "both-error", "refused", "accepted", "mismatch"]


def case_class(steps: list[StepRun]) -> str:
    return max((s.observed for s in steps), key=SEVERITY.index) if steps else "n/a"


def _yaml_docs(text: str) -> Any:
    try:
        return ("json", json.loads(text))
    except ValueError:
        pass
    return (
        "yaml",
        [d for d in YAML(typ="safe", pure=True).load_all(io.StringIO(text)) if d is not None],
    )


def _load_case(case: Path) -> dict[str, Any]:
    return YAML(typ="safe", pure=True).load((case / "case.yaml").read_text())


def _descriptor(case: Path, info: dict[str, Any], tmp: Path) -> Path:
    inputs = info.get("inputs") or {}
    comp = inputs.get("component") or {}
    desc = inputs.get("descriptor") or {}
    resources = (
        PROBE_COMPONENTS.get(case.name) or comp.get("resources") or desc.get("resources") or []
    )
    out = []
    for r in resources:
        res = {
            "name": r["name"],
            "version": r.get("version", "1.0.0"),
            "type": r.get("type", "ociImage"),
            "relation": r.get("relation", "external"),
        }
        if r.get("extraIdentity"):
            res["extraIdentity"] = r["extraIdentity"]
        if "access" in r:
            res["access"] = {k: v for k, v in r["access"].items() if not k.startswith("_")}
        else:
            res["access"] = {
                "type": "localBlob",
                "localReference": "sha256:" + "0" * 64,
                "mediaType": "text/plain",
            }
        if r.get("digest"):
            res["digest"] = r["digest"]
        out.append(res)
    doc = {
        "meta": {"schemaVersion": "v2"},
        "component": {
            "name": comp.get("component") or "upstream-v1.example.org/case-" + case.name.lower(),
            "version": comp.get("version") or desc.get("version") or "1.0.0",
            "provider": "upstream-v1",
            "repositoryContexts": [],
            "sources": [],
            "componentReferences": [],
            "resources": out,
        },
    }
    path = tmp / "component-descriptor.json"
    path.write_text(json.dumps(doc))
    return path


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _rule_files(case: Path, step: dict[str, Any], mode: str) -> list[str]:
    """The files the step's rules name (normalised as upstream joins them to the root)."""
    if mode == "substitute":
        return [s["file"] for s in step["substitutions"]]
    try:
        doc = YAML(typ="safe", pure=True).load((case / step["config"]).read_text())
    except Exception:
        return []
    if not isinstance(doc, dict):
        return []
    if mode == "localize":
        rules = doc.get("localization") or []
    else:
        rules = (doc.get("configuration") or {}).get("rules") or []
    return [
        str(r["file"]).removeprefix("./") for r in rules if isinstance(r, dict) and r.get("file")
    ]


def _spiff_only_case(case: Path, tmp: Path) -> dict[str, Any]:
    """Case 19 (``TestGenerateSubstitutionsUseDefaults``) calls ``generateSubstitutions`` with
    defaults, values and substitutions directly: the same as a ConfigData with those defaults
    and rules, configured with those values, on an (empty) values.yaml."""
    y = YAML(typ="safe", pure=True)
    rules = [
        {"value": s["value"], "file": s["file"], "path": s["path"]}
        for s in y.load((case / "iSbs.yaml").read_text())
    ]
    cd = {
        "apiVersion": "config.ocm.software/v1alpha1",
        "kind": "ConfigData",
        "configuration": {"defaults": y.load((case / "dflts.yaml").read_text()), "rules": rules},
    }
    (tmp / "configdata.json").write_text(json.dumps(cd))
    (tmp / "source").mkdir()
    (tmp / "source" / "values.yaml").write_text("")
    return {
        "mode": "configure",
        "config": str(tmp / "configdata.json"),
        "values": y.load((case / "vls.yaml").read_text()),
    }


def _substitute_configdata(step: dict[str, Any]) -> str:
    """ocm ``localize.Substitute`` cases (43-45): the substitutions as literal configuration rules."""
    rules = [
        {"value": s["value"], "file": s["file"], "path": s["path"]} for s in step["substitutions"]
    ]
    return json.dumps(
        {
            "apiVersion": "config.ocm.software/v1alpha1",
            "kind": "ConfigData",
            "configuration": {"rules": rules},
        }
    )


def run_step(
    case: Path,
    info: dict[str, Any],
    index: int,
    step: dict[str, Any],
    tmp: Path,
    extra: tuple[str, ...] = (),
) -> StepRun:
    from function.cli import main  # the code under test (whatever is first on sys.path)

    mode = step["mode"]
    computed = case / "computed" / f"step{index + 1}-{mode}"
    error = computed / "error.txt"
    upstream_error = error.read_text() if error.exists() else None
    if index == 0:
        root = case / "source"
    else:
        prev = (
            case
            / "computed"
            / f"step{index}-{info['inputs']['harness_steps'][index - 1]['mode']}"
            / "files"
        )
        root = prev
    files_dir = computed / "files"
    names = _files(files_dir) if files_dir.exists() else _files(root)
    names += [
        f for f in _rule_files(case, step, mode) if f not in names
    ]  # e.g. a rule on a missing file
    work = tmp / f"step{index + 1}"
    work.mkdir()
    if mode == "substitute":
        cd = work / "configdata.json"
        cd.write_text(_substitute_configdata(step))
        command = "configure"
        values: Any = {}
    else:
        cd = case / step["config"]
        command = mode
        values = None
        if mode == "configure":
            vj = computed / "values.json"
            values = json.loads(vj.read_text()) if vj.exists() else step.get("values", {})
    args = [command, "--config-data", str(cd), "--root", str(root)]
    if command == "localize":
        args += ["--component", str(_descriptor(case, info, work))]
    else:
        vf = work / "values.json"
        vf.write_text(json.dumps(values if values is not None else {}))
        args += ["--values", str(vf)]
    args += list(extra)
    result = StepRun(mode, upstream_error)
    for name in names:
        r = CliRunner().invoke(main, args + [name], catch_exceptions=True)
        if r.exception and not isinstance(r.exception, SystemExit):
            raise r.exception
        upstream = _yaml_docs((files_dir / name).read_text()) if files_dir.exists() else None
        same = None
        if r.exit_code == 0 and upstream is not None:
            try:
                same = _yaml_docs(r.stdout)[1] == upstream[1]
            except Exception:
                same = False
        result.files.append(FileRun(name, r.exit_code, r.stdout, r.stderr, upstream, same))
    return result


def run_case(case: Path, extra: tuple[str, ...] = ()) -> list[StepRun]:
    info = _load_case(case)
    steps = (info.get("inputs") or {}).get("harness_steps") or []
    tmp = Path(tempfile.mkdtemp(prefix="upstream-v1-"))
    try:
        if (case / "dflts.yaml").exists():
            return [_run_spiff_only(case, info, tmp, extra)]
        if not (case / "source").is_dir() or not steps:
            return []
        return [run_step(case, info, i, s, tmp, extra) for i, s in enumerate(steps)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_spiff_only(case: Path, info: dict[str, Any], tmp: Path, extra: tuple[str, ...]) -> StepRun:
    """Case 19: upstream's expectation is the substitution itself (value null at dmi.gcp_project_id)."""
    from function.cli import main

    step = _spiff_only_case(case, tmp)
    vf = tmp / "values.json"
    vf.write_text(json.dumps(step["values"]))
    r = CliRunner().invoke(
        main,
        [
            "configure",
            "--config-data",
            step["config"],
            "--root",
            str(tmp / "source"),
            "--values",
            str(vf),
            *extra,
            "values.yaml",
        ],
    )
    expected = (
        "yaml",
        [{"dmi": {"gcp_project_id": None}}],
    )  # upstream: [{"path": "dmi.gcp_project_id", "value": null}]
    same = r.exit_code == 0 and _yaml_docs(r.stdout) == expected
    return StepRun(
        "configure", None, [FileRun("values.yaml", r.exit_code, r.stdout, r.stderr, expected, same)]
    )


def cases() -> list[Path]:
    return sorted(p for p in UPSTREAM_V1.iterdir() if p.is_dir() and (p / "case.yaml").exists())


def main() -> None:  # pragma: no cover - a measuring tool
    totals: dict[str, int] = {}
    for case in cases():
        steps = run_case(case)
        cls = case_class(steps)
        totals[cls] = totals.get(cls, 0) + 1
        detail = "; ".join(f"{s.mode}: {s.observed}" for s in steps)
        print(f"{case.name:55} {cls:10} {detail}")
        if "-v" in sys.argv:
            for s in steps:
                for f in s.files:
                    if f.exit_code or f.same is False:
                        print(f"    {s.mode} {f.file}: exit {f.exit_code} {f.stderr.strip()[:300]}")
    print(totals)


if __name__ == "__main__":  # pragma: no cover
    main()
