"""The function under the real Crossplane CLI (crank v2.2.4): render and beta validate, offline.

Opt-in: these machines have no Crossplane CLI. The tests run when ``SACK8S_CROSSPLANE`` names
the binary (or ``crossplane`` is on PATH) and skip with one line otherwise, in strict mode too.
The default suite's checks without crank are tests/test_schema_validation.py (structural
schemas) and the e2e suite (a real API server).

* One ``sack8s serve --insecure`` for the session; ``crossplane render`` reaches it through the
  ``render.crossplane.io/runtime-development-target`` annotation (``-a``).
* For every example, ``crossplane render`` and ``sack8s render`` compose the same resources (and
  report the same results); the normaliser below drops only what Crossplane's render adds itself.
* ``crossplane beta validate`` accepts every shipped example and every rendered object against
  the upstream CRDs + our XRDs + the function-input CRD, with zero errors and exactly the
  expected summary counts; the built-in kinds it cannot check (Namespace, ServiceAccount, Role,
  RoleBinding, ConfigMap, ClusterRole, CRD) are checked by ``kubernetes_validate`` (strict).
* Deliberately broken copies (wrong apiVersion, misspelled field) make the same helper fail.
* A Fatal (a forbidden namespace) fails both renders with the same message.
"""

from __future__ import annotations

import base64
import copy
import functools
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.examples import (
    BROKEN,
    CASES,
    COMPOSITION,
    EXAMPLES,
    REPO,
    Case,
    broken_cases,
    claims_side,
    dump,
    gvk,
    load,
    shipped,
)
from support.oci_env import basic_auth_registry, htpasswd_file

pytestmark = pytest.mark.crossplane

FUNCTIONS = EXAMPLES / "functions.yaml"
TARGET_ANNOTATION = "render.crossplane.io/runtime-development-target"
TIMEOUT = 60

# Kinds no CRD in ../shared/crds or our XRDs describes: `crossplane beta validate` reports them as
# "missing schemas" (exit 0). Only these may be missing; any other missing schema (say a typo in
# an apiVersion) is a failure. The Kubernetes built-ins are checked by kubernetes_validate.
CORE_MISSING = {
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),  # package/crossplane-rbac.yaml
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),  # package/input/
}
# Crossplane package kinds: no CRD for them is shipped in ../shared/crds.
ALLOWED_MISSING = CORE_MISSING | {
    ("pkg.crossplane.io/v1", "Function"),  # examples/functions.yaml
    ("meta.pkg.crossplane.io/v1", "Function"),  # package/crossplane.yaml
    ("meta.pkg.crossplane.io/v1beta1", "Function"),
}


def _sack8s_bin() -> str:
    local = Path(sys.executable).with_name("sack8s")
    found = str(local) if local.exists() else shutil.which("sack8s")
    assert found, "the sack8s command is not installed next to the test interpreter"
    return found


def _k8s_version() -> str:
    """The Kubernetes schemas kubernetes_validate checks core kinds against (1.32 if shipped)."""
    import kubernetes_validate.utils as kvu

    shipped = {kvu.major_minor(v) for v in kvu.all_versions()}
    return "1.32" if "1.32" in shipped else kvu.major_minor(kvu.latest_version())


def _run(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT, **kw)


_load, _dump, _gvk = load, dump, gvk


# --------------------------------------------------------------------------------------------
# The function server (one per session)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def target(self) -> str:
        return f"{TARGET_ANNOTATION}=dns:///127.0.0.1:{self.port}"

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="session")
def server(crossplane_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterable[Server]:
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [_sack8s_bin(), "serve", "--insecure", "--address", f"127.0.0.1:{port}"],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    srv = Server(port, proc, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"sack8s serve exited with {proc.returncode}:\n{srv.logs()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"sack8s serve not listening on {port} after 30 s:\n{srv.logs()}")
                time.sleep(0.1)
        yield srv
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


# --------------------------------------------------------------------------------------------
# The examples and their renders


def claim_xr(claim: dict[str, Any]) -> dict[str, Any]:
    """The legacy XR Crossplane's claim controller creates for a claim, for `crossplane render`.

    Kind X<claim kind>, labels crossplane.io/claim-name/-namespace, spec.claimRef. Crossplane
    names it <claim>-<random suffix>; we use the claim's name, as `sack8s render` does, so the
    composed names can be compared.
    """
    meta = claim["metadata"]
    name, ns = meta["name"], meta["namespace"]
    return {
        "apiVersion": claim["apiVersion"],
        "kind": "X" + claim["kind"],
        "metadata": {
            "name": name,
            "labels": {
                **(meta.get("labels") or {}),
                "crossplane.io/claim-name": name,
                "crossplane.io/claim-namespace": ns,
            },
        },
        "spec": {
            **claim["spec"],
            "claimRef": {
                "apiVersion": claim["apiVersion"],
                "kind": claim["kind"],
                "name": name,
                "namespace": ns,
            },
        },
    }


@dataclass
class Renders:
    case: Case
    xr_file: Path  # the XR `crossplane render` got
    crossplane: subprocess.CompletedProcess[str]
    sack8s: subprocess.CompletedProcess[str]
    crossplane_file: Path  # crossplane's stdout without its Result documents (what we validate)
    sack8s_file: Path

    @property
    def crossplane_docs(self) -> list[dict[str, Any]]:
        return _load(self.crossplane_file)

    @property
    def crossplane_results(self) -> list[dict[str, Any]]:
        docs = yaml.safe_load_all(self.crossplane.stdout)
        return [d for d in docs if d and d.get("kind") == "Result"]

    @property
    def sack8s_docs(self) -> list[dict[str, Any]]:
        return _load(self.sack8s_file)


def crossplane_render(
    bin_: Path, srv: Server, xr: Path, composition: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = [str(bin_), "render", "-x", "-r", str(xr), str(composition), str(FUNCTIONS)]
    return _run([*args, "-a", srv.target, *extra])


def sack8s_render(xr: Path, composition: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run([_sack8s_bin(), "render", str(xr), "--composition", str(composition), *extra])


@pytest.fixture(scope="session")
def renders(
    crossplane_bin: Path, server: Server, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Renders]:
    """Every case rendered once by each tool (sequentially; the server is shared)."""
    out: dict[str, Renders] = {}
    for case in CASES:
        if not case.xr.exists():
            continue
        tmp = tmp_path_factory.mktemp(f"render-{case.id}")
        xr_file = case.xr
        if case.is_claim:
            xr_file = _dump([claim_xr(_load(case.xr)[0])], tmp / "claim-xr.yaml")
        cp_extra: list[str] = []
        sk_extra: list[str] = []
        if case.observed:
            cp_extra += ["-o", str(case.observed)]
            sk_extra += ["--observed", str(case.observed)]
        if case.required:
            cp_extra += ["-e", str(case.required)]
            sk_extra += ["--required-resources", str(case.required)]
        cp = crossplane_render(crossplane_bin, server, xr_file, case.composition, *cp_extra)
        sk = sack8s_render(case.xr, case.composition, *sk_extra)
        cp_file = tmp / "crossplane.yaml"
        if cp.returncode == 0:
            docs = [d for d in yaml.safe_load_all(cp.stdout) if d and d.get("kind") != "Result"]
            _dump(docs, cp_file)
        sk_file = tmp / "sack8s.yaml"
        sk_file.write_text(sk.stdout)
        out[case.id] = Renders(case, xr_file, cp, sk, cp_file, sk_file)
    return out


def _case(renders: dict[str, Renders], server: Server, case_id: str) -> Renders:
    if case_id not in renders:
        pytest.fail(f"example for case {case_id!r} is missing", pytrace=False)
    r = renders[case_id]
    assert r.crossplane.returncode == 0, (
        f"crossplane render failed ({r.crossplane.returncode}):\n{r.crossplane.stderr}\n"
        f"server log:\n{server.logs()}"
    )
    assert r.sack8s.returncode == 0, f"sack8s render failed:\n{r.sack8s.stderr}"
    return r


# --------------------------------------------------------------------------------------------
# Normalising `crossplane render` output
#
# Dropped from every composed resource, on both sides, and only when the value is exactly what
# crank v2.2.4's render (render.go, SetComposedResourceMetadata) would set:
#   - metadata.ownerReferences[]: the controller reference to the XR (apiVersion, kind and name
#     of the XR, controller: true, blockOwnerDeletion: true, uid "" since the XR has none);
#     any other owner reference is kept;
#   - metadata.labels["crossplane.io/composite"] == the XR's name;
#   - metadata.labels["crossplane.io/claim-name"] / ["crossplane.io/claim-namespace"] == the same
#     label on the XR (set only for claims);
#   - metadata.generateName == "<XR name>-" (set when the function gives no name);
#   - metadata.labels and metadata.ownerReferences when the above leaves them empty.
# Not dropped: metadata.namespace (render sets the XR's namespace only for namespaced XRs; ours
# are Cluster / LegacyCluster), the composition-resource-name annotation (both print it), and
# everything else.
# Dropped from the XR (first document), which `-x` prints with the input's metadata and spec:
#   - spec and all of metadata except name (compared with the input XR separately);
#   - status.conditions[type=Ready] (render computes it from the composed resources' readiness)
#     and lastTransitionTime on every condition (render stamps a fixed time);
#   - status.conditions when that leaves it empty.


def _normalise_composed(obj: dict[str, Any], xr: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    xr_meta = xr.get("metadata") or {}
    xr_name = xr_meta.get("name")
    xr_labels = xr_meta.get("labels") or {}
    refs = [
        r
        for r in meta.get("ownerReferences") or []
        if not (
            r.get("apiVersion") == xr.get("apiVersion")
            and r.get("kind") == xr.get("kind")
            and r.get("name") == xr_name
            and r.get("controller") is True
            and r.get("blockOwnerDeletion") is True
            and r.get("uid", "") == ""
        )
    ]
    meta.pop("ownerReferences", None)
    if refs:
        meta["ownerReferences"] = refs
    labels = dict(meta.get("labels") or {})
    if labels.get("crossplane.io/composite") == xr_labels.get("crossplane.io/composite", xr_name):
        labels.pop("crossplane.io/composite")
    for key in ("crossplane.io/claim-name", "crossplane.io/claim-namespace"):
        if key in xr_labels and labels.get(key) == xr_labels[key]:
            labels.pop(key)
    meta.pop("labels", None)
    if labels:
        meta["labels"] = labels
    if meta.get("generateName") == f"{xr_name}-":
        meta.pop("generateName")
    return obj


def _normalise_xr(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {"name": (obj.get("metadata") or {}).get("name")},
    }
    status = copy.deepcopy(obj.get("status") or {})
    conds = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
        if c.get("type") != "Ready"
    ]
    status.pop("conditions", None)
    if conds:
        status["conditions"] = conds
    if status:
        out["status"] = status
    return out


def _by_resource_name(docs: list[dict[str, Any]], xr: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in docs:
        key = ((d.get("metadata") or {}).get("annotations") or {}).get(
            "crossplane.io/composition-resource-name"
        )
        assert key, f"{_gvk(d)} {d.get('metadata', {}).get('name')} has no resource name"
        assert key not in out, f"composition-resource-name {key!r} appears twice"
        out[key] = _normalise_composed(d, xr)
    return out


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Readable differences between two YAML values (a = crossplane, b = sack8s)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in b:
                out.append(f"{p}: only in crossplane render: {a[k]!r}")
            elif k not in a:
                out.append(f"{p}: only in sack8s render: {b[k]!r}")
            else:
                out += _diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=False))
            for d in _diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: crossplane {a!r} != sack8s {b!r}"]


def test_normaliser_drops_only_what_render_adds() -> None:
    xr = {"apiVersion": "g/v1", "kind": "X", "metadata": {"name": "a"}}
    cp = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "generateName": "a-",
            "labels": {"crossplane.io/composite": "a", "team": "t"},
            "ownerReferences": [
                {
                    "apiVersion": "g/v1",
                    "kind": "X",
                    "name": "a",
                    "uid": "",
                    "controller": True,
                    "blockOwnerDeletion": True,
                },
                {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "u"},
            ],
        },
    }
    assert _normalise_composed(cp, xr) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "labels": {"team": "t"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "u"}],
        },
    }
    # A composite label, generateName or owner that is not render's own stays (and so differs).
    wrong = copy.deepcopy(cp)
    wrong["metadata"]["labels"]["crossplane.io/composite"] = "b"
    wrong["metadata"]["generateName"] = "b-"
    wrong["metadata"]["ownerReferences"][0]["name"] = "b"
    got = _normalise_composed(wrong, xr)["metadata"]
    assert got["labels"]["crossplane.io/composite"] == "b"
    assert got["generateName"] == "b-"
    assert len(got["ownerReferences"]) == 2


# --------------------------------------------------------------------------------------------
# Render: crossplane render == sack8s render


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_render_matches_sack8s_render(
    renders: dict[str, Renders], server: Server, case_id: str
) -> None:
    r = _case(renders, server, case_id)
    input_xr = _load(r.xr_file)[0]
    cp_docs, sk_docs = r.crossplane_docs, r.sack8s_docs
    assert cp_docs and sk_docs
    cp_xr, sk_xr = cp_docs[0], sk_docs[0]

    # The XR: -x copies the input's spec; the status is the function's.
    assert cp_xr.get("spec") == input_xr.get("spec")
    assert _diff(_normalise_xr(cp_xr), _normalise_xr(sk_xr)) == []

    cp_res = _by_resource_name(cp_docs[1:], input_xr)
    sk_res = _by_resource_name(sk_docs[1:], input_xr)
    assert sorted(cp_res) == sorted(sk_res), "different composition-resource names"
    assert len(cp_res) >= 5, sorted(cp_res)
    problems = [f"{k}: {d}" for k in sorted(cp_res) for d in _diff(cp_res[k], sk_res[k])]
    assert problems == []
    # Both print composed resources sorted by composition-resource name.
    assert list(sk_res) == sorted(sk_res)

    # The same Warning/Normal results, in order: sack8s prints "<Severity> <reason>: <message>".
    sk_lines = [ln for ln in r.sack8s.stderr.splitlines() if re.match(r"^(Warning|Normal) ", ln)]
    assert len(sk_lines) == len(r.crossplane_results), r.sack8s.stderr
    for res, line in zip(r.crossplane_results, sk_lines, strict=False):
        severity = res["severity"].removeprefix("SEVERITY_").title()
        assert line.startswith(f"{severity} ") and line.endswith(f": {res['message']}"), (res, line)


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_same_arguments_same_output(
    crossplane_bin: Path, renders: dict[str, Renders], server: Server, case_id: str
) -> None:
    """`sack8s render` given crossplane render's own arguments (`-x -r XR COMPOSITION FUNCTIONS
    -o OBSERVED -e REQUIRED`) prints the same documents, compared field by field with nothing
    normalised away: the composite label, claim labels and owner reference on every composed
    object, the XR's metadata, spec, status and conditions (its `Ready` condition and crank's
    fixed condition time included), the `kind: Result` documents."""
    r = _case(renders, server, case_id)
    args = ["-x", "-r", str(r.xr_file), str(r.case.composition), str(FUNCTIONS)]
    if r.case.observed:
        args += ["-o", str(r.case.observed)]
    if r.case.required:
        args += ["-e", str(r.case.required)]
    sk = _run([_sack8s_bin(), "render", *args])
    assert sk.returncode == 0, sk.stderr
    cp_docs = _load_text(r.crossplane.stdout)
    sk_docs = _load_text(sk.stdout)

    assert _diff(cp_docs[0], sk_docs[0]) == []
    assert [gvk(d) for d in cp_docs[1:]] == [gvk(d) for d in sk_docs[1:]]
    problems = [p for a, b in zip(cp_docs[1:], sk_docs[1:], strict=True) for p in _diff(a, b)]
    assert problems == []
    assert any(d.get("kind") == "Result" for d in sk_docs) or not r.crossplane_results
    assert all(
        d["metadata"]["labels"]["crossplane.io/composite"] == cp_docs[0]["metadata"]["name"]
        for d in sk_docs[1:]
        if d.get("kind") != "Result"
    )


def test_render_claim_propagates_claim_labels(renders: dict[str, Renders], server: Server) -> None:
    """Render adds the claim labels from the XR: the normaliser has something to drop."""
    r = _case(renders, server, "claim")
    for d in r.crossplane_docs[1:]:
        labels = d["metadata"].get("labels") or {}
        assert labels.get("crossplane.io/claim-namespace") == "team-a", d["metadata"]


@pytest.mark.parametrize("case_id", ["helm-observed", "kustomize-observed"])
def test_observed_second_reconcile_adds_flux(
    renders: dict[str, Renders], server: Server, case_id: str
) -> None:
    r = _case(renders, server, case_id)
    first = renders[case_id.removesuffix("-observed")]
    kinds = {d["kind"] for d in r.crossplane_docs[1:]}
    assert "OCIRepository" in kinds
    assert len(r.crossplane_docs) > len(first.crossplane_docs)


# --------------------------------------------------------------------------------------------
# Validate: crossplane beta validate + kubernetes_validate for core kinds


@dataclass
class Validation:
    rc: int
    output: str
    summary: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def explain(self) -> str:
        return "\n".join(self.problems) + "\n--- crossplane beta validate:\n" + self.output


@functools.cache
def _extension_gvks(extensions: tuple[Path, ...]) -> frozenset[tuple[str, str]]:
    """The (apiVersion, kind)s the extension CRDs and XRDs define (XRDs: also the claim kind)."""
    out: set[tuple[str, str]] = set()
    for f in extensions:
        for d in _load(f):
            spec = d.get("spec") or {}
            kinds = [spec.get("names", {}).get("kind")]
            if d.get("kind") == "CompositeResourceDefinition" and spec.get("claimNames"):
                kinds.append(spec["claimNames"]["kind"])
            for v in spec.get("versions") or []:
                for k in kinds:
                    out.add((f"{spec['group']}/{v['name']}", k))
    return frozenset(out)


def _expanded(resources: list[Path]) -> list[dict[str, Any]]:
    """What validate checks: every document, plus each Composition pipeline step's input."""
    out: list[dict[str, Any]] = []
    for f in resources:
        for d in _load(f):
            out.append(d)
            if _gvk(d) == ("apiextensions.crossplane.io/v1", "Composition"):
                out += [s["input"] for s in d["spec"].get("pipeline") or [] if s.get("input")]
    return out


SUMMARY = re.compile(
    r"^Total (\d+) resources: (\d+) missing schemas, (\d+) success cases, (\d+) failure cases$"
)
MISSING = re.compile(r"^\[!\] could not find CRD/XRD for: (\S*), Kind=(\S*)$")


def validate(
    crossplane_bin: Path, extensions: list[Path], resources: list[Path], cache: Path
) -> Validation:
    """Run `crossplane beta validate` offline and kubernetes_validate on the core kinds.

    Failure (problems) on: a non-zero exit, any `[x]` line, a missing schema for a kind not in
    ALLOWED_MISSING, no summary line, summary counts other than expected (total = documents +
    composition inputs; missing = those whose kind no extension defines; success = the rest;
    failures = 0), or a kubernetes_validate error on a core kind.
    """
    import kubernetes_validate

    (cache / "local" / "none@v0").mkdir(parents=True, exist_ok=True)
    proc = _run(
        [
            str(crossplane_bin),
            "beta",
            "validate",
            "--cache-dir",
            str(cache),
            "--crossplane-image",
            "local/none:v0",
            ",".join(map(str, extensions)),
            ",".join(map(str, resources)),
        ]
    )
    v = Validation(proc.returncode, proc.stdout + proc.stderr)
    if proc.returncode != 0:
        v.problems.append(f"crossplane beta validate exited {proc.returncode}")
    empty = 0
    for line in proc.stdout.splitlines():
        if line.startswith("[x]"):
            v.problems.append(line)
        elif m := MISSING.match(line):
            api = m.group(1).removeprefix("/")
            if (api, m.group(2)) == ("", ""):
                # validate counts a comment-only YAML document (a header comment followed by
                # `---`) as an object with no apiVersion/kind; YAML loaders skip it.
                empty += 1
                v.problems.append(f"YAML document without apiVersion/kind (comments only?): {line}")
            elif (api, m.group(2)) not in ALLOWED_MISSING:
                v.problems.append(f"unexpected missing schema: {line}")
        elif m := SUMMARY.match(line):
            v.summary = dict(
                zip(("total", "missing", "success", "failure"), map(int, m.groups()), strict=False)
            )

    docs = _expanded(resources)
    known = _extension_gvks(tuple(extensions))
    total = len(docs) + empty
    missing = sum(1 for d in docs if _gvk(d) not in known) + empty
    v.expected = {"total": total, "missing": missing, "success": total - missing, "failure": 0}
    if not v.summary:
        v.problems.append("no summary line in the output")
    elif v.summary != v.expected:
        v.problems.append(f"summary {v.summary} != expected {v.expected}")

    version = _k8s_version()
    for d in docs:
        if _gvk(d) in CORE_MISSING or (_gvk(d) not in known and _is_builtin(d)):
            what = f"{_gvk(d)} {(d.get('metadata') or {}).get('name')}"
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = list(e.path)
                v.problems.append(f"kubernetes_validate {version}: {what}: {e.message} at {where}")
            except kubernetes_validate.SchemaNotFoundError as e:
                v.problems.append(f"kubernetes_validate {version}: {what}: no schema ({e})")
    return v


def _is_builtin(doc: dict[str, Any]) -> bool:
    """A Kubernetes built-in group: core (no group), apps, batch, ... or *.k8s.io."""
    group = str(doc.get("apiVersion", "")).rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


@dataclass
class Extensions:
    cluster: list[Path]  # CRDs + v2 XRD + input CRD
    claims: list[Path]  # CRDs + LegacyCluster XRD (with the claim CRD) + input CRD


@pytest.fixture(scope="session")
def extensions(crds_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Extensions:
    tmp = tmp_path_factory.mktemp("extensions")
    crds = sorted(crds_dir.glob("*.yaml"))
    assert crds, f"no CRDs in {crds_dir}"

    def generated(variant: str) -> Path:
        proc = _run([_sack8s_bin(), "xrd", "--variant", variant])
        assert proc.returncode == 0, proc.stderr
        return _dump(yaml.safe_load_all(proc.stdout), tmp / f"{variant}.yaml")

    gen_input = generated("input")
    return Extensions(
        cluster=[*crds, generated("cluster"), gen_input],
        claims=[*crds, generated("claims"), gen_input],
    )


_shipped, _claims_side = shipped, claims_side


def test_shipped_xrds_match_generated(extensions: Extensions) -> None:
    """Shipped XRD/CRD copies (examples/, package/) are what `sack8s xrd` generates today."""
    generated = {
        (d["kind"], d["metadata"]["name"]): d
        for f in (extensions.cluster[-2], extensions.claims[-2], extensions.cluster[-1])
        for d in _load(f)
    }
    seen = 0
    for f in _shipped():
        for d in _load(f):
            if d.get("kind") in ("CompositeResourceDefinition", "CustomResourceDefinition"):
                key = (d["kind"], d["metadata"]["name"])
                assert key in generated, f"{f}: {key} is not generated by sack8s xrd"
                assert _diff(d, generated[key]) == [], f"{f} differs from `sack8s xrd`"
                seen += 1
    assert seen >= 1


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: str(p.relative_to(REPO)))
def test_validate_shipped(
    crossplane_bin: Path, extensions: Extensions, tmp_path: Path, path: Path
) -> None:
    ext = extensions.claims if _claims_side(path) else extensions.cluster
    v = validate(crossplane_bin, ext, [path], tmp_path / "cache")
    assert v.ok, v.explain()


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_validate_rendered(
    crossplane_bin: Path,
    extensions: Extensions,
    renders: dict[str, Renders],
    server: Server,
    tmp_path: Path,
    case_id: str,
) -> None:
    """The `-x` output (the full XR and every composed resource) and the XR render got."""
    r = _case(renders, server, case_id)
    ext = extensions.claims if r.case.is_claim else extensions.cluster
    v = validate(crossplane_bin, ext, [r.xr_file, r.crossplane_file], tmp_path / "cache")
    assert v.ok, v.explain()
    assert v.summary["success"] >= 5  # the XR, ExternalSecrets, OCM objects, Usages, ...
    assert v.summary["missing"] >= 4  # Namespaces, ServiceAccount, Role, RoleBinding


# --------------------------------------------------------------------------------------------
# The validation can fail


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_validate_rejects_broken_copy(
    crossplane_bin: Path,
    extensions: Extensions,
    renders: dict[str, Renders],
    server: Server,
    tmp_path: Path,
    broken: str,
) -> None:
    r = _case(renders, server, "helm")
    good = r.crossplane_docs
    bad = broken_cases(good)[broken]
    # The broken object next to the good ones, as in a real render: the helper must fail.
    path = _dump([*good, bad], tmp_path / "broken.yaml")
    v = validate(crossplane_bin, extensions.cluster, [path], tmp_path / "cache")
    assert not v.ok, f"{broken} was accepted:\n{v.output}"
    wrong = BROKEN[broken]
    assert any(wrong in p for p in v.problems), v.explain()
    # ... and the good ones alone pass (the failure is the broken object's).
    v = validate(crossplane_bin, extensions.cluster, [r.crossplane_file], tmp_path / "cache")
    assert v.ok, v.explain()


# --------------------------------------------------------------------------------------------
# Fatal


def test_render_fatal_forbidden_namespace(
    crossplane_bin: Path, server: Server, tmp_path: Path
) -> None:
    xr = _load(EXAMPLES / "xr.yaml")[0]
    xr["metadata"]["name"] = "podinfo-fatal"
    xr["spec"]["namespaces"] = [{"name": "kube-system", "mode": "create"}]
    path = _dump([xr], tmp_path / "xr-fatal.yaml")

    sk = sack8s_render(path, COMPOSITION)
    assert sk.returncode == 1, sk.stdout + sk.stderr
    assert sk.stdout == ""
    m = re.search(r"^sack8s render: (.+)$", sk.stderr, re.M)
    assert m, sk.stderr
    message = m.group(1)
    assert "kube-system" in message and "forbidden" in message

    cp = crossplane_render(crossplane_bin, server, path, COMPOSITION)
    assert cp.returncode != 0, cp.stdout
    assert f'pipeline step "compose" returned a fatal result: {message}' in cp.stderr, cp.stderr
    assert "kind: Namespace" not in cp.stdout


# --------------------------------------------------------------------------------------------
# Against a live registry with credentials (issue: read OCM components from OCI registries)


def test_crossplane_render_against_a_live_registry_with_function_credentials(
    crossplane_bin: Path,
    server: Server,
    basic_auth_registry,
    tmp_path: Path,
) -> None:
    """`crossplane render --function-credentials` against `sack8s serve`, reading the copied-default
    transfer from an htpasswd registry: Flux objects pinned where the OCM CLI wrote; same as sack8s render."""
    from support.oci_env import PASSWORD, USER

    host = basic_auth_registry.host
    xr = _load(REPO / "examples/xr.yaml")[0]
    xr["spec"]["component"].update(repository=f"oci::http://{host}/copied-default", version="6.2.0")
    comp = _load(REPO / "examples/composition.yaml")[0]
    policy = comp["spec"]["pipeline"][0]["input"]
    policy.update(
        registries=[{"host": host, "plainHTTP": True, "credentials": "registry-creds"}], mirrors=[]
    )
    policy["imageRegistries"] = [
        {"host": host, "pullCredential": True},
        {"host": "127.0.0.1:5000", "pullCredential": True},
    ]
    policy["ocm"] = {"enabled": True, "gate": False}
    comp["spec"]["pipeline"][0]["credentials"] = [
        {
            "name": "registry-creds",
            "source": "Secret",
            "secretRef": {"namespace": "crossplane-system", "name": "pull-secret"},
        }
    ]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pull-secret", "namespace": "crossplane-system"},
        "data": {
            "username": base64.b64encode(USER.encode()).decode(),
            "password": base64.b64encode(PASSWORD.encode()).decode(),
        },
    }
    xr_file, comp_file, cred_file = (
        _dump([xr], tmp_path / "xr.yaml"),
        _dump([comp], tmp_path / "comp.yaml"),
        _dump([secret], tmp_path / "creds.yaml"),
    )
    cp = crossplane_render(
        crossplane_bin, server, xr_file, comp_file, "--function-credentials", str(cred_file)
    )
    assert cp.returncode == 0, f"{cp.stderr}\nserver log:\n{server.logs()}"
    sk = sack8s_render(xr_file, comp_file, "--function-credentials", str(cred_file))
    assert sk.returncode == 0, sk.stderr
    cp_docs = [d for d in yaml.safe_load_all(cp.stdout) if d and d.get("kind") != "Result"]
    xr_out = cp_docs[0]
    got = _by_resource_name(cp_docs[1:], xr_out)
    want = _by_resource_name(_load_text(sk.stdout)[1:], xr_out)
    assert got == want, "\n".join(_diff(got, want)[:20])
    repo = f"{host}/copied-default/component-descriptors/acme.org/sack8s/podinfo"
    src = got["flux-ocirepository"]["spec"]
    assert src["url"] == f"oci://{repo}"
    assert src["ref"] == {
        "digest": "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
    }
    images = xr_out["status"]["images"]
    assert images == [
        {
            "resource": "image",
            "reference": f"{repo}@sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1",
        }
    ]
    assert PASSWORD not in cp.stdout + cp.stderr + sk.stdout + sk.stderr + server.logs()


def _load_text(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]
