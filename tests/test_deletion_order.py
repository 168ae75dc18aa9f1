"""Deleting a claim: the composed Usages form an order Crossplane v2.2.4 enforces.

Two checks on converged renders of several claims (Helm, Kustomize, a claim with required
resources, several namespaces, only ``existing`` ones, a shared deploy namespace, adoption):

* the Usage graph: every object that must outlive the Flux release is ``of`` a Usage ``by``
  it, each Usage sits in its ``by``'s namespace, no namespaced Usage names a cluster-scoped
  ``of`` (crossplane/crossplane#7249: it protects nothing), ClusterUsages relate only
  cluster-scoped objects, and the deploy Namespace waits for every target Namespace;
* a model of what deletion does with them, built from the rules v2.2.4 and Kubernetes
  follow (the garbage collector deletes everything at once; Crossplane's webhook refuses
  to delete what a Usage protects, indexed as in ``internal/protection/usage/finder.go``;
  a composed Usage goes only once its ``by`` is gone; a Namespace finishes terminating
  only when it is empty; a Flux release's finalizer uninstalls with the deployer's rights).
  The model shows the order holds, and, fed the old Usages or none, that it does not.

Crossplane and its webhook cannot run here; the e2e suite runs the garbage collector and
real Flux through the same order (docs/e2e.md).
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.settle import converge

from function.edge.render import claim_to_xr, input_from_composition, load_docs

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCOPED = {"Namespace", "ClusterUsage"}
PROTECTED = {"ServiceAccount", "Role", "RoleBinding", "ExternalSecret"}
RELEASES = {"HelmRelease", "Kustomization"}
USAGES = {"Usage", "ClusterUsage"}


def _load(xr_file: str = "examples/xr.yaml", composition: str = "examples/composition.yaml"):
    xr = claim_to_xr(load_docs([REPO / xr_file])[0])
    policy = input_from_composition(load_docs([REPO / composition])[0], composition)
    return xr, policy


def _ns(name: str, tenant: str = "podinfo") -> dict[str, Any]:
    """A live namespace of the example XR's tenant (an XR without a claim is its own tenant)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"sack8s.io/tenant": tenant}},
    }


def scenario(name: str) -> tuple[list[dict[str, Any]], str]:
    """The converged render of one claim, and its flavour."""
    required: list[dict[str, Any]] = []
    flavour = "helm"
    if name == "kustomize":
        xr, policy = _load("examples/xr-kustomize.yaml")
        flavour = "kustomize"
    elif name == "claim":
        xr, policy = _load("examples/claim.yaml", "examples/composition-claim.yaml")
        required = load_docs([REPO / "examples/required"])
        flavour = "kustomize"
    else:
        xr, policy = _load()
    if name == "several-namespaces":
        xr["spec"]["namespaces"] += [
            {"name": "podinfo--extra", "mode": "create"},
            {"name": "podinfo--tools", "mode": "existing"},
        ]
        required.append(_ns("podinfo--tools"))
    if name == "only-existing":
        xr["spec"]["namespaces"] = [{"name": "podinfo", "mode": "existing"}]
        required.append(_ns("podinfo"))
    if name == "shared-deploy-namespace":
        policy["deployNamespace"] = {"shared": "sack8s-deploy"}
    if name == "adopt":
        xr["spec"]["namespaces"][0]["mode"] = "adopt"
        policy["namespaces"]["allowAdopt"] = True
        required.append(_ns("podinfo"))
    renders, _ = asyncio.run(converge(xr, policy, required=required))
    last = renders[-1]
    assert last.fatal is None, last.fatal.message
    return last.resources, flavour


SCENARIOS = [
    "helm",
    "kustomize",
    "claim",
    "several-namespaces",
    "only-existing",
    "shared-deploy-namespace",
    "adopt",
]


@pytest.fixture(scope="module")
def rendered() -> dict[str, tuple[list[dict[str, Any]], str]]:
    return {name: scenario(name) for name in SCENARIOS}


# --------------------------------------------------------------------------- the Usage graph


def ident(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    return group, obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def resolve(
    ref: dict[str, Any], namespace: str, objects: list[dict[str, Any]]
) -> dict[str, Any] | None:
    group = ref["apiVersion"].split("/")[0] if "/" in ref["apiVersion"] else ""
    ns = "" if ref["kind"] in CLUSTER_SCOPED else namespace
    want = (group, ref["kind"], ns, ref["resourceRef"]["name"])
    return next((o for o in objects if ident(o) == want), None)


def test_usage_graph_orders_everything_after_the_flux_release(rendered) -> None:
    for name, (objects, _) in rendered.items():
        release = next(o for o in objects if o["kind"] in RELEASES)
        usages = [o for o in objects if o["kind"] == "Usage"]
        cluster_usages = [o for o in objects if o["kind"] == "ClusterUsage"]
        protected_by: dict[tuple, list[dict[str, Any]]] = {}
        for u in usages:
            spec, ns = u["spec"], u["metadata"]["namespace"]
            assert spec["of"]["kind"] not in CLUSTER_SCOPED, (
                f"{name}: a namespaced Usage of a cluster-scoped object protects nothing"
            )
            by = resolve(spec["by"], ns, objects)
            assert by is not None and by["metadata"].get("namespace") == ns, (
                f"{name}: Usage {u['metadata']['name']} not in its by's namespace"
            )
            of = resolve(spec["of"], spec["of"]["resourceRef"].get("namespace", ns), objects)
            assert of is not None, (
                f"{name}: Usage {u['metadata']['name']} protects nothing composed"
            )
            assert spec["replayDeletion"] is True
            protected_by.setdefault(ident(of), []).append(by)
        for o in objects:
            if o["kind"] in PROTECTED:
                bys = protected_by.get(ident(o), [])
                assert [ident(b) for b in bys] == [ident(release)], (
                    f"{name}: {ident(o)} is not kept by the Flux release"
                )
        for cu in cluster_usages:
            spec = cu["spec"]
            assert (
                "namespace" not in cu["metadata"] and "namespace" not in spec["of"]["resourceRef"]
            )
            of, by = resolve(spec["of"], "", objects), resolve(spec["by"], "", objects)
            assert (
                of is not None and by is not None and {of["kind"], by["kind"]} <= CLUSTER_SCOPED
            ), name
        deploy_ns = release["metadata"]["namespace"]
        composed_ns = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
        targets = composed_ns - {deploy_ns}
        held_by = {
            cu["spec"]["by"]["resourceRef"]["name"]
            for cu in cluster_usages
            if cu["spec"]["of"]["resourceRef"]["name"] == deploy_ns
        }
        if deploy_ns in composed_ns:
            assert held_by == targets, (
                f"{name}: the deploy namespace must wait for every target namespace"
            )
        else:
            assert not cluster_usages, name
        for t in targets:  # each holder itself outlives the release: it holds a protected object
            assert any(
                o["metadata"].get("namespace") == t and o["kind"] in PROTECTED for o in objects
            ), (name, t)
    # The scenarios cover what the graph has to handle.
    kinds = {name: {o["kind"] for o in objs} for name, (objs, _) in rendered.items()}
    assert (
        "ClusterUsage" in kinds["helm"] and "ClusterUsage" not in kinds["shared-deploy-namespace"]
    )
    assert "ClusterUsage" not in kinds["only-existing"]


# --------------------------------------------------------------------------- a model of deletion


@dataclass
class Outcome:
    gone: dict[tuple, int] = field(default_factory=dict)  # identity -> round it vanished in
    failures: list[str] = field(default_factory=list)
    left: list[tuple] = field(default_factory=list)


def _group(api: str) -> str:
    return api.split("/", maxsplit=1)[0] if "/" in api else ""


def webhook_protects(usage: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Crossplane v2.2.4 FindUsageOf: index (group, kind, name, of.namespace or the Usage's
    namespace) for a Usage, (…, "") for a ClusterUsage; lookup (…, the object's namespace)."""
    of = usage["spec"]["of"]
    ref = of["resourceRef"]
    if (_group(of["apiVersion"]), of["kind"], ref["name"]) != (
        _group(obj["apiVersion"]),
        obj["kind"],
        obj["metadata"]["name"],
    ):
        return False
    indexed_ns = (
        ""
        if usage["kind"] == "ClusterUsage"
        else ref.get("namespace", usage["metadata"]["namespace"])
    )
    return indexed_ns == (obj["metadata"].get("namespace") or "")


def _by_exists(usage: dict[str, Any], live: dict[tuple, dict[str, Any]]) -> bool:
    by = usage["spec"]["by"]
    ns = (
        ""
        if usage["kind"] == "ClusterUsage" or by["kind"] in CLUSTER_SCOPED
        else usage["metadata"]["namespace"]
    )
    return (_group(by["apiVersion"]), by["kind"], ns, by["resourceRef"]["name"]) in live


def delete_claim(objects: list[dict[str, Any]], flavour: str) -> Outcome:
    """What happens, round by round, after the XR is deleted (background propagation)."""
    release = next(o for o in objects if o["kind"] in RELEASES)
    target = release["spec"]["targetNamespace"]
    extra = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "podinfo", "namespace": target},
        }
    ]
    if flavour == "helm":  # Helm's release storage, written by helm-controller, composed by nobody
        storage = release["spec"]["storageNamespace"]
        extra.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "sh.helm.release.v1.podinfo.v1", "namespace": storage},
            }
        )
    live = {ident(o): o for o in [*objects, *extra]}
    requested = {ident(o) for o in objects}  # the garbage collector: the owner (XR) is gone
    terminating: dict[tuple, int] = {}
    out = Outcome()
    for rnd in range(1, 200):
        for ns_id in [i for i in terminating if i[1] == "Namespace"]:
            requested |= {
                i for i in live if i[2] == ns_id[3]
            }  # the namespace controller deletes content
        for i in sorted(requested - set(terminating)):
            if i not in live:
                continue
            obj = live[i]
            if obj["kind"] in USAGES and _by_exists(obj, live):
                continue  # the garbage collector: a live owner (the by) keeps it
            if any(webhook_protects(u, obj) for u in live.values() if u["kind"] in USAGES):
                continue  # the webhook refuses the DELETE; it is retried
            terminating[i] = rnd
        for i, since in sorted(terminating.items()):
            obj = live.get(i)
            if obj is None:
                continue
            if obj["kind"] in USAGES:
                done = not _by_exists(obj, live)  # a composed Usage waits for its by
            elif obj["kind"] == "Namespace":
                done = not any(j[2] == obj["metadata"]["name"] for j in live)
            elif obj["kind"] in RELEASES:
                continue
            else:
                done = True
            if done:
                del live[i]
                out.gone[i] = rnd
        # The Flux finalizer runs a round after its deletion, once what went alongside is gone.
        for i in [
            i
            for i in terminating
            if i in live and live[i]["kind"] in RELEASES and terminating[i] < rnd
        ]:
            out.failures += _uninstall(live[i], live, flavour)
            del live[i]
            out.gone[i] = rnd
        if not live.keys() & (requested | set(terminating)):
            break
    out.left = sorted(live)
    return out


def _uninstall(
    release: dict[str, Any], live: dict[tuple, dict[str, Any]], flavour: str
) -> list[str]:
    """The Flux finalizer: uninstall or prune with the deployer's rights; removes the workload."""
    spec, ns = release["spec"], release["metadata"]["namespace"]
    sa = ("", "ServiceAccount", ns, spec["serviceAccountName"])
    target = spec["targetNamespace"]
    rbac = [i for i in live if i[1] in ("Role", "RoleBinding") and i[2] == target]
    failures = []
    if sa not in live:
        failures.append("the deployer ServiceAccount was gone: impersonation failed")
    if len(rbac) < 2:
        failures.append(f"the deployer's Role/RoleBinding in {target} were gone: forbidden")
    if flavour == "helm":
        storage = [i for i in live if i[1] == "Secret" and i[3].startswith("sh.helm.release.")]
        if not storage:
            failures.append("Helm's release storage was gone: nothing uninstalled, workloads left")
            return failures
        for i in storage:
            del live[i]
    if not failures:
        for i in [i for i in live if i[1] == "Deployment" and i[2] == target]:
            del live[i]
    return failures


GAPS = ("only-existing", "shared-deploy-namespace")  # Helm storage in a namespace going at once


@pytest.mark.parametrize("name", [s for s in SCENARIOS if s not in GAPS])
def test_deletion_runs_flux_first_and_leaves_nothing(rendered, name) -> None:
    objects, flavour = rendered[name]
    out = delete_claim(objects, flavour)
    assert out.failures == [], (name, out.failures)
    assert out.left == [], (name, out.left)
    release = ident(next(o for o in objects if o["kind"] in RELEASES))
    for o in objects:
        if o["kind"] in PROTECTED or (
            o["kind"] == "Namespace" and o["metadata"]["name"] == release[2]
        ):
            assert out.gone[ident(o)] > out.gone[release], (
                name,
                ident(o),
                out.gone[ident(o)],
                out.gone[release],
            )
    deploy = ("", "Namespace", "", release[2])
    if deploy in out.gone:  # the deploy namespace goes after every target namespace
        for o in objects:
            if o["kind"] == "Namespace" and ident(o) != deploy:
                assert out.gone[deploy] > out.gone[ident(o)], name


def test_the_model_fails_without_the_usages(rendered) -> None:
    """The same deletion with the Usages removed, or with the Namespace Usages namespaced as
    before (#7249: the webhook never finds them): the model shows what goes wrong."""
    objects, flavour = rendered["helm"]
    bare = [o for o in objects if o["kind"] not in USAGES]
    failures = delete_claim(bare, flavour).failures
    assert any("ServiceAccount" in f for f in failures) and any("storage" in f for f in failures), (
        failures
    )

    namespaced = []
    for o in objects:
        if (
            o["kind"] == "ClusterUsage"
        ):  # the old design: a Usage in the namespace, of the Namespace
            u = copy.deepcopy(o)
            u["kind"] = "Usage"
            u["metadata"]["namespace"] = o["spec"]["of"]["resourceRef"]["name"]
            u["spec"]["by"] = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "resourceRef": {"name": "podinfo-deployer"},
            }
            namespaced.append(u)
        else:
            namespaced.append(o)
    failures = delete_claim(namespaced, flavour).failures
    assert any("storage" in f for f in failures), failures


@pytest.mark.parametrize("name", GAPS)
def test_helm_storage_in_a_namespace_that_goes_at_once_is_not_ordered(rendered, name) -> None:
    """Documented gap (docs/security.md, "Deleting a claim"): nothing cluster-scoped can hold
    the namespace Helm keeps its release storage in when that namespace terminates at once -- a
    per-claim deploy namespace of a claim with only ``existing`` targets (no ClusterUsage can
    have a namespaced ``by``), or, with a shared deploy namespace, the created first target.
    The deployer's objects still outlive the release (namespace finalization waits for them);
    Helm's release storage does not. A Kustomization has no such storage and is unaffected."""
    objects, flavour = rendered[name]
    out = delete_claim(objects, flavour)
    assert out.failures == ["Helm's release storage was gone: nothing uninstalled, workloads left"]
    release = ident(next(o for o in objects if o["kind"] in RELEASES))
    for o in objects:
        if o["kind"] in PROTECTED:
            assert out.gone[ident(o)] > out.gone[release], (name, ident(o))
    assert delete_claim(copy.deepcopy(objects), "kustomize").failures == []
