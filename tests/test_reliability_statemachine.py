"""Never lose what runs (issue 12, requirement 2): a state machine of reconciles with faults.

Hypothesis drives sequences of reconciles of one claim while the world changes underneath:
the component source goes down, a tag vanishes, the ConfigData blob is corrupted or gone,
a request times out, composed objects become ready or not ready, and the claim itself
changes (a namespace added or removed, the version constraint or the values changed).

Crossplane semantics are modelled exactly: a Fatal applies nothing (the desired state stays
what the last successful reconcile returned, and the XR status too); a successful reconcile
replaces the applied objects and writes the XR status the next request observes.

Invariants after every reconcile:

* a Fatal is the only result and returns the desired state it was given, unchanged;
* a successful reconcile never drops an applied object unless the claim stopped asking
  for it (only objects tied to a namespace the claim removed may go);
* under one version constraint the resolved version never moves backwards (no flip-flop),
  and a vanished tag never changes it;
* a successful reconcile after the fault clears composes again (no sticky failure).

Faults use the **real** offline source (the CTF mirror, copied to tmp and tampered:
registry down = the mirror is gone, tag gone = the tag removed from ``artifact-index.json``,
ConfigData invalid = the blob's bytes changed so its digest no longer matches, ConfigData
missing = the blob deleted). Only the timeout is injected by a thin wrapper around the real
source (in-process speed); the same fault against the real registry is
``tests/test_oci_faults.py::test_stall_past_the_client_timeout`` and
``tests/test_fn_registry.py::test_registry_fault_on_a_later_reconcile_is_one_fatal_and_keeps_desired``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from crossplane.function import logging as sdklogging
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import json_format
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_profiles import REPO, STATEFUL, example
from support import example_component

from function.cache import Cache
from function.edge.fn import FunctionRunner
from function.edge.sources import SourceFactory
from function.errors import SourceUnavailable
from function.ocm import versions

CTF = REPO / "examples/component/ctf"
CONFIG_BLOB = example_component.version().path("config").name
ANNOTATION = "crossplane.io/composition-resource-name"
# In the example XR's tenant space (podinfo--*), names that appear in no other composition-resource name.
EXTRA_NAMESPACES = ("podinfo--second", "podinfo--third")

STATS = {"runs": 0, "reconciles": 0, "fatals": 0, "faults": 0}


def _mirrors() -> dict[str, Path]:
    """Real CTF copies: intact and tampered. Built once per process."""
    global _MIRRORS
    try:
        return _MIRRORS
    except NameError:
        pass
    root = Path(tempfile.mkdtemp(prefix="sack8s-sm-"))
    out = {"ok": root / "ok", "down": root / "gone"}
    shutil.copytree(CTF, out["ok"])
    for name in ("tag-6.3.0-gone", "tag-6.2.0-gone", "configdata-invalid", "configdata-missing"):
        d = root / name
        shutil.copytree(CTF, d)
        out[name] = d
    for tag in ("6.3.0", "6.2.0"):
        index = out[f"tag-{tag}-gone"] / "artifact-index.json"
        data = json.loads(index.read_text())
        for a in data["artifacts"]:
            if a.get("tag") == tag:
                del a["tag"]
        index.write_text(json.dumps(data))
    blob = out["configdata-invalid"] / "blobs" / CONFIG_BLOB
    blob.write_bytes(blob.read_bytes().replace(b"replicas", b"replicaz"))
    (out["configdata-missing"] / "blobs" / CONFIG_BLOB).unlink()
    _MIRRORS = out
    return out


class TimingOut:
    """The real source, answering every call with the timeout error the OCI client raises."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def list_versions(self, component: str) -> list[str]:
        raise SourceUnavailable(
            f"component {component} in registry 127.0.0.1:5000", "timed out after 30s"
        )

    async def get(self, component: str, version: str) -> Any:
        raise SourceUnavailable(
            f"component {component}:{version} in registry 127.0.0.1:5000", "timed out after 30s"
        )

    async def blob(self, cv: Any, digest: str, media_type: str) -> bytes:
        raise SourceUnavailable(
            f"component {cv.name}:{cv.version} in registry 127.0.0.1:5000", "timed out after 30s"
        )


class FaultySources(SourceFactory):
    timeout = False

    def open(self, *args: Any, **kwargs: Any) -> Any:
        src = super().open(*args, **kwargs)
        return TimingOut(src) if self.timeout else src


def _key(obj: dict[str, Any]) -> str:
    return obj["metadata"]["annotations"][ANNOTATION]


class NeverLoseWhatRuns(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        sdklogging.configure(sdklogging.Level.DISABLED)
        STATS["runs"] += 1
        self.mirrors = _mirrors()
        self.xr, self.policy = example()
        self.xr["spec"]["component"]["version"] = ">=6.2.0"
        self.fault = "ok"
        self.sources = FaultySources(cache=Cache())
        self.runner = FunctionRunner(sources=self.sources)
        self.applied: dict[
            str, dict[str, Any]
        ] = {}  # what Crossplane applied, by composition-resource name
        self.ready: set[str] = set()
        self.status: dict[str, Any] = {}  # the XR status the last successful reconcile wrote
        self.removed_namespaces: set[str] = set()
        self.versions_seen: list[str] = []
        self.last_ok = False

    # -- the world changes ---------------------------------------------------------------

    @rule(
        fault=st.sampled_from(
            [
                "ok",
                "down",
                "tag-6.3.0-gone",
                "tag-6.2.0-gone",
                "configdata-invalid",
                "configdata-missing",
                "timeout",
            ]
        )
    )
    def inject(self, fault: str) -> None:
        if fault != "ok":
            STATS["faults"] += 1
        self.fault = fault
        self.sources.timeout = fault == "timeout"
        path = self.mirrors["ok" if fault == "timeout" else fault]
        self.policy["mirrors"][0]["path"] = str(path)

    @precondition(lambda self: bool(self.applied))
    @rule(data=st.data(), ready=st.booleans())
    def dependency_readiness(self, data: Any, ready: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.applied)))
        (self.ready.add if ready else self.ready.discard)(key)

    @rule(ns=st.sampled_from(EXTRA_NAMESPACES), present=st.booleans())
    def claim_namespaces(self, ns: str, present: bool) -> None:
        nss = self.xr["spec"]["namespaces"]
        names = [n["name"] for n in nss]
        if present and ns not in names:
            nss.append({"name": ns, "mode": "create"})
            self.removed_namespaces.discard(ns)
        elif not present and ns in names:
            nss[:] = [n for n in nss if n["name"] != ns]
            self.removed_namespaces.add(ns)

    @rule(constraint=st.sampled_from([">=6.2.0", ">=6.2.0 <6.3.0", "6.2.0", "6.3.0", "^6", "~6.2"]))
    def claim_constraint(self, constraint: str) -> None:
        if constraint != self.xr["spec"]["component"]["version"]:
            self.versions_seen = []  # a new constraint may legitimately resolve anything it allows
        self.xr["spec"]["component"]["version"] = constraint

    @rule(replicas=st.integers(0, 5))
    def claim_values(self, replicas: int) -> None:
        self.xr["spec"]["values"]["inline"]["replicas"] = replicas

    # -- a reconcile ----------------------------------------------------------------------

    def _observed(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        live = copy.deepcopy(obj)
        if key in self.ready:
            st_ = live.setdefault("status", {})
            st_["conditions"] = [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "Ready"}
            ]
            if live.get("kind") == "Component":
                st_["component"] = {"version": self.status.get("component", {}).get("version")}
        return live

    @rule(fresh=st.booleans())
    def reconcile(self, fresh: bool) -> None:
        STATS["reconciles"] += 1
        runner = FunctionRunner(sources=FaultySources(cache=Cache())) if fresh else self.runner
        if fresh:
            runner.sources.timeout = self.sources.timeout
        xr = copy.deepcopy(self.xr)
        if self.status:
            xr["status"] = copy.deepcopy(self.status)
        req = fnv1.RunFunctionRequest()
        resource.update(req.observed.composite, xr)
        req.input.update(copy.deepcopy(self.policy))
        for key, obj in self.applied.items():
            resource.update(req.observed.resources[key], self._observed(key, obj))
        # What an earlier pipeline step (none here) passed on: Crossplane sends the desired state so far.
        resource.update(
            req.desired.resources["from-earlier-step"],
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}},
        )
        # Required Namespaces, resolved as Crossplane does: ask, then answer with what the
        # cluster holds (the Namespaces applied so far, by name) and call again.
        live = {
            o["metadata"]["name"]: o for o in self.applied.values() if o.get("kind") == "Namespace"
        }
        for _ in range(3):
            rsp = asyncio.run(runner.RunFunction(req, None))
            wanted = {
                k: sel
                for k, sel in rsp.requirements.resources.items()
                if k not in req.required_resources
            }
            if not wanted:
                break
            for k, sel in wanted.items():
                items = []
                if sel.kind == "Namespace" and sel.match_name in live:
                    items = [fnv1.Resource()]
                    resource.update(items[0], live[sel.match_name])
                req.required_resources[k].CopyFrom(fnv1.Resources(items=items))
        fatals = [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
        assert all(r.reason != "InternalError" for r in rsp.results), [
            r.message for r in rsp.results
        ]
        if fatals:
            STATS["fatals"] += 1
            assert len(rsp.results) == 1, [r.message for r in rsp.results]
            assert rsp.desired == req.desired, "a Fatal must hand back the desired state unchanged"
            assert self.fault != "ok" or self._claim_is_unsatisfiable(), fatals[0].message
            self.last_ok = False
            return  # Crossplane applies nothing; the XR status is not written either
        assert self.fault in (
            "ok",
            "tag-6.2.0-gone",
            "tag-6.3.0-gone",
        ) or self._fault_masked_by_cache(fresh), f"fault {self.fault} composed anyway"
        desired = {
            k: json_format.MessageToDict(v.resource) for k, v in rsp.desired.resources.items()
        }
        assert "from-earlier-step" in desired, "an earlier step's object was dropped"
        desired.pop("from-earlier-step")
        for key in self.applied:
            if key not in desired:
                assert any(ns in key for ns in self.removed_namespaces), (
                    f"{key} was running and was dropped ({self.fault})"
                )
        status = json_format.MessageToDict(rsp.desired.composite.resource).get("status") or {}
        version = status["component"]["version"]
        constraint = self.xr["spec"]["component"]["version"]
        if self.versions_seen:
            prev = self.versions_seen[-1]
            assert versions.parse_semver(version) >= versions.parse_semver(prev), (
                f"resolved version went back from {prev} to {version} under {constraint!r} ({self.fault})"
            )
        self.versions_seen.append(version)
        self.applied = desired
        self.status = status
        self.ready &= set(desired)
        self.last_ok = True

    def _claim_is_unsatisfiable(self) -> bool:
        c = self.xr["spec"]["component"]["version"]
        return c == "6.3.0" and self.fault == "tag-6.3.0-gone"

    def _fault_masked_by_cache(self, fresh: bool) -> bool:
        # The shared runner caches what it loaded by descriptor digest; a corrupted or deleted
        # blob that was already read is not read again (digests are immutable) -- correct.
        return not fresh and self.fault in ("configdata-invalid", "configdata-missing")

    @invariant()
    def only_own_namespaces(self) -> None:
        for obj in self.applied.values():
            if obj.get("kind") == "Namespace":
                assert obj["metadata"]["name"] not in ("default", "kube-system", "flux-system")

    def teardown(self) -> None:
        # After every fault clears, the claim composes again.
        if self.applied or self.status:
            self.inject("ok")
            self.reconcile(True)
            assert self.last_ok or self._claim_is_unsatisfiable()


NeverLoseWhatRuns.TestCase.settings = STATEFUL
TestNeverLoseWhatRuns = NeverLoseWhatRuns.TestCase


def test_zz_report_state_machine_figures() -> None:
    """Prints what the state machine did (runs, reconciles, Fatals, faults injected)."""
    import sys

    print(f"[state machine] {STATS}", file=sys.__stderr__)
    if STATS["runs"]:
        assert STATS["reconciles"] > 0
