"""A cluster that does what it is told: follow a claim's reconciles on a laptop.

The function composes in stages (Namespaces first, what goes into them once they exist, the
Flux objects once the OCM Component vouches for the version, the Usages with them), so one
render shows only the first stage. ``sack8s render --settle`` (and the tests, and
``examples/observed/make-observed.py``) stand in for Crossplane applying each render and
the controllers settling it: every composed object is fed back as observed, as its
controller would report it once done, until a reconcile composes nothing new.

What each controller reports (the fields the function reads, nothing more):

* Namespaces ``status.phase: Active``; ServiceAccounts, Roles, RoleBindings just exist (no
  Ready condition, as in a cluster).
* Everything else (ExternalSecrets, the OCM objects, the Flux objects, Usages) a ``Ready``
  condition True; the OCM and Flux objects also ``observedGeneration`` = ``metadata.generation``
  = 1.
* The OCM Component its ``status.component``: the component, the version it resolved
  (``spec.semver``, the version the function pinned), the repository spec of the Repository
  it references and, when the XR status carries the function's normalised descriptor
  digest (``status.component.normalisedDigest``), that digest as ``status.component.digest``
  (the OCM controller computes the same digest from the same descriptor).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from function.compose.readiness import NO_READY_CONDITION, OCM_AND_FLUX
from function.edge.render import ANNOTATION_RESOURCE_NAME, Rendered, render

if TYPE_CHECKING:
    from function.edge.fn import FunctionRunner

READY_AT = "2026-12-01T00:00:00Z"  # fixed: the settled state is deterministic
MAX_ROUNDS = 8  # a claim settles in 4 (Namespaces, contents, Component, Flux and Usages)


def _ready(o: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "Ready",
                "lastTransitionTime": READY_AT,
            }
        ],
    }
    # the OCM and Flux controllers report observedGeneration; ESO and Usages report none, and
    # an API server would prune it from them
    if o["kind"] in OCM_AND_FLUX:
        status["observedGeneration"] = o["metadata"]["generation"]
    return status


def _repository_spec(
    component: Mapping[str, Any], objects: Iterable[Mapping[str, Any]]
) -> dict[str, Any] | None:
    ref = ((component.get("spec") or {}).get("repositoryRef") or {}).get("name")
    ns = (component.get("metadata") or {}).get("namespace")
    for o in objects:
        meta = o.get("metadata") or {}
        same = meta.get("name") == ref and meta.get("namespace") == ns
        if o.get("kind") == "Repository" and same:
            spec = (o.get("spec") or {}).get("repositorySpec")
            return copy.deepcopy(dict(spec)) if isinstance(spec, Mapping) else None
    return None


def settle(
    resources: Iterable[Mapping[str, Any]], xr_status: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The objects as the API server and their controllers report them once settled."""
    resources = [copy.deepcopy(dict(r)) for r in resources]
    digest = ((xr_status or {}).get("component") or {}).get("normalisedDigest")
    out = []
    for o in resources:
        o.setdefault("metadata", {})["generation"] = 1
        if o["kind"] == "Namespace":
            o["status"] = {"phase": "Active"}
        elif o["kind"] not in NO_READY_CONDITION:
            o["status"] = _ready(o)
            if o["kind"] == "Component":
                reported: dict[str, Any] = {
                    "component": o["spec"]["component"],
                    "version": o["spec"]["semver"],
                }
                repo = _repository_spec(o, resources)
                if repo is not None:
                    reported["repositorySpec"] = repo
                if isinstance(digest, Mapping) and digest.get("value"):
                    reported["digest"] = copy.deepcopy(dict(digest))
                o["status"]["component"] = reported
        out.append(o)
    return out


def keys(rendered: Rendered) -> list[str]:
    return [r["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME] for r in rendered.resources]


def with_status(xr: Mapping[str, Any], rendered: Rendered) -> dict[str, Any]:
    """The XR as the next request observes it: the status the last reconcile wrote."""
    out = copy.deepcopy(dict(xr))
    out["status"] = copy.deepcopy(
        {k: v for k, v in (rendered.xr.get("status") or {}).items() if k != "conditions"}
    )
    return out


@dataclass(frozen=True)
class Stage:
    """One reconcile: what it composed that the previous one did not, and what still waits."""

    round: int
    added: list[tuple[str, str, str]]  # (kind, namespace/name, composition-resource name)
    waiting: list[str]  # "<reason>: <message>" of the Waiting… results
    blocked_by: str  # the DeploymentReady condition when False, else ""

    def lines(self) -> list[str]:
        if not self.added:
            head = f"reconcile {self.round}: nothing new composed"
        else:
            counts: dict[str, int] = {}
            for kind, _, _ in self.added:
                counts[kind] = counts.get(kind, 0) + 1
            kinds = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.items())
            head = f"reconcile {self.round}: composes {len(self.added)} new objects: {kinds}"
        out = [head]
        out += [f"  waits: {w}" for w in self.waiting]
        if self.blocked_by and not self.waiting:
            out.append(f"  not ready yet: {self.blocked_by}")
        return out


def _stage(number: int, before: list[str], rendered: Rendered) -> Stage:
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    seen = set(before)
    added = []
    for r in rendered.resources:
        meta = r["metadata"]
        key = meta["annotations"][ANNOTATION_RESOURCE_NAME]
        if key not in seen:
            where = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
            added.append((r["kind"], where, key))
    waiting = [
        f"{r.reason}: {r.message}"
        for r in rendered.results
        if r.severity == fnv1.SEVERITY_NORMAL and r.reason.startswith("Waiting")
    ]
    blocked = ""
    for c in (rendered.xr.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DeploymentReady" and c.get("status") != "True":
            blocked = f"{c.get('reason')}: {c.get('message')}"
    return Stage(number, added, waiting, blocked)


@dataclass
class Settled:
    renders: list[Rendered]  # every reconcile in order; the last is the settled one
    xr: dict[str, Any]  # the XR with the status the last reconcile observed
    stages: list[Stage] = field(default_factory=list)
    settled: bool = False  # a reconcile composed nothing new (False: a Fatal, or rounds ran out)

    @property
    def last(self) -> Rendered:
        return self.renders[-1]


async def converge(
    xr: Mapping[str, Any],
    policy: Mapping[str, Any] | None,
    *,
    rounds: int | None = None,
    observed: Iterable[Mapping[str, Any]] = (),
    runner: FunctionRunner | None = None,
    **kw: Any,
) -> Settled:
    """Reconcile until nothing new is composed (at most ``rounds`` reconciles after the first,
    ``MAX_ROUNDS`` by default).

    Stops at a Fatal (``settled`` False, the Fatal in the last render). ``observed`` is where
    the first reconcile starts (what already exists); every later one observes the previous
    reconcile's desired objects, settled.
    """
    from function.edge.fn import FunctionRunner

    runner = runner or FunctionRunner()
    rounds = MAX_ROUNDS if rounds is None else rounds
    xr = copy.deepcopy(dict(xr))
    out = await render(xr, policy, observed=list(observed), runner=runner, **kw)
    start = [
        ((o.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESOURCE_NAME, "")
        for o in observed
    ]
    result = Settled([out], xr, [_stage(1, start, out)])
    for n in range(2, rounds + 2):
        if out.fatal is not None:
            return result
        xr = with_status(xr, out)
        result.xr = xr
        again = await render(
            xr, policy, observed=settle(out.resources, xr.get("status")), runner=runner, **kw
        )
        result.renders.append(again)
        result.stages.append(_stage(n, keys(out), again))
        if again.fatal is None and keys(again) == keys(out):
            result.settled = True
            return result
        out = again
    return result
