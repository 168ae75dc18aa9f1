"""The gRPC edge: read the request, fetch the component, run the pure core, answer.

``RunFunction`` never raises and never answers with a partial desired state: every expected
problem is one Fatal result naming the field, rule or file at fault (Crossplane then applies
nothing, so live objects stay as they are); anything unexpected is one Fatal too, logged
with its traceback but reported without internals.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging as stdlogging
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import structlog
from crossplane.function import logging, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

from function import budgets
from function.api.parse import parse_policy, parse_spec
from function.cache import Facts, Lru, Memos, memo, recording
from function.compose import admission, core
from function.compose.identity import identity_of
from function.edge import metrics
from function.edge.reads import view
from function.edge.requirements import requirements_for
from function.edge.sources import SourceFactory, claim_repository, configdata_schema
from function.edge.structs import (
    ClaimStructs,
    Lazy,
    desired_field,
    put,
    to_dict,
)
from function.errors import SackError


def _struct(msg: Any) -> dict[str, Any]:
    return to_dict(msg)


def _observed_xr(res: Any, memos: Memos) -> Lazy:
    """The observed XR of a request view (function/edge/reads.py: identity, spec, the status it
    reads back) as a read-only mapping, each top-level field converted when first read (the
    spec and status once per distinct content).
    """
    return Lazy(res, memos)


def _digest_of(*parts: bytes) -> bytes:
    """SHA-256 of ``parts``, each length-prefixed (no two part lists give one input)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "big"))
        h.update(p)
    return h.digest()


def _admit(spec: Any, policy: Any, identity: Any) -> tuple[Any, admission.Admission]:
    repository = claim_repository(spec)
    return repository, admission.admit(spec, policy, identity, repository)


def _result(rsp: fnv1.RunFunctionResponse, severity: int, reason: str, message: str) -> None:
    rsp.results.append(
        fnv1.Result(
            severity=severity,
            message=message,
            reason=reason,
            target=fnv1.TARGET_COMPOSITE_AND_CLAIM,
        )
    )


def _warnings_condition(warnings: list[dict[str, str]]) -> fnv1.Condition:
    """``ConfigDataWarnings``: the current findings (``status.warnings``: the ConfigData
    warnings and values no rule consumes), durable where events are sent once.
    """
    found = [w for w in warnings if w.get("message")]
    return fnv1.Condition(
        type="ConfigDataWarnings",
        status=fnv1.STATUS_CONDITION_TRUE if found else fnv1.STATUS_CONDITION_FALSE,
        reason="Found" if found else "None",
        message=(f"{len(found)} warning(s); see status.warnings: " + found[0]["message"])[:1000]
        if found
        else "the ConfigData rules applied without warnings",
        target=fnv1.TARGET_COMPOSITE_AND_CLAIM,
    )


def ensure_context_logging() -> None:
    """Make structlog merge the request's context variables into every event.

    The SDK's ``logging.configure`` (used by ``sack8s serve`` and ``render -v``) has no
    ``merge_contextvars`` processor; add it in front, once per configuration.
    """
    processors = structlog.get_config()["processors"]
    if structlog.contextvars.merge_contextvars not in processors:
        structlog.configure(processors=[structlog.contextvars.merge_contextvars, *processors])


class _StdlibToStructlog(stdlogging.Handler):
    """Routes records of the ``function`` package's stdlib loggers through structlog.

    Deeper modules log with ``logging.getLogger(__name__)``; through this bridge their lines
    get the same renderer and the request context (xr, claim) as the edge's own lines.
    Records still propagate to the root logger (pytest's caplog keeps working).
    """

    def emit(self, record: stdlogging.LogRecord) -> None:
        try:
            ensure_context_logging()
            level = record.levelname.lower()
            log = structlog.get_logger().bind(logger=record.name)
            method = getattr(
                log, level if level in ("debug", "info", "warning", "error", "critical") else "info"
            )
            method(record.getMessage())
        except Exception:
            self.handleError(record)


def bridge_stdlib_logging() -> None:
    pkg = stdlogging.getLogger("function")
    if not any(isinstance(h, _StdlibToStructlog) for h in pkg.handlers):
        pkg.addHandler(_StdlibToStructlog())


def log_context(xr: Mapping[str, Any], tag: str) -> dict[str, str]:
    """What every log line of one request carries: the XR, the request tag and the claim."""
    meta = xr.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    context: dict[str, str] = {"xr": str(meta.get("name", "")), "tag": tag}
    spec = xr.get("spec")
    ref = spec.get("claimRef") if isinstance(spec, dict) else None
    # The claim as identity.py sees it: spec.claimRef only (labels never name the claim).
    if isinstance(ref, dict) and ref.get("name") and ref.get("namespace"):
        context["claim"] = f"{ref['namespace']}/{ref['name']}"
    return context


def _compose(inp: core.CoreInput, inline_ms: float | None = None) -> core.CoreOutput:
    """The core, in this thread, under the render-cpu-ms budget (and, inline on the event
    loop, an allowance past which it stops with :class:`budgets.Offload`).
    """
    with budgets.cpu_deadline(inline_ms):
        try:
            return core.compose(inp)
        except budgets.RenderBudgetExceeded as e:
            cv = inp.loaded.component
            if cv.name in str(e):
                raise
            raise budgets.RenderBudgetExceeded(
                f"component {cv.name}:{cv.version}", e.message
            ) from None


#: CPU a composition may take on the event loop's thread (ms): one whose component composed
#: within it last time runs inline, and moves to a worker thread once it takes longer.
INLINE_MS = 20.0
#: The GIL switch interval while a composition runs in a worker thread (s): the event loop
#: and short renders are not queued behind a long one for the default 5 ms.
THREADED_SWITCH_INTERVAL = 0.001
#: Claims whose last ``composed`` line is remembered (one past it is said at info again).
REPORTED_CLAIMS = 20_000


# Worker-thread compositions in flight in this process (every runner's), and the switch
# interval to restore when none is; changed on the event loop's thread only.
_WORKERS: dict[str, float] = {"running": 0, "interval": sys.getswitchinterval()}


def _threaded_started() -> None:
    if _WORKERS["running"] == 0:
        _WORKERS["interval"] = sys.getswitchinterval()
        sys.setswitchinterval(min(_WORKERS["interval"], THREADED_SWITCH_INTERVAL))
    _WORKERS["running"] += 1


def _threaded_ended() -> None:
    _WORKERS["running"] -= 1
    if _WORKERS["running"] == 0:
        sys.setswitchinterval(_WORKERS["interval"])


def _component_key(loaded: Any) -> tuple[Any, ...]:
    cv = loaded.component
    return (cv.name, cv.version, cv.descriptor_digest, cv.repository)


class Composer:
    """Runs the core where it costs least without letting one render hold the event loop.

    A worker thread (``asyncio.to_thread``) keeps the loop serving other tenants while a
    render of untrusted content runs, but the hand-off and the GIL handovers cost about as
    much as a warm composition of a medium claim. So a composition whose component composed
    within :data:`INLINE_MS` of CPU last time runs inline, under that allowance: at the first
    budget check past it (:func:`budgets.check_cpu`, in every loop over component content)
    it stops with :class:`budgets.Offload` and runs again, from the start, in a worker thread
    (the core is pure; memo entries made meanwhile stay). A component not composed before,
    or last seen slow, goes to the worker thread at once, and the GIL is handed over every
    :data:`THREADED_SWITCH_INTERVAL` while any does.
    """

    def __init__(self) -> None:
        # component -> CPU ms of its last composition in a worker thread (inf: offloaded)
        self.cost = Lru("composition-cost", max_entries=4096)
        # compositions run inline, in a worker thread, and moved there after starting inline
        self.inline = self.threaded = self.offloaded = 0

    async def __call__(self, inp: core.CoreInput) -> core.CoreOutput:
        key = _component_key(inp.loaded)
        cost = self.cost.get(key)
        if cost is not None and cost <= INLINE_MS:
            try:
                out = _compose(inp, INLINE_MS)
                self.inline += 1
                return out
            except budgets.Offload:
                self.offloaded += 1
                self.cost.put(key, math.inf, 0)
        return await self._threaded(inp, key)

    async def _threaded(self, inp: core.CoreInput, key: tuple[Any, ...]) -> core.CoreOutput:
        def run() -> core.CoreOutput:
            started = time.thread_time()
            out = _compose(inp)
            self.cost.put(key, (time.thread_time() - started) * 1000, 0)
            return out

        _threaded_started()
        self.threaded += 1
        try:
            return await asyncio.to_thread(run)
        finally:
            _threaded_ended()


@dataclass
class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """Serves RunFunction. One instance per process; it owns the caches: its sources share
    one storage cache, and it passes its memo tables to every step of a request that memoises.
    """

    sources: SourceFactory = field(default_factory=SourceFactory)
    base_dir: Path = field(default_factory=Path.cwd)
    memos: Memos = field(default_factory=Memos)
    composer: Composer = field(default_factory=Composer)

    @property
    def answer_ttl(self) -> float:
        """The longest ``meta.ttl`` of an answer: how long a tag fact may be trusted
        (``--tag-ttl``); an answer resting on a fact read earlier gets what is left of it.
        """
        return max(0.0, float(self.sources.cache.ttl))

    def __post_init__(self) -> None:
        self.log = logging.get_logger()
        # what each claim's last ``composed`` line at info said (a few hundred bytes a claim)
        self._reported = Lru("composed-reported", max_entries=REPORTED_CLAIMS)
        metrics.watch_cache(self.sources.cache)
        metrics.watch_memos(self.memos)
        if self.sources.on_registry_get is None:
            self.sources.on_registry_get = metrics.observe_registry_get
        bridge_stdlib_logging()

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        rsp, _outcome = await self.answer(req)
        return rsp

    async def answer(self, req: fnv1.RunFunctionRequest) -> tuple[fnv1.RunFunctionResponse, str]:
        """The response and how it ended: ``composed``, ``waiting`` (for required resources)
        or ``fatal`` -- the gRPC edge keeps only ``composed`` answers.
        """
        rsp, outcome, _facts = await self.compute(view(req))
        return rsp, outcome

    async def compute(
        self, req: fnv1.RunFunctionRequest
    ) -> tuple[fnv1.RunFunctionResponse, str, Facts]:
        """:meth:`answer` on a request view (function/edge/reads.py), with the registry facts the
        answer rests on. ``meta.ttl`` is chosen, not defaulted: while those facts stay fresh
        (at most ``--tag-ttl``) for a composed answer, 0 for one that waits for required
        resources, carries a Fatal or read a local mirror (Crossplane must call again).
        """
        rsp, desired, outcome, facts = await self.compute_wire(req)
        if desired:
            rsp.MergeFromString(desired)
        return rsp, outcome, facts

    async def compute_wire(
        self, req: fnv1.RunFunctionRequest
    ) -> tuple[fnv1.RunFunctionResponse, bytes, str, Facts]:
        """:meth:`compute` for the wire: the composed objects apart, already serialized.

        ``response + desired`` (bytes) is the answer: ``desired`` holds the response's
        ``desired.resources`` entries this function composed (each object's serialized Struct
        is memoised by key and content, and kept packed per claim:
        :class:`function.edge.structs.ClaimStructs`), and protobuf merges a message field that
        occurs twice, so they are never built into the message field by field only to be
        serialized again.
        """
        with recording() as facts:
            rsp, desired, outcome = await self._answer(req)
        ttl = facts.lifetime(self.answer_ttl) if outcome == "composed" else 0.0
        rsp.meta.ttl.FromTimedelta(timedelta(seconds=round(ttl)))
        return rsp, desired, outcome, facts

    async def _answer(
        self, req: fnv1.RunFunctionRequest
    ) -> tuple[fnv1.RunFunctionResponse, bytes, str]:
        rsp = response.to(req)
        desired: list[bytes] = []
        xr = _observed_xr(req.observed.composite.resource, self.memos)
        context = log_context(xr, req.meta.tag)
        ensure_context_logging()
        log = self.log.bind(**context)
        started = time.perf_counter()
        outcome = "composed"
        # Every line logged while this request runs -- here, in deeper modules through structlog
        # or the stdlib bridge -- carries the XR and claim (structlog contextvars, task-local).
        with structlog.contextvars.bound_contextvars(**context):
            try:
                if await self._run(req, rsp, xr, log, desired) is False:
                    outcome = "waiting"
            except SackError as e:
                outcome = "fatal"
                desired.clear()
                log.info("fatal", reason=e.reason, error=str(e))
                rsp.desired.CopyFrom(req.desired)
                _result(rsp, fnv1.SEVERITY_FATAL, e.reason, str(e))
            except Exception as e:
                outcome = "fatal"
                desired.clear()
                log.exception("unexpected error")
                rsp.desired.CopyFrom(req.desired)
                _result(
                    rsp,
                    fnv1.SEVERITY_FATAL,
                    "InternalError",
                    f"internal error ({type(e).__name__}); see the function's logs",
                )
            seconds = time.perf_counter() - started
            try:
                metrics.observe_request(
                    outcome, seconds, ((r.severity, r.reason) for r in rsp.results)
                )
            except Exception:
                log.warning("metrics update failed")
            log.debug("done", seconds=round(seconds, 4))
        return rsp, desired_field(desired), outcome

    async def _run(
        self,
        req: fnv1.RunFunctionRequest,
        rsp: fnv1.RunFunctionResponse,
        xr: Lazy,
        log: Any,
        desired: list[bytes],
    ) -> bool:
        has_input = req.HasField("input")
        policy_key = req.input.SerializeToString(deterministic=True) if has_input else b""
        policy = memo(
            "policies",
            policy_key,
            lambda: parse_policy(_struct(req.input) if has_input else {}),
            lambda _: 20_000,
            self.memos,
        )
        fields = req.observed.composite.resource.fields
        spec_value = fields["spec"] if "spec" in fields else None
        spec_key = (
            spec_value.SerializeToString(deterministic=True) if spec_value is not None else None
        )
        spec = memo("specs", spec_key, lambda: parse_spec(dict(xr)), lambda _: 20_000, self.memos)
        identity = identity_of(xr)
        # Admission is a pure function of the claim spec, the policy and the identity: decided
        # once per distinct triple (a claim whose status changed is admitted as before).
        # Keyed by a digest of the spec and the input (not the bytes: a fleet's entries would
        # each hold a copy of the input) and the identity, so 10,000 claims' admissions fit.
        repository, admitted = memo(
            "admissions",
            None if spec_key is None else (_digest_of(spec_key, policy_key), identity),
            lambda: _admit(spec, policy, identity),
            lambda _: 1_500,
            self.memos,
        )
        log.debug(
            "admitted",
            deploy_namespace=admitted.deploy_namespace,
            registry=repository.host,
            component=spec.component.name,
            constraint=spec.component.version,
        )

        reqs = requirements_for(spec, identity, policy)
        reqs.declare(rsp)
        got = reqs.collect(req)
        if got is None:
            log.debug("waiting for required resources", required=sorted(rsp.requirements.resources))
            return False  # Crossplane calls again with them resolved; this answer is discarded
        log.debug("required resources resolved", required=sorted(req.required_resources))

        got.check_release_name(spec, identity)
        loaded = await self.sources.load(
            spec,
            policy,
            repository,
            status=(xr.get("status") or {}),
            credentials=req.credentials,
            base_dir=self.base_dir,
            memos=self.memos,
        )
        log.debug(
            "component loaded",
            version=loaded.component.version,
            deployable=loaded.deployable.name if loaded.deployable else None,
            configdata=loaded.configdata.name if loaded.configdata else None,
        )
        values = got.values(
            spec, identity, schema=lambda: configdata_schema(loaded, self.memos), memos=self.memos
        )
        # What the view holds of each observed object (function/edge/reads.py: readiness, the gate's
        # fields, ownership marks), each top-level field converted when first read.
        observed = {k: Lazy(v.resource, self.memos) for k, v in req.observed.resources.items()}
        # The core works on tenant content (ConfigData, schema, values, manifests) within the
        # budgets of function.budgets; a render that may run long goes to a worker thread, so
        # it never holds the event loop and other tenants' requests keep being read, answered
        # from the response cache and composed beside it (Composer).
        out = await self.composer(
            core.CoreInput(
                spec=spec,
                policy=policy,
                identity=identity,
                repository=repository,
                admission=admitted,
                loaded=loaded,
                values=values,
                existing_namespaces=got.namespaces,
                observed=observed,
                xr_status=xr.get("status") or {},
                memos=self.memos,
            )
        )
        earlier = rsp.desired.resources  # what earlier steps composed: merged into, as before
        group = (*identity.parts(), identity.xr_name)  # this claim's XR, for the per-claim memos
        claim = ClaimStructs(group, self.memos, family=loaded.component.descriptor_digest)
        items = []
        for key in sorted(out.resources):
            ready = fnv1.READY_TRUE if out.ready[key] else fnv1.READY_FALSE
            if key in earlier:
                put(earlier[key].resource, out.resources[key], self.memos)
                earlier[key].ready = ready
            else:
                items.append((key, out.resources[key], ready))
        entries, status = claim.answer(items, out.status)
        desired.extend(entries)
        rsp.desired.composite.resource.MergeFromString(status)
        if not out.all_ready:
            rsp.desired.composite.ready = fnv1.READY_FALSE
        for note in out.notes:
            sev = fnv1.SEVERITY_WARNING if note.severity == "Warning" else fnv1.SEVERITY_NORMAL
            _result(rsp, sev, note.reason, note.message)
        b = out.blocked_by
        rsp.conditions.append(
            fnv1.Condition(
                type="DeploymentReady",
                status=fnv1.STATUS_CONDITION_TRUE if b is None else fnv1.STATUS_CONDITION_FALSE,
                reason="Available" if b is None else b.reason,
                message="every composed object is ready"
                if b is None
                else f"{b.kind} {(b.namespace + '/') if b.namespace else ''}{b.name}: {b.message}",
                target=fnv1.TARGET_COMPOSITE_AND_CLAIM,
            )
        )
        rsp.conditions.append(_warnings_condition(out.status.get("warnings") or []))
        for warning in admitted.warnings:  # an ambiguous namespace pattern ops accepted
            log.warning("ambiguous namespace pattern", message=warning)
        # At info when what a claim's answer says changed since this process last said it
        # (first compose, another version, resource count or readiness); a fleet's steady
        # polls -- 10,000 claims a minute -- repeat at debug.
        said = (loaded.component.version, len(out.resources), out.all_ready)
        level = log.debug if self._reported.get(group) == said else log.info
        self._reported.put(group, said, 0)
        level(
            "composed",
            resources=len(out.resources),
            version=loaded.component.version,
            ready=out.all_ready,
        )
        return True
