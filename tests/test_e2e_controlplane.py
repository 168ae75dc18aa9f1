"""End to end on a real control plane: API server, Flux, ESO, garbage collector (issues 13, 17, 19).

The module fixture ``cp`` starts, from ``../shared/tools`` (installed once per session into
``$SACK8S_TOOLS`` by ``install.sh``): the fixture registry on 127.0.0.1:5000 (the address the
component descriptors embed, so Flux must pull from there); ``LOCKDOWN=1 up.sh`` with etcd,
kube-apiserver v1.36.3 and Flux source-controller v1.9.3 + kustomize-controller v1.9.6 under
the multi-tenancy lockdown (``--no-cross-namespace-refs --default-service-account=default``);
``gc.sh`` (kube-controller-manager v1.36.3: garbage collector and namespace controller only);
``external-secrets/up.sh`` (ESO v0.20.4, no webhook) with the fake-provider store in
``e2e_data/fake-store.yaml``; the OCM and Crossplane Usage CRDs, and CRDs for the XR kinds made
from the XRDs. There is no kubelet (Pods never run), no helm-controller, no Crossplane and no
OCM controller: HelmReleases, OCM objects and Usages are stored and validated, not acted on.

What it proves, in order (they share the control plane and build on each other's state):
- every object the function composes for the examples (Helm and Kustomize flavours, each
  fixture transfer mode, long names, the claim) is accepted when server-side applied by an
  identity holding only the ClusterRole generated for the policy, first with dry-run and then
  for real, each with the controller ownerReference Crossplane sets to its XR; broken copies
  are refused;
- every ExternalSecret becomes Ready, and its Secret has the right type, exact values (hostile
  passwords), the right registry host, and the claim's labels;
- Flux reconciles every source and every Kustomization impersonating the composed deployer
  with only the composed Role(Binding)s, and the Deployment carries the localized, pinned image;
- once ESO and Flux have reconciled, applying the same render again changes no generation;
- a component shipping a kind outside the deployer Role fails with Flux's message naming the
  permission, and the XR's ``status.blockedBy`` shows it;
- a component signed at test time deploys with the gate bound to its descriptor digest: the
  test writes the OCM Component's status as the controller would; another digest holds Flux
  back naming both, the right one lets Flux deploy it (issue 32);
- deleting each XR lets the garbage collector remove everything it owns; created Namespaces
  finalize; the observed order is recorded.

Run: ``flock /tmp/sack8s-port5000.lock pytest -m e2e`` (see docs/e2e.md). Missing
etcd/kubectl/docker-registry/the tools: one-line skip (a failure under ``SACK8S_STRICT=1``).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import CRDS, FIXTURES, REPO, SHARED, need, need_binary, need_path, need_tools
from crossplane.function import logging as sdklogging
from ruamel.yaml import YAML
from support.gardener_component import Blob, push, tgz
from support.kube import MANAGER, ApiError, Kube, condition, key

from function.compose import durations, readiness
from function.edge.fn import FunctionRunner
from function.edge.render import claim_to_xr, load_docs
from function.edge.render import render as render_in_process

pytestmark = pytest.mark.e2e

TOOLS_DIR = SHARED / "tools"
CONTROLPLANE = Path(os.environ.get("SACK8S_CONTROLPLANE", TOOLS_DIR / "controlplane"))
ESO = TOOLS_DIR / "external-secrets"
NEEDED_TOOLS = (
    "kube-apiserver",
    "kube-controller-manager",
    "source-controller",
    "kustomize-controller",
    "external-secrets",
)
DATA = Path(__file__).resolve().parent / "e2e_data"
STORE = DATA / "fake-store.yaml"
EXAMPLES = REPO / "examples"
REGISTRY = "127.0.0.1:5000"  # the descriptors embed it: Flux must pull from exactly here
XP_NS, XP_SA = "crossplane-system", "crossplane-test"
IMAGE_DIGEST = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"  # FLUX.md
# Where each transfer mode's localized image lives (FLUX.md, "Objects created").
IMAGE_REPO = {
    "source": f"{REGISTRY}/upstream/podinfo",
    "copied-default": f"{REGISTRY}/copied-default/component-descriptors/acme.org/sack8s/podinfo",
    "copied-oci": f"{REGISTRY}/copied-oci/upstream/podinfo",
    "by-ref": f"{REGISTRY}/upstream/podinfo",  # transferred without --copy-resources
    "e2e-extra": f"{REGISTRY}/upstream/podinfo",
    "e2e-signed": f"{REGISTRY}/upstream/podinfo",
}
ORDER = readiness.ORDER  # kinds in dependency order, as the function reports blockers
FLUX_KINDS = {"OCIRepository", "HelmRelease", "Kustomization"}
RECONCILED_KINDS = {"OCIRepository", "Kustomization"}  # no helm-controller here
EXTRA_CRDS = [  # besides Flux's (up.sh) and ESO's (external-secrets/up.sh)
    "delivery.ocm.software_components.yaml",
    "delivery.ocm.software_repositories.yaml",
    "delivery.ocm.software_resources.yaml",
    "delivery.ocm.software_deployers.yaml",
    "delivery.ocm.software_replications.yaml",
    "protection.crossplane.io_usages.yaml",
    "protection.crossplane.io_clusterusages.yaml",
]
XRDS = [EXAMPLES / "xrd.yaml", EXAMPLES / "xrd-claims.yaml"]
XR_API = "platform.example.org/v1alpha1"

TIMINGS: dict[str, float] = {}
FIGURES: dict[str, Any] = {"applied": 0, "dry_run": 0, "rejected": [], "reconciled": {}}


def _yaml() -> YAML:
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    return y


def load_all(text: str) -> list[dict]:
    return [d for d in _yaml().load_all(text) if d]


def dump_all(docs: list[dict], path: Path) -> Path:
    with path.open("w") as f:
        _yaml().dump_all(docs, f)
    return path


class timed:
    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        self.t0 = time.monotonic()

    def __exit__(self, *exc):
        TIMINGS[self.what] = TIMINGS.get(self.what, 0.0) + time.monotonic() - self.t0


def wait_until(what: str, probe: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def settled(obj: dict | None) -> bool:
    """Reconciled at its generation: Ready True, or False for a reason that is not 'in progress'."""
    c = condition(obj)
    if obj is None or c is None or c.get("status") == "Unknown":
        return False
    # a failed Kustomization keeps status.observedGeneration at its last success; the condition has
    # its own. ESO reports neither: its Ready condition is about the last sync.
    gen = c.get("observedGeneration", (obj.get("status") or {}).get("observedGeneration"))
    if gen is not None and gen != obj["metadata"].get("generation"):
        return False
    return c["status"] == "True" or c.get("reason") not in (
        "Progressing",
        "DependencyNotReady",
        "ArtifactFailed",
    )


# ---------------------------------------------------------------------------------------------
# The control plane, the registry and Crossplane's identity.


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:port (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free_block(size: int) -> int:
    """``size`` free ports in a row, below the kernel's ephemeral range: a port in it can be
    taken by any outgoing connection between this check and the controller's bind (seen: the
    kustomize-controller's metrics port, "address already in use", no Kustomization reconciled).
    """
    high = max(_ephemeral_low(), 12000)
    for _ in range(200):
        base = random.randrange(10000, high - size)
        if all(_port_free(base + i) for i in range(size)):
            return base
    raise RuntimeError("no free port block")


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _run(
    cmd: list[str], *, env: dict | None = None, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} -> exit {p.returncode}\n"
            f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        )
    return p


@dataclass
class ControlPlane:
    work: Path
    admin: Kube
    xp: Kube  # Crossplane's identity: only the ClusterRole generated for the policy
    env: dict[str, str]
    registry_dir: Path
    renders: dict[str, Render] = field(default_factory=dict)


@pytest.fixture(scope="module")
def cp(tmp_path_factory) -> ControlPlane:
    etcd = need_binary("etcd", "SACK8S_ETCD")  # Debian etcd-server
    kubectl = need_binary("kubectl", "SACK8S_KUBECTL")  # up.sh installs CRDs with it
    registry_bin = need_binary("docker-registry", "SACK8S_REGISTRY_BIN")
    for tool in ("openssl", "curl"):
        need(bool(shutil.which(tool)), f"{tool} not installed (up.sh needs it)")
    need_path(CONTROLPLANE / "up.sh", "control-plane tools", "SACK8S_CONTROLPLANE")
    need_path(ESO / "up.sh", "External Secrets tools", "SACK8S_SHARED")
    need_path(FIXTURES / "serve-registry.sh", "OCM CLI fixtures", "SACK8S_FIXTURES")
    need_path(CRDS, "upstream CRDs", "SACK8S_CRDS")
    need(
        not _listening(5000),
        f"port 5000 is in use (stop Debian's docker-registry service): the e2e registry "
        f"must serve the fixtures on {REGISTRY}, the address the descriptors embed",
    )
    t0 = time.monotonic()
    with timed("install.sh (tools)"):
        tools = need_tools(*NEEDED_TOOLS)
    work = tmp_path_factory.mktemp("e2e")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        [str(Path(etcd).parent), str(Path(kubectl).parent), env.get("PATH", "")]
    )
    etcd_port, ctl_base, eso_base = _free_block(11), _free_block(4), _free_block(2)
    api_port, storage_port = _free_block(1), _free_block(1)
    env.update(
        LOCKDOWN="1",
        CONTROLLERS="source-controller kustomize-controller",
        ETCD_PORT=str(etcd_port),
        API_PORT=str(api_port),
        STORAGE_PORT=str(storage_port),
        PORT_BASE=str(ctl_base),
        ESO_PORT_BASE=str(eso_base),
        KCM_PORT="0",
        DOCKER_REGISTRY=registry_bin,
    )
    env.pop("KUBECONFIG", None)
    cpw, regdir = work / "cp", work / "registry"
    started_registry = started_cp = False
    admin = xp = None

    def step(what: str, cmd: list[str], timeout: float = 180) -> None:
        with timed(what):
            try:
                _run(cmd, env=env, timeout=timeout)
            except AssertionError as e:
                logs = "\n".join(
                    f"--- {p.name}\n{_tail(p)}" for p in sorted((cpw / "logs").glob("*.log"))
                )
                raise AssertionError(f"{e}\n{logs}") from None

    try:
        with timed("registry"):
            _run(
                [
                    str(FIXTURES / "serve-registry.sh"),
                    "5000",
                    str(work / "registry.pid"),
                    str(regdir),
                ],
                env=env,
            )
            started_registry = True
            # the fixture copy is read-only; the extra-role component is pushed to it
            _run(["chmod", "-R", "u+w", str(regdir / "root")])
        started_cp = True
        step(
            "up.sh", [str(CONTROLPLANE / "up.sh"), str(tools), str(cpw), str(CONTROLPLANE / "crds")]
        )
        step("gc.sh", [str(CONTROLPLANE / "gc.sh"), str(tools), str(cpw)])
        step("external-secrets/up.sh", [str(ESO / "up.sh"), str(tools), str(cpw), str(STORE)])
        token = (cpw / "pki" / "tokens.csv").read_text().split(",")[0]
        admin = Kube(f"https://127.0.0.1:{api_port}", cpw / "pki" / "ca.crt", token)
        with timed("extra CRDs + XR CRDs + Crossplane identity"):
            names = []
            for name in EXTRA_CRDS:
                for crd in load_all((CRDS / name).read_text()):
                    admin.apply(crd, manager="e2e-admin")
                    names.append(crd["metadata"]["name"])
            for xrd in XRDS:
                crd = xr_crd(load_all(xrd.read_text())[0])
                admin.apply(crd, manager="e2e-admin")
                names.append(crd["metadata"]["name"])
            for n in names:
                wait_until(f"CRD {n} established", lambda n=n: _established(admin, n), 30, 0.2)
            admin.discover()
            xp = admin.as_token(crossplane_identity(admin))
        with timed("ClusterSecretStore Ready"):
            (store,) = load_all(STORE.read_text())
            wait_until(
                "the fake ClusterSecretStore to be Ready",
                lambda: (condition(admin.get(store)) or {}).get("status") == "True",
                60,
                0.5,
            )
        TIMINGS["control plane up (total)"] = time.monotonic() - t0
        yield ControlPlane(cpw, admin, xp, env, regdir)
    finally:
        with timed("teardown"):
            for k in (admin, xp):
                if k is not None:
                    k.close()
            if started_cp:  # down.sh stops ESO, kube-controller-manager, Flux, apiserver, etcd
                _run([str(CONTROLPLANE / "down.sh"), str(cpw)], env=env, check=False)
                shutil.rmtree(cpw / "etcd", ignore_errors=True)
                shutil.rmtree(cpw / "storage", ignore_errors=True)
            pidfile = work / "registry.pid"
            if started_registry or pidfile.exists():  # also when serve-registry.sh gave up waiting
                try:
                    os.kill(int(pidfile.read_text().strip()), 15)
                except (ProcessLookupError, ValueError):
                    pass
                shutil.rmtree(regdir / "root", ignore_errors=True)


def _established(admin: Kube, crd: str) -> bool:
    got = admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd) or {}
    conditions = (got.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def xr_crd(xrd: dict) -> dict:
    """The CRD Crossplane makes for an XRD's XR kind (schema as generated, status subresource),
    so the objects standing in for the XRs are validated against the XRD and can own things."""
    spec = xrd["spec"]
    versions = [
        {
            "name": v["name"],
            "served": v.get("served", True),
            "storage": v.get("referenceable", True),
            "schema": v["schema"],
            "subresources": {"status": {}},
        }
        for v in spec["versions"]
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": xrd["metadata"]["name"]},
        "spec": {
            "group": spec["group"],
            "names": {**spec["names"], "listKind": spec["names"]["kind"] + "List"},
            "scope": "Cluster",  # Cluster and LegacyCluster XRs are both cluster-scoped
            "versions": versions,
        },
    }


def crossplane_identity(admin: Kube) -> str:
    """A ServiceAccount bound (ClusterRoleBinding) only to the ClusterRole the package documents for
    Crossplane, generated for the policy in use (`sack8s xrd --variant rbac --policy P`, as ops do);
    its token. For the default policy that is package/crossplane-rbac.yaml (a drift test checks
    it)."""
    out = subprocess.run(
        [sack8s_exe(), "xrd", "--variant", "rbac", "--policy", str(DATA / "policy.yaml")],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    role = load_all(out.stdout)
    assert [r["kind"] for r in role] == ["ClusterRole"], "one ClusterRole expected"
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": XP_NS}}, "e2e-admin")
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": XP_SA, "namespace": XP_NS},
        },
        "e2e-admin",
    )
    admin.apply(role[0], "e2e-admin")
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "crossplane-test"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role[0]["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": XP_SA, "namespace": XP_NS}],
        },
        "e2e-admin",
    )
    tr = admin.request(
        "POST",
        f"/api/v1/namespaces/{XP_NS}/serviceaccounts/{XP_SA}/token",
        json={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return tr["status"]["token"]


# ---------------------------------------------------------------------------------------------
# Rendering, owners, applying.


def sack8s_exe() -> str:
    exe = Path(sys.executable).parent / "sack8s"
    return str(exe if exe.exists() else REPO / ".venv" / "bin" / "sack8s")


def sack8s(*args: str, observed: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sack8s_exe(), "render", *args]
    if observed is not None:
        cmd += ["--observed", str(observed)]
    return subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True, timeout=120)


@dataclass
class Case:
    name: str
    flavour: str  # helm | kustomize
    mode: str  # transfer mode: source | copied-default | copied-oci | by-ref | e2e-extra
    example: Path
    required: Path | None = None
    policy: Path = DATA / "policy.yaml"
    long_names: bool = False  # XR name 91 characters, target namespace 63 (the limit)

    @property
    def propagation(self) -> str:
        """How the XR is deleted. Foreground for the examples: what a claim with
        compositeDeletePolicy Foreground does, and the XR then visibly outlives everything it
        owns; Background for the rest: Crossplane's default for claims, and kubectl's."""
        plain = self.name.startswith(("helm-", "kustomize-")) and not self.long_names
        return "Foreground" if plain else "Background"


@dataclass
class Render:
    case: Case
    xr_file: Path
    xr: dict  # as given (spec)
    objects: list[dict]  # composed, in dependency order
    status: dict
    owner: dict | None = None  # the XR object standing in for Crossplane's, once created


CASES = [
    Case("helm-source", "helm", "source", EXAMPLES / "xr.yaml"),
    Case("helm-copied-default", "helm", "copied-default", EXAMPLES / "xr.yaml"),
    Case("helm-copied-oci", "helm", "copied-oci", EXAMPLES / "xr.yaml"),
    Case("helm-by-ref", "helm", "by-ref", EXAMPLES / "xr.yaml"),
    Case("kustomize-source", "kustomize", "source", EXAMPLES / "xr-kustomize.yaml"),
    Case("kustomize-copied-default", "kustomize", "copied-default", EXAMPLES / "xr-kustomize.yaml"),
    Case("kustomize-copied-oci", "kustomize", "copied-oci", EXAMPLES / "xr-kustomize.yaml"),
    Case("kustomize-by-ref", "kustomize", "by-ref", EXAMPLES / "xr-kustomize.yaml"),
    Case(
        "helm-long-names",
        "helm",
        "source",
        EXAMPLES / "xr.yaml",
        required=DATA / "required-long-names",
        long_names=True,
    ),
    Case(
        "kustomize-long-names",
        "kustomize",
        "source",
        EXAMPLES / "xr-kustomize.yaml",
        required=DATA / "required-long-names",
        long_names=True,
    ),
    Case(
        "claim-kustomize",
        "kustomize",
        "source",
        EXAMPLES / "claim.yaml",
        required=EXAMPLES / "required",
    ),
]
EXTRA_ROLE = Case(
    "extra-role",
    "kustomize",
    "e2e-extra",
    DATA / "xr-extra-role.yaml",
    policy=DATA / "policy-no-ocm.yaml",
)


def case_xr(case: Case, out: Path) -> Path:
    """The example, unchanged for the source mode; for a copy: its repository, and a distinct
    name and namespace."""
    (xr,) = load_all(case.example.read_text())
    if case.mode != "source":
        spec = xr["spec"]
        spec["component"]["repository"] = f"oci::http://{REGISTRY}/{case.mode}"
        xr["metadata"]["name"] = f"{xr['metadata']['name']}-{case.mode}"
        spec["namespaces"][0]["name"] = f"{spec['namespaces'][0]['name']}-{case.mode}"
    if case.long_names:  # names past the 63-character label/namespace and 53-character Helm limits
        xr["metadata"]["name"] = f"{xr['metadata']['name']}-with-a-long-name-".ljust(91, "x")
        # An XR name past 63 is no namespace name, so it cannot be its own tenant: ops name the
        # tenant (docs/security.md, "Tenancy"), whose own Namespace exists (the required
        # resources); the target is a new name of that tenant's, at the 63-character limit.
        tenant = f"{case.flavour}-long"
        xr["spec"]["namespaces"][0]["name"] = f"{tenant}--".ljust(63, "n")
        xr["metadata"].setdefault("labels", {})["sack8s.io/tenant"] = tenant
    return dump_all([xr], out / f"xr-{case.name}.yaml")


def rank(obj: dict) -> tuple:
    m = obj["metadata"]
    return (
        ORDER.index(obj["kind"]) if obj["kind"] in ORDER else len(ORDER),
        m.get("namespace") or "",
        m["name"],
    )


def render(case: Case, xr_file: Path, observed: Path | list[dict] | None = None) -> Render:
    """``sack8s render`` of the case, as a user runs it. With observed objects given as a list:
    the function the command calls (``function.edge.render.render``, a fresh runner) in this process,
    without a process start-up and a YAML round trip of every object read back."""
    if isinstance(observed, list):
        sdklogging.configure(sdklogging.Level.DISABLED)  # as `sack8s render` does
        xr = claim_to_xr(load_docs([xr_file])[0])
        rendered = asyncio.run(
            render_in_process(
                xr,
                load_docs([case.policy])[0],
                observed=observed,
                required=load_docs([case.required]) if case.required else [],
                runner=FunctionRunner(),
            )
        )
        assert rendered.fatal is None, f"render {case.name}: {rendered.fatal.message}"
        docs = load_all(rendered.yaml())
    else:
        args = [str(xr_file), "--input", str(case.policy)]
        if case.required:
            args += ["--required-resources", str(case.required)]
        p = sack8s(*args, observed=observed)
        assert p.returncode == 0, f"render {case.name}: exit {p.returncode}: {p.stderr}"
        docs = load_all(p.stdout)
    xr, objects = load_all(xr_file.read_text())[0], docs[1:]
    for o in objects:
        # `sack8s render` labels objects as crossplane render does (crossplane.io/composite = the
        # XR's name). An XR name over 63 characters (the long-names cases) breaks that label in
        # Crossplane itself; those cases test the function's own names, so the label is left out.
        labels = o["metadata"].get("labels") or {}
        for k in [k for k, v in labels.items() if k.startswith("crossplane.io/") and len(v) > 63]:
            del labels[k]
    for o in objects:
        assert o["metadata"]["annotations"]["crossplane.io/composition-resource-name"], o[
            "metadata"
        ]
    return Render(case, xr_file, xr, sorted(objects, key=rank), docs[0].get("status") or {})


def create_owner(cp: ControlPlane, r: Render) -> dict:
    """The XR, as Crossplane holds it: the v2 XR as written, or for a claim the legacy XR
    (XSACK8sComponentVersion) with the claim labels. Created as admin, as Crossplane would."""
    xr = r.xr
    if xr["metadata"].get("namespace"):  # a claim: its XR is cluster-scoped, named after it
        meta = xr["metadata"]
        owner = {
            "apiVersion": XR_API,
            "kind": "X" + xr["kind"],
            "metadata": {
                "name": f"{meta['name']}-e2e01",
                "labels": {
                    "crossplane.io/claim-name": meta["name"],
                    "crossplane.io/claim-namespace": meta["namespace"],
                },
            },
            "spec": xr["spec"],
        }
    else:
        owner = {
            "apiVersion": XR_API,
            "kind": xr["kind"],
            "metadata": {"name": xr["metadata"]["name"]},
            "spec": xr["spec"],
        }
    r.owner = cp.admin.apply(owner, manager="e2e-admin")
    return r.owner


def owned(obj: dict, owner: dict) -> dict:
    """``obj`` with the controller reference Crossplane sets on every composed resource."""
    o = copy.deepcopy(obj)
    o["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return o


def _rejection(r: Render, o: dict, e: ApiError, phase: str) -> tuple:
    m = o["metadata"]
    return (r.case.name, phase, o["kind"], m.get("namespace"), m["name"], e.status, e.message)


def apply_render(cp: ControlPlane, r: Render, rejected: list) -> None:
    """Apply every composed object as Crossplane in dependency order: each first with dry-run
    (the API server runs admission, schema and RBAC checks and stores nothing), then for real.
    A namespaced object cannot be dry-run before its Namespace exists, hence object by object."""
    owner = r.owner or create_owner(cp, r)
    for o in r.objects:
        obj = owned(o, owner)
        try:
            cp.xp.apply(obj, dry_run=True)
            FIGURES["dry_run"] += 1
        except ApiError as e:
            rejected.append(_rejection(r, o, e, "dry-run"))
            continue
        try:
            cp.xp.apply(obj)
        except ApiError as e:
            rejected.append(_rejection(r, o, e, "apply"))


def read_back(cp: ControlPlane, objects: list[dict]) -> list[dict]:
    return [got for o in objects if (got := cp.admin.get(o)) is not None]


def converge(cp: ControlPlane, r: Render, rejected: list, rounds: int = 4) -> Render:
    """Reconcile as Crossplane does: apply, read back, render with that observed, apply, until
    nothing new is composed (Namespaces first, then what goes into them, then Flux and the
    Usages: compose/gates.py). The last render, as applied."""
    for _ in range(rounds):
        again = render(r.case, r.xr_file, observed=read_back(cp, r.objects))
        again.owner = r.owner
        grown = len(again.objects) != len(r.objects)
        r = again
        cp.renders[r.case.name] = r
        apply_render(cp, r, rejected)
        if not grown:
            break
    return r


def strip(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k != "status"}


def _render_all(cases: list[Case], out: Path) -> list[Render]:
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda c: render(c, case_xr(c, out)), cases))


def _of_kind(cp: ControlPlane, kinds: set[str], names: list[str] | None = None) -> list[dict]:
    return [
        o
        for n, r in cp.renders.items()
        if names is None or n in names
        for o in r.objects
        if o["kind"] in kinds
    ]


# ---------------------------------------------------------------------------------------------
# The tests.


def test_plain_tar_kustomize_never_reaches_flux(cp, tmp_path):
    """deploy.resource 'manifests' (dir input without compress): our Fatal, exit 1, nothing
    composed."""
    (xr,) = load_all((EXAMPLES / "xr-kustomize.yaml").read_text())
    xr["spec"]["deploy"]["resource"]["name"] = "manifests"
    p = sack8s(
        str(dump_all([xr], tmp_path / "xr-plain-tar.yaml")), "--input", str(DATA / "policy.yaml")
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.strip() == "", "a Fatal render must print no objects"
    assert "compress: true" in p.stderr, p.stderr


def test_every_composed_object_is_accepted(cp, tmp_path_factory):
    """Every example in every transfer mode, long names and the claim, applied as Crossplane
    (dry-run, then for real), each object owned by its XR."""
    with timed("render (first)"):
        renders = _render_all(CASES, tmp_path_factory.mktemp("xrs"))
    rejected: list = []
    FIGURES["first_apply"] = time.monotonic()
    with timed("apply (dry-run + real, owners)"):
        for r in renders:
            cp.renders[r.case.name] = r
            apply_render(cp, r, rejected)
        renders = [converge(cp, r, rejected) for r in renders]
    n = sum(len(r.objects) for r in renders)
    FIGURES["applied"] += n
    FIGURES["rejected"] += rejected
    FIGURES["kinds"] = sorted({o["kind"] for r in renders for o in r.objects})
    FIGURES["per_case"] = {r.case.name: len(r.objects) for r in renders}
    print(
        f"applied {n} objects of {len(renders)} renders as {XP_NS}/{XP_SA}; "
        f"rejected {len(rejected)}"
    )
    assert not rejected, "rejected by the API server:\n" + "\n".join(map(str, rejected))


BROKEN = [  # (what, kind, mutate, expected status, text in the message)
    (
        "misspelled field",
        "Kustomization",
        lambda o: o["spec"].__setitem__("prunee", o["spec"].pop("prune")),
        500,  # what kube-apiserver 1.36 answers server-side apply of an undeclared field
        ".spec.prunee: field not declared in schema",
    ),
    (
        "wrong apiVersion",
        "Kustomization",
        lambda o: o.__setitem__("apiVersion", "kustomize.toolkit.fluxcd.io/v9"),
        404,
        "404 page not found",
    ),
    (
        "duration Flux's schema refuses",
        "OCIRepository",
        lambda o: o["spec"].__setitem__("interval", "ten minutes"),
        422,
        "spec.interval",
    ),
    (
        "missing required field",
        "ExternalSecret",
        lambda o: o["spec"]["data"][0].pop("remoteRef"),
        422,
        "spec.data[0].remoteRef: Required value",
    ),
    (
        "Role granting what Crossplane does not hold",
        "Role",
        lambda o: o["rules"].append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}),
        403,
        "attempting to grant RBAC permissions not currently held",
    ),
    (
        "name over the Namespace limit",
        "Namespace",
        lambda o: o["metadata"].__setitem__("name", "n" * 64),
        422,
        "must be no more than 63 characters",
    ),
]


@pytest.mark.parametrize("what,kind,mutate,status,text", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_copy_is_refused(cp, what, kind, mutate, status, text):
    """A deliberately broken copy of a composed object is refused by the API server (dry-run and
    for real), with the field or rule named: the acceptance above is not vacuous."""
    r = cp.renders["kustomize-source"]
    obj = copy.deepcopy(next(o for o in r.objects if o["kind"] == kind))
    mutate(obj)
    for dry_run in (True, False):
        with pytest.raises(ApiError) as e:
            cp.xp.apply(owned(obj, r.owner), dry_run=dry_run)
        assert e.value.status == status and text in e.value.message, e.value
    FIGURES.setdefault("broken", {})[what] = f"{e.value.status}: {e.value.message[:160]}"


def test_crossplane_identity_holds_only_the_package_role(cp):
    user = f"system:serviceaccount:{XP_NS}:{XP_SA}"
    assert cp.admin.can(user, "create", "roles", "rbac.authorization.k8s.io", "podinfo")
    assert not cp.admin.can(user, "create", "clusterroles", "rbac.authorization.k8s.io")
    assert not cp.admin.can(user, "escalate", "roles", "rbac.authorization.k8s.io", "podinfo")
    assert not cp.admin.can(user, "bind", "roles", "rbac.authorization.k8s.io", "podinfo")
    assert not cp.admin.can(user, "impersonate", "serviceaccounts")


def _store_values() -> dict[str, dict[str, str]]:
    (store,) = load_all(STORE.read_text())
    return {d["key"]: json.loads(d["value"]) for d in store["spec"]["provider"]["fake"]["data"]}


def _wait_ready(
    cp: ControlPlane, objs: list[dict], what: str, timeout: float, until_true: bool = False
) -> dict[tuple, dict]:
    """Wait until every object settled (``until_true``: is Ready); their last state."""
    state: dict[tuple, dict] = {}

    def done(s: dict | None) -> bool:
        return settled(s) and (not until_true or condition(s)["status"] == "True")

    def probe():
        for o in objs:
            if key(o) not in state or not done(state[key(o)]):
                state[key(o)] = cp.admin.get(o)
        return all(done(s) for s in state.values())

    try:
        wait_until(what, probe, timeout)
    except AssertionError:
        lines = [f"{k[1]} {k[2]}/{k[3]}: {condition(v)}" for k, v in state.items() if not done(v)]
        raise AssertionError(f"{what}: not settled:\n" + "\n".join(lines)) from None
    return state


def test_every_external_secret_syncs_with_exact_values(cp):
    """ESO (fake provider) turns every composed ExternalSecret into its Secret: the type, every
    value byte for byte (passwords with ", \\, a newline, {{ }} and non-ASCII), the registry host
    of each dockerconfigjson, and the claim's labels."""
    store = _store_values()
    hostile = [v["password"] for k, v in store.items() if k.startswith("registries/")]
    assert all(all(c in p for c in ('"', "\\", "\n", "{{")) and not p.isascii() for p in hostile)
    ess = _of_kind(cp, {"ExternalSecret"})
    with timed("ESO: every ExternalSecret Ready"):
        state = _wait_ready(cp, ess, "ExternalSecrets", 120, until_true=True)
    not_ready = {
        f"{k[2]}/{k[3]}": condition(v) for k, v in state.items() if condition(v)["status"] != "True"
    }
    assert not not_ready, not_ready
    TIMINGS["first apply -> every ExternalSecret Ready"] = time.monotonic() - FIGURES["first_apply"]
    checked = {"Opaque": 0, "kubernetes.io/dockerconfigjson": 0}
    for es in ess:
        spec, ns = es["spec"], es["metadata"]["namespace"]
        secret = cp.admin.get("v1", "Secret", spec["target"]["name"], ns)
        assert secret is not None, f"{ns}/{spec['target']['name']}: no Secret"
        template = spec["target"].get("template") or {}
        want_type = template.get("type", "Opaque")
        assert secret["type"] == want_type, (ns, secret["metadata"]["name"], secret["type"])
        labels = secret["metadata"].get("labels") or {}
        claim_labels = {  # the function's labels; crossplane.io/* are Crossplane's (render's)
            k: v for k, v in es["metadata"]["labels"].items() if not k.startswith("crossplane.io/")
        }
        assert claim_labels.items() <= labels.items(), (
            f"{ns}/{secret['metadata']['name']}: {labels}"
        )
        owner_refs = secret["metadata"].get("ownerReferences") or []
        assert [o["kind"] for o in owner_refs] == ["ExternalSecret"], (
            owner_refs
        )  # creationPolicy Owner
        got = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        remote = {
            d["secretKey"]: store[d["remoteRef"]["key"]][d["remoteRef"]["property"]]
            for d in spec.get("data") or []
        }
        if want_type == "kubernetes.io/dockerconfigjson":
            cfg = json.loads(got[".dockerconfigjson"])  # must parse, whatever the password holds
            user, password = remote["username"], remote["password"]
            auth = base64.b64encode(f"{user}:{password}".encode()).decode()
            assert cfg == {
                "auths": {REGISTRY: {"username": user, "password": password, "auth": auth}}
            }, (
                ns,
                secret["metadata"]["name"],
                cfg,
            )
        else:
            assert got == remote, (ns, secret["metadata"]["name"])
        checked[want_type] += 1
    FIGURES["external_secrets"] = {"synced": len(ess), **checked}
    print(f"ExternalSecrets synced: {len(ess)} ({checked})")
    assert checked["kubernetes.io/dockerconfigjson"] and checked["Opaque"]


def test_flux_reconciles_with_the_composed_rights_only(cp):
    names = [c.name for c in CASES if not c.long_names]
    objs = _of_kind(cp, RECONCILED_KINDS, names)
    with timed("Flux: every OCIRepository and Kustomization Ready"):
        state = _wait_ready(cp, objs, "Flux objects", 180, until_true=True)
    TIMINGS["first apply -> every Flux object settled"] = time.monotonic() - FIGURES["first_apply"]
    for k, v in state.items():
        c = condition(v)
        FIGURES["reconciled"][f"{k[1]} {k[2]}/{k[3]}"] = f"{c['reason']}: {c['message'][:160]}"
    not_ready = {
        f"{k[1]} {k[2]}/{k[3]}": condition(v)
        for k, v in state.items()
        if condition(v)["status"] != "True"
    }
    assert not not_ready, f"Flux objects not Ready: {json.dumps(not_ready, indent=1)}"

    for n in names:
        r = cp.renders[n]
        consumer = next(o for o in r.objects if o["kind"] in ("HelmRelease", "Kustomization"))
        sa, deploy_ns = consumer["spec"]["serviceAccountName"], consumer["metadata"]["namespace"]
        target = consumer["spec"]["targetNamespace"]
        _assert_only_composed_bindings(cp, r, sa, deploy_ns)
        user = f"system:serviceaccount:{deploy_ns}:{sa}"
        assert not cp.admin.can(user, "create", "roles", "rbac.authorization.k8s.io", target)
        assert not cp.admin.can(user, "get", "secrets", "", "kube-system")
        if r.case.flavour == "kustomize":
            _assert_kustomize_result(cp, r, consumer, target)


def test_long_names_reconcile(cp):
    """XR name of 91 characters (a legal cluster-scoped name), target namespace of 63: Flux applies
    it (Flux labels applied objects with the Kustomization's name: it must fit 63)."""
    objs = _of_kind(cp, RECONCILED_KINDS, [c.name for c in CASES if c.long_names])
    with timed("Flux reconcile (long names)"):
        state = _wait_ready(cp, objs, "long-name Flux objects", 120, until_true=True)
    bad = {
        f"{k[1]} {k[2]}/{k[3]}": condition(v)["message"]
        for k, v in state.items()
        if condition(v)["status"] != "True"
    }
    for k, v in state.items():
        FIGURES["reconciled"][f"{k[1]} {k[2]}/{k[3]}"] = (
            f"{condition(v)['reason']}: {condition(v)['message'][:160]}"
        )
    assert not bad, json.dumps(bad, indent=1)


def _managed(obj: dict) -> Any:
    return [m for m in obj["metadata"].get("managedFields") or [] if m.get("manager") == MANAGER]


def test_second_apply_changes_no_generation(cp):
    """Issue 19 item 4: once ESO and Flux have reconciled (and written back whatever they write
    back), applying the same render again changes no object's metadata.generation, and writes
    nothing of ours (the same resourceVersion, or only a controller's concurrent status write)."""
    changed_gen, changed = [], []
    same_rv = 0
    with timed("second apply of every render"):
        for r in cp.renders.values():
            for o in r.objects:
                for _ in range(5):
                    before = cp.xp.get(o)
                    after = cp.xp.apply(owned(o, r.owner))
                    if before["metadata"].get("generation") != after["metadata"].get("generation"):
                        changed_gen.append(
                            (
                                key(o),
                                before["metadata"].get("generation"),
                                after["metadata"].get("generation"),
                            )
                        )
                        break
                    if (
                        before["metadata"]["resourceVersion"]
                        == after["metadata"]["resourceVersion"]
                    ):
                        same_rv += 1
                        break
                    if _managed(before) != _managed(after):
                        changed.append(key(o))
                        break
                    time.sleep(0.2)  # a controller wrote its status in between: try again
    total = sum(len(r.objects) for r in cp.renders.values())
    FIGURES["second_apply"] = (
        f"{total} objects: generation unchanged for {total - len(changed_gen)}, the same "
        f"resourceVersion for {same_rv}, our fields changed on {len(changed)}"
    )
    print(FIGURES["second_apply"])
    assert not changed_gen, f"a second apply bumped the generation: {changed_gen}"
    assert not changed, f"a second apply changed our fields: {changed}"


def test_what_the_controllers_write_back_is_the_composed_spelling(cp):
    """The premise of item 4, against the real controllers: an ExternalSecret with ``1h`` and an
    OCIRepository with ``5m``, as a policy might spell them. Whatever each controller writes back
    is Go's spelling (function.compose.durations), and a re-apply of that spelling changes no
    generation; what each did is recorded."""
    r = cp.renders["kustomize-source"]
    es = copy.deepcopy(
        next(
            o
            for o in r.objects
            if o["kind"] == "ExternalSecret"
            and "data" in o["spec"]
            and not o["spec"]["target"]["template"].get("type")
        )
    )
    src = copy.deepcopy(next(o for o in r.objects if o["kind"] == "OCIRepository"))
    probes = []
    for obj, path, sent in ((es, "refreshInterval", "1h"), (src, "interval", "5m")):
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-spelling-probe"
        obj["metadata"].pop("annotations", None)
        if obj["kind"] == "ExternalSecret":
            obj["spec"]["target"]["name"] = obj["metadata"]["name"]
        obj["spec"][path] = sent
        first = cp.xp.apply(owned(obj, r.owner))["metadata"]["generation"]
        probes.append((obj, path, sent, first))
    with timed("controllers' write-back probes"):
        _wait_ready(cp, [p[0] for p in probes], "spelling probes", 60, until_true=True)
        time.sleep(1)  # let a write-back after Ready land
    out = {}
    for obj, path, sent, first in probes:
        got = cp.admin.get(obj)
        kept = got["spec"][path]
        canonical = durations.canonical(sent, path)
        assert kept in (sent, canonical), f"{obj['kind']} wrote back {kept!r} for {sent!r}"
        again = cp.xp.apply(owned({**obj, "spec": {**obj["spec"], path: canonical}}, r.owner))
        regen = again["metadata"]["generation"]
        settle = cp.admin.get(obj)
        out[obj["kind"]] = (
            f"sent {sent!r}, the controller wrote back {kept!r} (generation {first} -> "
            f"{got['metadata']['generation']}); re-applying {canonical!r}: generation {regen}"
        )
        assert settle["spec"][path] == canonical
        if kept == canonical:  # the controller owns Go's spelling: our re-apply must not move it
            assert regen == got["metadata"]["generation"], out[obj["kind"]]
        if kept != sent:  # the fight the canonical spelling avoids: apply the old spelling again
            fought = cp.xp.apply(owned(obj, r.owner))["metadata"]["generation"]
            time.sleep(2)
            back = cp.admin.get(obj)
            out[obj["kind"]] += (
                f"; re-applying {sent!r} again: generation {fought}, and the controller "
                f"rewrote it to {back['spec'][path]!r} (generation {back['metadata']['generation']})"
            )
        cp.admin.delete(obj)
    FIGURES["write_back"] = out
    for kind, line in out.items():
        print(f"  {kind}: {line}")


def _request_reconcile(
    cp: ControlPlane, objs: list[dict], timeout: float = 60
) -> dict[tuple, dict]:
    """Annotate reconcile.fluxcd.io/requestedAt (what `flux reconcile` does), wait until handled."""
    token = f"e2e-{time.time()}"
    for o in objs:
        cp.admin.request(
            "PATCH",
            cp.admin.ref_path(o),
            params={"fieldManager": "e2e-admin"},
            content=json.dumps(
                {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}}
            ),
            headers={"Content-Type": "application/merge-patch+json"},
        )
    state: dict[tuple, dict] = {}

    def probe():
        for o in objs:
            state[key(o)] = cp.admin.get(o)
        return all(
            (s.get("status") or {}).get("lastHandledReconcileAt") == token and settled(s)
            for s in state.values()
        )

    wait_until("Flux to handle the reconcile requests", probe, timeout, 0.5)
    return state


def test_second_flux_reconcile_keeps_everything_ready(cp):
    """Reconcile every Kustomization again (drift detection and the dry-run diff run as the deploy
    ServiceAccount too): still Ready."""
    ks = _of_kind(cp, {"Kustomization"}, [c.name for c in CASES if not c.long_names])
    with timed("second Flux reconcile (requested)"):
        state = _request_reconcile(cp, ks)
    bad = {
        f"{k[2]}/{k[3]}": condition(v) for k, v in state.items() if condition(v)["status"] != "True"
    }
    assert not bad, bad


def test_composed_namespaces_enforce_pod_security(cp):
    """The composed Namespaces carry the policy's Pod Security labels. A Pod from each deployed
    workload's template is dry-run created there (as admin, as the ReplicaSet controller would; the
    namespace's `default` ServiceAccount is created first, as kube-controller-manager's
    serviceaccount controller would, which does not run here): the outcome is recorded."""
    outcomes = {}
    for c in CASES:
        if c.flavour != "kustomize" or c.long_names:
            continue
        r = cp.renders[c.name]
        ks = next(o for o in r.objects if o["kind"] == "Kustomization")
        target = ks["spec"]["targetNamespace"]
        ns = cp.admin.get("v1", "Namespace", target)
        (policy,) = load_all(c.policy.read_text())
        level = policy["namespaces"]["podSecurity"]["enforce"]
        assert ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == level
        for dep in cp.admin.list("apps/v1", "Deployment", target):
            cp.admin.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": target},
                },
                "e2e-admin",
            )
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{dep['metadata']['name']}-dry-run",
                    "namespace": target,
                    "labels": dep["spec"]["template"]["metadata"].get("labels") or {},
                },
                "spec": dep["spec"]["template"]["spec"],
            }
            try:
                cp.admin.request(
                    "POST", f"/api/v1/namespaces/{target}/pods", params={"dryRun": "All"}, json=pod
                )
                got = "admitted"
            except ApiError as e:
                got = f"{e.status}: {e.message}"
            outcomes[f"{target}/{dep['metadata']['name']}"] = got
            if level == "restricted":  # the fixture templates have no securityContext at all
                assert 'violates PodSecurity "restricted:latest"' in got, got
            else:
                assert got == "admitted", got
    FIGURES["pod_security"] = outcomes
    assert outcomes, "no Deployments found"


def _assert_only_composed_bindings(cp: ControlPlane, r: Render, sa: str, ns: str) -> None:
    composed = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in r.objects
        if o["kind"] == "RoleBinding"
    }
    found = set()
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for b in cp.admin.list("rbac.authorization.k8s.io/v1", kind):
            for s in b.get("subjects") or []:
                if (
                    s.get("kind") == "ServiceAccount"
                    and s.get("name") == sa
                    and s.get("namespace") == ns
                ):
                    assert kind == "RoleBinding", (
                        f"{sa} is bound cluster-wide by {b['metadata']['name']}"
                    )
                    assert b["roleRef"]["kind"] == "Role", f"{b['metadata']} binds a ClusterRole"
                    found.add((b["metadata"]["namespace"], b["metadata"]["name"]))
    assert found == composed, f"{ns}/{sa} bindings {found} != composed {composed}"


def _values_of(r: Render) -> tuple[int, str]:
    """replicas and message the XR asks for (inline, or the claim's values ConfigMap)."""
    values = r.xr["spec"]["values"]
    if "inline" in values:
        v = values["inline"]
    else:
        (cm,) = load_all((r.case.required / "values-configmap.yaml").read_text())
        v = _yaml().load(cm["data"]["values.yaml"])
    return int(v["replicas"]), str(v["message"])


def _assert_kustomize_result(cp: ControlPlane, r: Render, ks: dict, target: str) -> None:
    dep = cp.admin.get("apps/v1", "Deployment", "podinfo", target)
    cm = cp.admin.get("v1", "ConfigMap", "podinfo-config", target)
    assert dep and cm, f"{r.case.name}: Deployment/ConfigMap not applied in {target}"
    replicas, message = _values_of(r)
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{IMAGE_REPO[r.case.mode]}@{IMAGE_DIGEST}", image  # localized, pinned
    assert dep["spec"]["replicas"] == replicas
    assert cm["data"]["PODINFO_UI_MESSAGE"] == message
    pulls = [s["name"] for s in dep["spec"]["template"]["spec"].get("imagePullSecrets") or []]
    if (r.xr["spec"].get("credentials") or {}).get("pull"):
        assert pulls, "credentials.pull set but no imagePullSecrets"
    labels = dep["metadata"]["labels"]
    assert labels.get("kustomize.toolkit.fluxcd.io/name") == ks["metadata"]["name"], labels
    FIGURES.setdefault("deployments", {})[r.case.name] = (
        f"{target}/podinfo image={image} replicas={replicas}"
    )


def test_missing_permission_fails_with_an_actionable_message(cp, tmp_path):
    """A component shipping a Role (not in the default deployer Role), written at test time with
    gardener-ocm: Flux names the permission, and status.blockedBy of a re-render with the observed
    Kustomization shows it."""
    with timed("extra-role: write the component (gardener-ocm)"):
        d = DATA / "extra-role"
        push(
            REGISTRY,
            "e2e-extra",
            "acme.org/sack8s/podinfo-extra",
            "6.2.0",
            [
                Blob(
                    "manifests-gz",
                    "kustomize.ocm.fluxcd.io",
                    "application/x-tar+gzip",
                    tgz(d / "kustomize"),
                ),
                Blob(
                    "config",
                    "configdata.ocm.software",
                    "application/yaml",
                    (d / "config" / "config.yaml").read_bytes(),
                ),
            ],
            {"image": f"{REGISTRY}/upstream/podinfo:6.2.0@{IMAGE_DIGEST}"},
        )
    r = render(EXTRA_ROLE, EXTRA_ROLE.example)
    cp.renders[EXTRA_ROLE.name] = r
    rejected: list = []
    apply_render(cp, r, rejected)
    r = converge(cp, r, rejected)
    assert not rejected, rejected
    FIGURES["applied"] += len(r.objects)
    FIGURES["per_case"][EXTRA_ROLE.name] = len(r.objects)
    ks = next(o for o in r.objects if o["kind"] == "Kustomization")
    sa, ns, target = (
        ks["spec"]["serviceAccountName"],
        ks["metadata"]["namespace"],
        ks["spec"]["targetNamespace"],
    )
    with timed("extra-role: Flux reconcile"):
        state = _wait_ready(
            cp, [o for o in r.objects if o["kind"] in FLUX_KINDS], "extra-role", 120
        )
    cond = condition(state[key(ks)])
    for k, v in state.items():
        FIGURES["reconciled"][f"{k[1]} {k[2]}/{k[3]}"] = (
            f"{condition(v)['reason']}: {condition(v)['message'][:300]}"
        )
        if k[1] == "OCIRepository":
            assert condition(v)["status"] == "True", condition(v)
    assert cond["status"] == "False", cond
    msg = cond["message"]
    FIGURES["missing_permission"] = msg
    assert f"system:serviceaccount:{ns}:{sa}" in msg, msg
    assert 'resource "roles" in API group "rbac.authorization.k8s.io"' in msg, msg
    assert (
        cp.admin.get("apps/v1", "Deployment", "podinfo", target) is None
    )  # dry-run failed: nothing applied

    observed = dump_all(read_back(cp, r.objects), tmp_path / "observed.yaml")
    again = render(EXTRA_ROLE, EXTRA_ROLE.example, observed=observed)
    blocked = again.status.get("blockedBy") or {}
    assert blocked.get("kind") == "Kustomization", again.status
    assert blocked.get("name") == ks["metadata"]["name"]
    assert 'resource "roles"' in blocked.get("message", ""), blocked
    cond = next(c for c in again.status["conditions"] if c["type"] == "DeploymentReady")
    assert cond["status"] == "False"


SIGNED = Case("signed", "kustomize", "e2e-signed", DATA / "xr-signed.yaml")


def _controller_reports(cp: ControlPlane, comp: dict, digest: dict) -> None:
    """What the OCM controller writes once it has resolved, verified and digested the version
    (open-component-model kubernetes/controller component_controller.go): Ready for this
    generation, the version, and the descriptor digest it computed. There is no OCM controller
    here, so the test writes it."""
    live = cp.admin.get(comp)
    gen = live["metadata"]["generation"]
    repo = next(o for o in cp.renders[SIGNED.name].objects if o["kind"] == "Repository")
    cp.admin.apply_status(
        live,
        {
            "observedGeneration": gen,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": f"Applied version {live['spec']['semver']}",
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "observedGeneration": gen,
                }
            ],
            "component": {
                "component": live["spec"]["component"],
                "version": live["spec"]["semver"],
                "repositorySpec": repo["spec"]["repositorySpec"],
                "digest": digest,
            },
        },
        manager="ocm-controller",
    )


def test_a_signed_component_deploys_with_the_gate_bound_to_its_digest(cp, tmp_path):
    """Issue 32: a component signed at test time (RSASSA-PSS over jsonNormalisation/v3, as the
    OCM CLI signs) and a policy naming its key, with the gate on. The function verifies the
    signature before composing anything; Flux objects wait for the OCM Component; a Component
    reporting another descriptor digest (a tag moved between the controller's read and the
    function's) keeps them out, naming both digests; the digest of the very descriptor the
    function read opens the gate, and Flux deploys it."""
    from support.signing import PSS, public_pem, sign

    from function.ocm import normalisation

    inputs = EXAMPLES / "component" / "inputs"
    with timed("signed: write and sign the component (gardener-ocm + cryptography)"):
        stored = push(
            REGISTRY,
            "e2e-signed",
            "acme.org/sack8s/podinfo-signed",
            "6.2.0",
            [
                Blob(
                    "manifests-gz",
                    "kustomize.ocm.fluxcd.io",
                    "application/x-tar+gzip",
                    tgz(inputs / "kustomize"),
                ),
                Blob(
                    "config",
                    "configdata.ocm.software",
                    "application/yaml",
                    (inputs / "config" / "config.yaml").read_bytes(),
                ),
            ],
            {"image": f"{REGISTRY}/upstream/podinfo:6.2.0@{IMAGE_DIGEST}"},
            sign=lambda d: sign(d, "acme", algorithm=PSS),
        )
    (policy,) = load_all((DATA / "policy.yaml").read_text())
    policy["ocm"] = {
        "enabled": True,
        "gate": True,
        "verify": [{"signature": "acme", "publicKey": public_pem()}],
    }
    case = Case(
        SIGNED.name,
        SIGNED.flavour,
        SIGNED.mode,
        SIGNED.example,
        policy=dump_all([policy], tmp_path / "policy-signed.yaml"),
    )
    r = render(case, case.example)
    cp.renders[case.name] = r
    rejected: list = []
    apply_render(cp, r, rejected)
    r = converge(cp, r, rejected)
    assert not rejected, rejected
    kinds = {o["kind"] for o in r.objects}
    assert "Component" in kinds and not kinds & FLUX_KINDS, kinds  # no controller has vouched
    mine = r.status["component"]["normalisedDigest"]
    assert mine == normalisation.digest(stored, normalisation.V4ALPHA1).to_status()
    comp = next(o for o in r.objects if o["kind"] == "Component")

    moved = copy.deepcopy(stored)  # another descriptor under the same tag
    moved["component"]["resources"][0]["digest"]["value"] = "0" * 64
    theirs = normalisation.digest(moved, normalisation.V4ALPHA1).to_status()
    _controller_reports(cp, comp, theirs)
    held = render(case, case.example, observed=read_back(cp, r.objects))
    assert not {o["kind"] for o in held.objects} & FLUX_KINDS
    # blockedBy names the first object not Ready in deployment order: here (no Crossplane) a
    # ClusterUsage that never reports Ready, so the gate's reason is read from status.warnings,
    # where it is a Warning (and blockedBy names it once everything before Flux is Ready:
    # tests/test_integrity_signatures.py).
    (why,) = [
        w["message"]
        for w in held.status.get("warnings") or []
        if w["reason"] == "DescriptorDigestMismatch"
    ]
    assert mine["value"] in why and theirs["value"] in why, why
    FIGURES["signed_mismatch"] = why

    _controller_reports(cp, comp, mine)
    r = converge(cp, r, rejected)
    assert not rejected, rejected
    cp.renders[case.name] = r
    FIGURES["applied"] += len(r.objects)
    FIGURES.setdefault("per_case", {})[case.name] = len(r.objects)
    flux = [o for o in r.objects if o["kind"] in FLUX_KINDS]
    assert {o["kind"] for o in flux} == {"OCIRepository", "Kustomization"}
    assert not [w for w in r.status.get("warnings") or [] if "Digest" in w["reason"]]
    with timed("signed: Flux reconcile"):
        _wait_ready(cp, flux, "signed component's Flux objects", 120, until_true=True)
    ks = next(o for o in flux if o["kind"] == "Kustomization")
    _assert_kustomize_result(cp, r, ks, ks["spec"]["targetNamespace"])


def test_second_render_with_observed_state_is_the_same(cp):
    names = list(cp.renders)

    def again(n: str) -> tuple[str, Render, Render]:
        r = cp.renders[n]
        return n, r, render(r.case, r.xr_file, observed=read_back(cp, r.objects))

    with timed("render (second, with observed, in-process)"):
        results = [again(n) for n in names]
    diffs, blocked_by = [], {}
    for n, first, second in results:
        a = {key(o): strip(o) for o in first.objects}
        b = {key(o): strip(o) for o in second.objects}
        if a != b:
            diffs.append((n, sorted(set(a) ^ set(b)), [k for k in a if k in b and a[k] != b[k]]))
        blocked = second.status.get("blockedBy")
        blocked_by[n] = blocked and f"{blocked['kind']} {blocked['reason']}"
    FIGURES["blocked_by_after"] = blocked_by
    assert not diffs, f"second render differs: {diffs}"


# ---------------------------------------------------------------------------------------------
# Deletion through the garbage collector.

WATCHED = [  # (apiVersion, kind) listed cluster-wide while the XRs are deleted
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("external-secrets.io/v1", "ExternalSecret"),
    ("v1", "Secret"),
    ("delivery.ocm.software/v1alpha1", "Repository"),
    ("delivery.ocm.software/v1alpha1", "Component"),
    ("delivery.ocm.software/v1alpha1", "Resource"),
    ("source.toolkit.fluxcd.io/v1", "OCIRepository"),
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
    ("protection.crossplane.io/v1beta1", "Usage"),
    ("protection.crossplane.io/v1beta1", "ClusterUsage"),
    ("apps/v1", "Deployment"),
    ("v1", "ConfigMap"),
    (XR_API, "SACK8sComponentVersion"),
    (XR_API, "XSACK8sComponentVersion"),
]


class DeletionWatch:
    """Lists every watched kind over and over and records, per tracked object, the time (seconds
    since ``start``) of the last list that still held it (``present``), of the first list that
    did not (``gone``), and of the first list that showed it terminating. One round of lists
    takes a while, so order is judged from these intervals only: A went before B for certain
    when A was first missing before B was last seen."""

    def __init__(self, kube: Kube, tracked: set[tuple], interval: float = 0.2):
        self.kube, self.tracked, self.interval = kube, tracked, interval
        self.present: dict[tuple, float] = {}
        self.gone: dict[tuple, float] = {}
        self.terminating: dict[tuple, float] = {}
        self.rounds = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> DeletionWatch:
        self.t0 = time.monotonic()
        self.thread.start()
        return self

    def before(self, a: tuple, b: tuple) -> bool:
        """``a`` was certainly gone while ``b`` still existed."""
        return self.gone[a] < self.present.get(b, -1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            for api, kind in WATCHED:
                at = time.monotonic() - self.t0
                here = {}
                try:
                    items = self.kube.list(api, kind)
                except (ApiError, httpx.HTTPError) as e:  # one failed list: the next round counts
                    self.errors.append(f"{kind}: {e}")
                    continue
                for o in items:
                    m = o["metadata"]
                    here[(api, kind, m.get("namespace"), m["name"])] = m
                for k in self.tracked:
                    if k[0] != api or k[1] != kind or k in self.gone:
                        continue
                    if k in here:
                        self.present[k] = at
                        if here[k].get("deletionTimestamp"):
                            self.terminating.setdefault(k, at)
                    else:
                        self.gone[k] = at
            self.rounds += 1
            if len(self.gone) == len(self.tracked):
                return
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)


def _applied_by_flux(r: Render) -> list[tuple]:
    """What kustomize-controller applied for a Kustomize case (its inventory lists the same)."""
    if r.case.flavour != "kustomize" or r.case.name == EXTRA_ROLE.name:
        return []
    ks = next(o for o in r.objects if o["kind"] == "Kustomization")
    t = ks["spec"]["targetNamespace"]
    return [("apps/v1", "Deployment", t, "podinfo"), ("v1", "ConfigMap", t, "podinfo-config")]


def _eso_secrets(r: Render) -> list[tuple]:
    return [
        ("v1", "Secret", o["metadata"]["namespace"], o["spec"]["target"]["name"])
        for o in r.objects
        if o["kind"] == "ExternalSecret"
    ]


def _prune_outcomes(cp: ControlPlane) -> dict[str, str]:
    """What kustomize-controller's finalizer did per Kustomization, from its log (debug level
    logs its events): pruned as the deployer, or skipped because the ServiceAccount was gone."""
    log = (cp.work / "logs" / "kustomize-controller.log").read_text(errors="replace")
    out = {}
    for r in cp.renders.values():
        for ks in (o for o in r.objects if o["kind"] == "Kustomization"):
            name, ns = ks["metadata"]["name"], ks["metadata"]["namespace"]
            lines = [
                ln
                for ln in log.splitlines()
                if f'"name":"{name}"' in ln and f'"namespace":"{ns}"' in ln
            ]
            skipped = any("unable to prune objects" in ln for ln in lines)
            failed = sum(
                "pruning for deleted resource failed" in ln and '"events"' in ln for ln in lines
            )
            pruned = any(re.search(r"Deployment/\S+/podinfo deleted", ln) for ln in lines)
            if skipped:
                out[f"{ns}/{name}"] = (
                    "prune skipped: the deploy ServiceAccount was already gone (what Flux applied "
                    "went with its Namespace)"
                    + (f", after {failed} failed attempt(s)" if failed else "")
                )
            elif pruned:
                out[f"{ns}/{name}"] = "pruned with the deployer's rights" + (
                    f" after {failed} failed attempt(s)" if failed else ""
                )
            else:
                out[f"{ns}/{name}"] = "nothing to prune (nothing was applied)"
    return out


def test_deleting_each_xr_removes_everything_through_the_garbage_collector(cp):
    """Every composed object carries a controller ownerReference to its XR (as Crossplane sets it);
    deleting the XRs (Foreground for the examples, Background for the rest, see Case.propagation)
    leaves the rest to kube-controller-manager's garbage collector and namespace controller, and
    to Flux's and ESO's own finalizers and ownerReferences. Asserted: everything composed, every
    Secret ESO made and everything Flux applied is gone, and every created Namespace finalized
    (gone from the API); a Namespace went only after everything in it; a Foreground XR only after
    everything it owns. The order the Usages promise beyond that (Flux before the deployer's
    rights) needs Crossplane's Usage webhook, which does not run here: the observed order is
    recorded, not asserted (docs/e2e.md)."""
    renders = list(cp.renders.values())
    tracked: set[tuple] = set()
    per_case: dict[str, set[tuple]] = {}
    for r in renders:
        keys = {key(o) for o in r.objects} | set(_eso_secrets(r)) | set(_applied_by_flux(r))
        keys.add(key(r.owner))
        per_case[r.case.name] = keys
        tracked |= keys
    watcher = DeletionWatch(cp.admin.clone(), tracked)
    # the first poll, before anything is deleted, must see every tracked object
    present = {
        key(o)
        for o in read_back(
            cp,
            [
                {"apiVersion": k[0], "kind": k[1], "metadata": {"namespace": k[2], "name": k[3]}}
                for k in tracked
            ],
        )
    }
    assert present == tracked, f"not there before deletion: {sorted(tracked - present)[:10]}"
    with timed("deletion: XRs deleted -> everything gone, Namespaces finalized"):
        watcher.start()
        for r in renders:
            cp.admin.delete(r.owner, propagation=r.case.propagation)
        try:
            wait_until(
                "everything owned by the XRs to be gone",
                lambda: len(watcher.gone) == len(tracked),
                240,
                0.5,
            )
        finally:
            watcher.stop()
    gone, term = watcher.gone, watcher.terminating
    left = sorted(tracked - set(gone))
    assert not left, f"still there: {left}"

    violations = []
    for r in renders:
        keys = per_case[r.case.name]
        for ns in (k for k in keys if k[1] == "Namespace"):
            inside = [k for k in keys if k[2] == ns[3]]
            late = [k for k in inside if watcher.before(ns, k)]
            if late:
                violations.append(f"Namespace {ns[3]} gone before {late}")
        if r.case.propagation == "Foreground":
            owner = key(r.owner)
            late = [k for k in keys if k != owner and watcher.before(owner, k)]
            if late:
                violations.append(f"Foreground XR {owner[3]} gone before {late}")
            if owner not in term:
                violations.append(f"Foreground XR {owner[3]} was never seen terminating")
    assert not violations, "\n".join(violations)

    # Figures: per kind, when it was gone (seconds after the deletes were sent), and per case the
    # order in which the groups the Usages name disappeared.
    by_kind: dict[str, list[float]] = {}
    for k, t in gone.items():
        by_kind.setdefault(
            k[1] if k[1] not in ("SACK8sComponentVersion", "XSACK8sComponentVersion") else "XR", []
        ).append(t)
    FIGURES["deletion_by_kind"] = {
        kind: f"{min(ts):.1f}-{max(ts):.1f} s ({len(ts)})"
        for kind, ts in sorted(by_kind.items(), key=lambda kv: max(kv[1]))
    }
    groups = {
        "Flux": {"HelmRelease", "Kustomization", "OCIRepository"},
        "RBAC+secrets": {"ServiceAccount", "Role", "RoleBinding", "ExternalSecret", "Secret"},
        "Namespaces": {"Namespace"},
    }
    order, promised = {}, 0
    for r in renders:
        keys = per_case[r.case.name]
        last = {
            g: max((gone[k] for k in keys if k[1] in kinds), default=0.0)
            for g, kinds in groups.items()
        }
        seq = sorted(groups, key=lambda g: last[g])
        # What the composed Usages protect ("of") while the Flux release ("by") exists; that
        # each Namespace outlives what is in it is asserted above.
        used = [
            k for k in keys if k[1] in ("ServiceAccount", "Role", "RoleBinding", "ExternalSecret")
        ]
        users = [k for k in keys if k[1] in ("HelmRelease", "Kustomization")]
        broken = [(a, b) for a in used for b in users if watcher.before(a, b)]
        held = not broken
        promised += held
        order[r.case.name] = (
            f"{r.case.propagation}: "
            + " < ".join(f"{g} (last {last[g]:.1f} s)" for g in seq)
            + f"; XR gone {gone[key(r.owner)]:.1f} s"
            + (
                "; no Usage-protected object seen gone before its Flux release"
                if held
                else f"; Usage order broken ({len(broken)}x), e.g. {broken[0][0][1]} "
                f"{broken[0][0][3]} was gone while {broken[0][1][1]} {broken[0][1][3]} existed"
            )
        )
    FIGURES["deletion_order"] = order
    FIGURES["deletion_usage_order_held"] = f"{len(renders) - promised} of {len(renders)} XRs"
    FIGURES["deletion_total"] = (
        f"{max(gone.values()):.1f} s for {len(tracked)} objects ({watcher.rounds} rounds of lists)"
    )
    FIGURES["prune"] = _prune_outcomes(cp)
    for line in order.values():
        print("  " + line)


def test_zz_report(cp, capsys):
    """Print the figures and timings (also without -s)."""
    lines = ["", "=== e2e control plane: figures ==="]
    lines.append(
        f"objects applied: {FIGURES['applied']} (dry-run first: {FIGURES['dry_run']}); "
        f"kinds: {', '.join(FIGURES.get('kinds', []))}"
    )
    lines += [f"  {k}: {v}" for k, v in (FIGURES.get("per_case") or {}).items()]
    lines.append(f"rejected: {len(FIGURES['rejected'])}")
    lines.append("broken copies refused:")
    lines += [f"  {k}: {v}" for k, v in (FIGURES.get("broken") or {}).items()]
    lines.append(f"ExternalSecrets: {FIGURES.get('external_secrets')}")
    lines.append(f"Flux objects reconciled: {len(FIGURES['reconciled'])}")
    lines += [f"  {k}: {v}" for k, v in FIGURES["reconciled"].items()]
    lines += [f"  Deployment {k}: {v}" for k, v in (FIGURES.get("deployments") or {}).items()]
    lines.append(f"second apply: {FIGURES.get('second_apply')}")
    lines.append("controllers' write-back:")
    lines += [f"  {k}: {v}" for k, v in (FIGURES.get("write_back") or {}).items()]
    lines.append(f"missing permission: {FIGURES.get('missing_permission')}")
    lines.append("blockedBy after the second render:")
    lines += [f"  {k}: {v}" for k, v in (FIGURES.get("blocked_by_after") or {}).items()]
    lines.append(f"API server warnings on Crossplane's requests: {len(cp.xp.warnings)}")
    lines += [f"  {w}" for w in sorted(set(cp.xp.warnings))[:20]]
    lines.append("Pod Security (dry-run Pod from each deployed template):")
    lines += [f"  {k}: {v[:200]}" for k, v in (FIGURES.get("pod_security") or {}).items()]
    lines.append(
        f"deletion: {FIGURES.get('deletion_total')}; the Usage order seen broken for "
        f"{FIGURES.get('deletion_usage_order_held')}"
    )
    lines += [f"  {k}: gone at {v}" for k, v in (FIGURES.get("deletion_by_kind") or {}).items()]
    lines += [f"  {k}: {v}" for k, v in (FIGURES.get("deletion_order") or {}).items()]
    lines.append("Flux prune on deletion:")
    lines += [f"  {k}: {v}" for k, v in (FIGURES.get("prune") or {}).items()]
    lines.append("timings (s):")
    lines += [f"  {k}: {v:.1f}" for k, v in TIMINGS.items()]
    report = "\n".join(lines)
    out = os.environ.get("SACK8S_E2E_REPORT")
    if out:
        Path(out).write_text(report + "\n")
    with capsys.disabled():
        print(report)
