"""The requests Crossplane really sends: fresh Go-order bytes, ``meta.tag``, churn, fleets.

Every call is a fresh serialization by grpc-go's marshaller (benchmarks/wire.py: the Go
program in benchmarks/crossplane-wire, built at benchmark time) with ``meta.tag`` as
Crossplane sets it. Three servers run side by side -- ``sack8s serve`` (answer reuse on),
``sack8s serve --response-bytes 0`` (the compute path) and the floor (benchmarks/floor.py:
the SDK returning the same objects, precomputed) -- and get the same bytes, **rotated round
by round** (round r starts with server r mod 3), so a busy neighbour on the shared cores
loads all three alike; the figure is each server's own CPU (``/proc/<pid>/stat``) per request.

Workloads:

* **single claims** (small, medium, large): the steady-state request of one claim, unchanged,
  a fresh serialization every call;
* **fleet mix** (medium, ``claims`` distinct claims, passes as Crossplane polls them): per
  pass 1 % of the claims change their spec (``values.inline.replicas``), 10 % an observed
  status field the function does not read (``status.lastSyncTime``, a condition's
  ``lastTransitionTime``, ``resourceVersion``), the rest are unchanged; all freshly serialized;
* **many claims** (medium, 10,000 distinct claims over six component versions in two
  repositories; unchanged, freshly serialized).

For each: CPU per request and RSS of every server, and the share of reconciles Crossplane's
own response cache (``--enable-function-response-cache``) would answer with the ``meta.ttl``
sack8s returned: each claim polled every 60 s ± 10 % (Crossplane's poll interval and
jitter), a reconcile is answered by that cache while an answer under the same tag is younger
than its ttl.
"""

from __future__ import annotations

import asyncio
import copy
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fleet
import grpc
import workloads as wl
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

METHOD = fleet.METHOD
POLL_S = 60.0
JITTER = 0.10


@dataclass
class Measured:
    cpu_s: float = 0.0
    requests: int = 0
    ttls: list[float] = field(default_factory=list)

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_s / self.requests * 1000 if self.requests else float("nan")


async def _send(port: int, bodies: list[bytes], concurrency: int, keep_ttl: bool) -> list[float]:
    """Send ``bodies`` (at ``concurrency``); the answers' meta.ttl when ``keep_ttl``."""
    ttls: list[float] = [0.0] * len(bodies) if keep_ttl else []
    opts = [("grpc.max_receive_message_length", 256 * 2**20)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=opts) as ch:
        call = ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        todo = iter(range(len(bodies)))

        async def worker() -> None:
            for i in todo:
                raw = await call(bodies[i], timeout=600)
                if keep_ttl:
                    rsp = fnv1.RunFunctionResponse.FromString(raw)
                    if any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results):
                        raise SystemExit(f"Fatal answer: {rsp.results[0].message}")
                    ttls[i] = rsp.meta.ttl.seconds

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ttls


def rotate(
    servers: dict[str, Any],
    rounds: list[list[bytes]],
    proc_cpu: Callable[[int], float],
    measured: dict[str, Measured] | None,
    concurrency: int = 4,
    ttl_of: str = "sack8s",
) -> list[list[float]]:
    """Every round to every server, the order rotated per round; CPU per server summed into
    ``measured`` (None: a warm-up). Returns ``ttl_of``'s meta.ttl per round and request.
    """
    names = list(servers)
    ttls: list[list[float]] = []
    for r, bodies in enumerate(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            srv = servers[name]
            c0 = proc_cpu(srv.pid)
            got = asyncio.run(_send(srv.port, bodies, concurrency, keep_ttl=name == ttl_of))
            if measured is not None:
                m = measured.setdefault(name, Measured())
                m.cpu_s += proc_cpu(srv.pid) - c0
                m.requests += len(bodies)
            if name == ttl_of:
                ttls.append(got)
    return ttls


def crossplane_cache_share(tags: list[list[str]], ttls: list[list[float]], seed: int = 1) -> float:
    """Share of reconciles Crossplane's response cache answers: ``tags[p][i]``/``ttls[p][i]``
    are claim i's tag and the ttl sack8s gave in pass p; claim i is polled every 60 s ± 10 %.
    """
    rng = random.Random(seed)  # noqa: S311 - a simulation, not a secret
    polls = max(10, len(tags))  # after the last pass measured, nothing changes
    tags = tags + [tags[-1]] * (polls - len(tags))
    ttls = ttls + [ttls[-1]] * (polls - len(ttls))
    claims = len(tags[0])
    hits = total = 0
    for i in range(claims):
        now, cached = rng.uniform(0, POLL_S), {}
        for p in range(len(tags)):
            tag = tags[p][i]
            entry = cached.get(tag)
            total += 1
            if entry is not None and now < entry:
                hits += 1
            else:
                cached = {tag: now + ttls[p][i]} if ttls[p][i] > 0 else {}
            now += POLL_S * rng.uniform(1 - JITTER, 1 + JITTER)
    return hits / total if total else float("nan")


def tag_of(body: bytes) -> str:
    return fnv1.RunFunctionRequest.FromString(body).meta.tag


# --------------------------------------------------------------------------- request variants


def churned(req: fnv1.RunFunctionRequest, n: int) -> fnv1.RunFunctionRequest:
    """``req`` with churn the function does not read: resourceVersions bumped, an observed
    status field and each condition's lastTransitionTime rewritten (round ``n``).
    """
    out = copy.deepcopy(req)
    out.observed.composite.resource["metadata"]["resourceVersion"] = str(1000 + n)
    for r in out.observed.resources.values():
        r.resource["metadata"]["resourceVersion"] = str(2000 + n)
        status = r.resource["status"]
        status["lastSyncTime"] = f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z"
        for c in status["conditions"]:
            c["lastTransitionTime"] = f"2026-01-01T01:{n // 60 % 60:02d}:{n % 60:02d}Z"
    return out


def with_spec_change(req: fnv1.RunFunctionRequest, n: int) -> fnv1.RunFunctionRequest:
    out = copy.deepcopy(req)
    out.observed.composite.resource["spec"]["values"]["inline"]["replicas"] = 10 + n
    return out


def mix_pass(steady: list[fnv1.RunFunctionRequest], p: int) -> tuple[list[bytes], dict[str, int]]:
    """Pass ``p`` of the fleet mix: 1 % spec changes, 10 % unread status churn, the rest as is.
    A change stays (the next passes send it), as a live object keeps its new status.
    """
    counts = {"unchanged": 0, "unread_status": 0, "spec": 0}
    out = []
    for i, req in enumerate(steady):
        if (i + 37 * p) % 100 == 0:
            steady[i] = with_spec_change(req, p)
            counts["spec"] += 1
        elif (i + 3 * p) % 10 == 0:
            steady[i] = churned(req, p)
            counts["unread_status"] += 1
        else:
            counts["unchanged"] += 1
        plain = fnv1.RunFunctionRequest()
        plain.CopyFrom(steady[i])
        plain.ClearField("meta")
        out.append(plain.SerializeToString())
    return out, counts


def same_pass(steady: list[fnv1.RunFunctionRequest]) -> tuple[list[bytes], dict[str, int]]:
    """A pass where nothing changed (every claim's request freshly serialized all the same)."""
    out = []
    for req in steady:
        plain = fnv1.RunFunctionRequest()
        plain.CopyFrom(req)
        plain.ClearField("meta")
        out.append(plain.SerializeToString())
    return out, {"unchanged": len(out), "unread_status": 0, "spec": 0}


async def first_reconciles(
    port: int, size: wl.Size, host: str, bases: list[str], claims: int, concurrency: int = 4
) -> list[fnv1.RunFunctionRequest]:
    """Each claim's first reconcile (and its required-resources round), then its steady
    request: what it composed observed, Ready, with a resourceVersion.
    """
    policy = wl.policy_for(host)
    opts = [("grpc.max_receive_message_length", 256 * 2**20)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=opts) as ch:
        call = ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> fnv1.RunFunctionRequest:
            async with sem:
                xr = fleet.claim_xr(size, host, bases[i % len(bases)], i)
                body = await fleet._first_reconcile(call, xr, policy)
            req = fnv1.RunFunctionRequest.FromString(body)
            req.ClearField("meta")
            req.observed.composite.resource["metadata"]["resourceVersion"] = "1"
            for r in req.observed.resources.values():
                r.resource["metadata"]["resourceVersion"] = "1"
            return req

        return list(await asyncio.gather(*(one(i) for i in range(claims))))


def slices(xs: list[bytes], n: int) -> list[list[bytes]]:
    return [xs[i : i + n] for i in range(0, len(xs), n)] or [[]]


def summary(measured: dict[str, Measured], rss: dict[str, float], share: float) -> dict[str, Any]:
    floor = measured.get("floor")
    out: dict[str, Any] = {"crossplane_cache_share": share}
    for name, m in measured.items():
        out[name] = {
            "cpu_ms_per_request": m.cpu_ms_per_request,
            "requests": m.requests,
            "x_floor": m.cpu_ms_per_request / floor.cpu_ms_per_request if floor else None,
            "rss_mb": rss.get(name),
        }
    return out


def line(label: str, s: dict[str, Any]) -> str:
    parts = []
    for name in ("sack8s", "sack8s-compute", "floor"):
        if name in s:
            r = s[name]
            x = f" ({r['x_floor']:.2f}x)" if r.get("x_floor") else ""
            parts.append(f"{name} {r['cpu_ms_per_request']:.2f} ms{x} RSS {r['rss_mb']:.0f} MB")
    return (
        f"  {label:22} "
        + "; ".join(parts)
        + f"; Crossplane's cache would answer {100 * s['crossplane_cache_share']:.0f} %"
    )


def now() -> float:
    return time.perf_counter()
