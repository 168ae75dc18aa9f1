"""Fleet workloads: thousands of distinct claims per replica, round-robin, as in steady state.

The single-claim benchmark sends one request again and again; a replica in a real platform
serves thousands of *different* claims, each reconciled about once a minute. Here every
claim has its own name, namespaces, secrets and values, over a few component versions. One
``sack8s serve`` gets, per claim, the first reconcile (with the required-resources round) and
then passes of steady-state requests (the observed state is what the function composed, all
Ready), sent round-robin at Crossplane-like concurrency. Requests are kept and sent as bytes
(a raw gRPC method), so the client's own cost stays out of the way; the server's CPU comes
from ``/proc/<pid>/stat``.

Per run: server CPU per steady request, latency p50/p99, RSS after every pass and at the
end, and the server's cache figures (answers reused/stored/evicted, memo hits and
evictions) read from its Prometheus endpoint.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import grpc
import workloads as wl
from crossplane.function import resource as sdkresource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import struct_pb2

SERVER_FIGURES = ("sack8s_responses", "sack8s_memo", "sack8s_cache")
METHOD = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction"
VERSIONS = ("1.0.0", "1.1.0", "1.2.0")
READY = struct_pb2.Struct()
READY.update(
    {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Available",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
)


def push_versions(host: str, size: wl.Size) -> str:
    """The component at each of VERSIONS under one base; returns the base."""
    base = wl.base_of(size) + "-fleet"
    for v in VERSIONS:
        wl.push(host, wl.build_component(size, v), base)
    return base


def push_versions_at(host: str, size: wl.Size, suffix: str) -> str:
    """Another component's VERSIONS (other content, other digests) under another base."""
    base = wl.base_of(size) + "-fleet" + suffix
    for v in VERSIONS:
        wl.push(host, wl.build_component(size, v, mark=base), base)
    return base


def claim_xr(size: wl.Size, host: str, base: str, i: int) -> dict[str, Any]:
    xr = wl.xr_for(size, host, base, name=f"c{i:05d}")
    xr["spec"]["component"]["version"] = VERSIONS[i % len(VERSIONS)]
    xr["spec"]["values"]["inline"]["replicas"] = 1 + i % 5
    if xr["spec"]["values"]["inline"].get("settings") is not None:
        xr["spec"]["values"]["inline"]["settings"] = {"s0": f"claim-{i}"}
    return xr


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))] if s else float("nan")


def scrape(metrics_port: int) -> dict[str, float]:
    """The server's sack8s_* counters and gauges (label sets folded into the name)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(sack8s_[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m and not m.group(1).endswith(("_created", "_bucket")):
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


@dataclass
class FleetResult:
    claims: int
    passes: int
    figures: dict[str, Any]


async def _first_reconcile(call: Any, xr: dict[str, Any], policy: dict[str, Any]) -> bytes:
    """The claim's first reconcile (and its required-resources round); the steady request."""
    req = fnv1.RunFunctionRequest()
    req.meta.tag = xr["metadata"]["name"]
    sdkresource.update(req.observed.composite, xr)
    req.input.update(policy)
    rsp = fnv1.RunFunctionResponse.FromString(await call(req.SerializeToString(), timeout=300))
    for k in rsp.requirements.resources:
        req.required_resources[k].CopyFrom(fnv1.Resources())
    rsp = fnv1.RunFunctionResponse.FromString(await call(req.SerializeToString(), timeout=300))
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    if fatal:
        raise SystemExit(f"fleet claim {xr['metadata']['name']}: Fatal: {fatal[0]}")
    # steady state: the XR carries its status, every composed object exists and is Ready
    status = rsp.desired.composite.resource.fields.get("status")
    if status is not None:
        req.observed.composite.resource.fields["status"].CopyFrom(status)
    for key, res in rsp.desired.resources.items():
        obs = req.observed.resources[key].resource
        obs.CopyFrom(res.resource)
        obs.fields["status"].struct_value.CopyFrom(READY)
    return req.SerializeToString()


async def run_fleet(
    port: int,
    metrics_port: int,
    pid: int,
    proc_cpu: Any,
    proc_rss_mb: Any,
    size: wl.Size,
    host: str,
    base: str,
    claims: int,
    passes: int,
    concurrency: int = 8,
) -> FleetResult:
    """First reconciles of ``claims`` distinct claims, then ``passes`` round-robin passes."""
    policy = wl.policy_for(host)
    opts = [("grpc.max_receive_message_length", 64 * 2**20)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=opts) as ch:
        call = ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        t0, c0 = time.perf_counter(), proc_cpu(pid)
        steady: list[bytes] = []
        sem = asyncio.Semaphore(concurrency)

        async def first(i: int) -> bytes:
            async with sem:
                return await _first_reconcile(call, claim_xr(size, host, base, i), policy)

        steady = list(await asyncio.gather(*(first(i) for i in range(claims))))
        figures: dict[str, Any] = {
            "first_reconcile_cpu_ms_per_claim": (proc_cpu(pid) - c0) / claims * 1000,
            "first_reconcile_wall_s": time.perf_counter() - t0,
            "request_bytes_mean": sum(map(len, steady)) / claims,
            "rss_mb_after_first": proc_rss_mb(pid),
        }
        rss, cpu, lat_all = [], [], []
        for _ in range(passes):
            todo = iter(steady)
            lat: list[float] = []

            async def worker(todo: Any = todo, lat: list[float] = lat) -> None:
                for body in todo:
                    t = time.perf_counter()
                    await call(body, timeout=300)
                    lat.append((time.perf_counter() - t) * 1000)

            c0 = proc_cpu(pid)
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            cpu.append((proc_cpu(pid) - c0) / claims * 1000)
            rss.append(proc_rss_mb(pid))
            lat_all += lat
        stats = scrape(metrics_port)
    # the first steady pass after the first reconciles fills whatever cache is on; the last
    # pass is the steady state
    figures.update(
        {
            "cpu_ms_per_request_by_pass": cpu,
            "cpu_ms_per_request": cpu[-1],
            "p50_ms": pct(lat_all, 50),
            "p99_ms": pct(lat_all, 99),
            "rss_mb_by_pass": rss,
            "rss_mb_end": rss[-1],
            "server": {
                k: v
                for k, v in stats.items()
                if k.startswith(("sack8s_responses", "sack8s_memo", "sack8s_cache"))
            },
        }
    )
    return FleetResult(claims, passes, figures)
