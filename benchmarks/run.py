#!/usr/bin/env python3
"""function-sack8s benchmark suite: CPU per RunFunction against a floor and two peers.

    python benchmarks/run.py [--quick] [--json PATH] [--plot PATH] [--details PATH]

(run it with any Python that has the project installed, e.g. ``.venv/bin/python``; a Python
without it re-executes itself with ``./.venv/bin/python`` when that exists). See
docs/benchmarks.md for the method. In one run it

1. starts Debian's ``docker-registry`` on loopback and writes a component version per
   workload into it (benchmarks/workloads.py: descriptor, Kustomize tar+gzip, ConfigData,
   with the OCM CLI's index layout);
2. measures, in process, the first (cold: registry reads) and a later (warm: cache) reconcile;
3. starts four gRPC servers on loopback, one at a time: ``sack8s serve``, the floor
   (benchmarks/floor.py: the SDK returning the same objects, precomputed), the Python peer
   ``function-pythonic`` (its own Python ≥ 3.12 virtualenv) and, opt-in, the Go peer
   ``function-go-templating`` (only when ``SACK8S_GO_TEMPLATING`` names its binary); each
   gets the same XR and observed state and must return the same composition-resource names
   as sack8s, or the run fails;
4. per server: server CPU time per request (``/proc/<pid>/stat`` utime+stime, sequential
   requests), latency p50/p99 and requests per second at concurrency 1, 8 and 32, peak RSS;
5. scaling (every dimension ×1, ×2, ×5, ×10; fitted exponent) and RSS after 1k vs 20k requests;
6. prints the table, writes ``--json`` and a PNG plot (default docs/benchmarks.png).

``--quick``: a few iterations (a smoke test; figures are noisy). A peer whose prerequisite
is missing is skipped loudly; under ``SACK8S_STRICT=1`` the run then fails, except for the
opt-in Go peer, which these machines cannot have.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_PY = REPO / ".venv" / "bin" / "python"

try:
    import grpc

    import function  # noqa: F401
except ImportError:  # not the project's virtualenv: re-run there
    if VENV_PY.exists() and Path(sys.executable).resolve() != VENV_PY.resolve():
        os.execv(str(VENV_PY), [str(VENV_PY), *sys.argv])
    raise

sys.path.insert(0, str(HERE))

import fleet  # noqa: E402
import grpc  # noqa: E402
import peers  # noqa: E402
import workloads as wl  # noqa: E402
from crossplane.function import logging as sdklogging  # noqa: E402
from crossplane.function import resource as sdkresource  # noqa: E402
from crossplane.function.proto.v1 import run_function_pb2 as fnv1  # noqa: E402
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1  # noqa: E402
from floor import Floor  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from registry import Registry, find_binary  # noqa: E402

from function.cache import Cache  # noqa: E402
from function.edge.fn import FunctionRunner  # noqa: E402
from function.edge.sources import SourceFactory  # noqa: E402

SERVERS = ("sack8s", "sack8s-compute", "floor", "pythonic", "go-templating")
#: sack8s with answer reuse off (--response-bytes 0): what a changed request costs.
COMPUTE = "sack8s-compute"
PROPOSED = "sack8s+fn-diff"  # a past variant's label, kept so older results files still plot
PYTHONIC_VERSION = "0.6.3"
STRICT = os.environ.get("SACK8S_STRICT") == "1"
TICK = os.sysconf("SC_CLK_TCK")


def loud(msg: str) -> None:
    bar = "!" * 78
    print(f"\n{bar}\n!! {msg}\n{bar}\n", file=sys.stderr, flush=True)


# -- process accounting ---------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """Utime + stime of the whole process (all threads, live and exited), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_mem(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * 1024
    return out


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    linux, python = platform.release(), platform.python_version()
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores, Linux {linux}, Python {python}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the servers --------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    port: int = 0

    def start(self, cwd: Path) -> Server:
        self.port = free_port()
        argv = [a.replace("{port}", str(self.port)) for a in self.argv]
        self.log = open(Path(tempfile.gettempdir()) / f"sack8s-bench-{self.name}.log", "wb")
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {Path(self.log.name).read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not listen on {self.port}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def pythonic_bin(quick: bool) -> str | None:  # noqa: ARG001 - callers pass their --quick
    """function-pythonic in its own virtualenv (Python >= 3.12), made on first use."""
    venv = HERE / ".peers" / "pythonic"
    exe = venv / "bin" / "function-pythonic"
    if exe.exists():
        return str(exe)
    cands = [os.environ.get("SACK8S_PY312")]
    cands += sorted(
        (str(p) for p in Path("/root/.pyenv/versions").glob("3.12*/bin/python3")), reverse=True
    )
    cands += [shutil.which("python3.12"), shutil.which("python3")]
    cands += sorted(str(p) for p in Path("/root/.pyenv/versions").glob("3.1[3-9]*/bin/python3"))
    cands += [shutil.which("python3.13")]
    py = next((c for c in cands if c and _is_py312(c)), None)
    if py is None:
        return None
    print(f"creating the pythonic peer's virtualenv with {py} ...", flush=True)
    if subprocess.run([py, "-m", "venv", "--clear", str(venv)], check=False).returncode != 0:
        return None
    r = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            f"crossplane-function-pythonic=={PYTHONIC_VERSION}",
        ],
        check=False,
    )
    return str(exe) if r.returncode == 0 and exe.exists() else None


def _is_py312(exe: str) -> bool:
    """A Python that really runs (pyenv shims may not) and is >= 3.12."""
    try:
        r = subprocess.run(
            [exe, "-c", "import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)"],
            check=False,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


# Peers these machines cannot have: measured only when their variable names a binary; their
# absence is reported, never a strict-mode failure.
OPT_IN_PEERS = {"go-templating"}


def go_templating_bin() -> str | None:
    """function-go-templating, opt-in: only where ``SACK8S_GO_TEMPLATING`` names the binary."""
    env = os.environ.get("SACK8S_GO_TEMPLATING")
    if env and not (Path(env).exists() and os.access(env, os.X_OK)):
        raise SystemExit(f"SACK8S_GO_TEMPLATING={env}: not an executable file")
    return env or None


def sack8s_bin() -> str:
    """`sack8s` of the interpreter running this script (any virtualenv with the project)."""
    here = Path(sys.executable).with_name("sack8s")
    found = str(here) if here.exists() else shutil.which("sack8s")
    if not found:
        raise SystemExit(
            "the sack8s command is not installed next to this interpreter (pip install -e .)"
        )
    return found


# -- requests -----------------------------------------------------------------------------


def struct(msg: Any) -> dict[str, Any]:
    return json_format.MessageToDict(msg)


@dataclass
class Prepared:
    name: str
    size: wl.Size
    requests: dict[str, fnv1.RunFunctionRequest]
    keys: list[str]
    answer: dict[str, Any]
    cold: dict[str, Any]
    objects: int


async def prepare(name: str, size: wl.Size, host: str, ttl_probe: bool) -> Prepared:
    """Steady-state requests (observed = what sack8s composed, all Ready) and cold/warm figures."""
    base = wl.base_of(size)
    xr = wl.xr_for(size, host, base)
    policy = wl.policy_for(host)
    cache = Cache()
    runner = FunctionRunner(sources=SourceFactory(cache=cache))
    req = fnv1.RunFunctionRequest()
    req.meta.tag = "bench"
    sdkresource.update(req.observed.composite, xr)
    req.input.update(policy)
    # cold: the first reconcile (Crossplane's first call asks for required resources first)
    cold: dict[str, Any] = {}
    c0, w0, r0 = time.process_time(), time.perf_counter(), cache.stats.registry_requests
    rsp = await runner.RunFunction(req, None)
    for k in rsp.requirements.resources:
        req.required_resources[k].CopyFrom(fnv1.Resources())
    rsp = await runner.RunFunction(req, None)
    cold["cpu_ms"] = (time.process_time() - c0) * 1000
    cold["wall_ms"] = (time.perf_counter() - w0) * 1000
    cold["registry_requests"] = cache.stats.registry_requests - r0
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    if fatal:
        raise SystemExit(f"workload {name}: sack8s answered Fatal: {fatal[0]}")
    # steady state: the XR carries the status it got, every composed object exists and is Ready
    # (reconciled until nothing new is composed: Namespaces first, then the rest, then Flux)
    requirements = list(rsp.requirements.resources)
    ready = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Available",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    for _ in range(8):
        before = sorted(rsp.desired.resources)
        xr_obs = dict(xr)
        xr_obs["status"] = struct(rsp.desired.composite.resource).get("status", {})
        req = fnv1.RunFunctionRequest()
        req.meta.tag = "bench"
        sdkresource.update(req.observed.composite, xr_obs)
        for k in requirements:
            req.required_resources[k].CopyFrom(fnv1.Resources())
        for key in rsp.desired.resources:
            obj = struct(rsp.desired.resources[key].resource)
            obj["status"] = ready
            sdkresource.update(req.observed.resources[key], obj)
        settling = fnv1.RunFunctionRequest()
        settling.CopyFrom(req)
        settling.input.update(policy)
        rsp = await runner.RunFunction(settling, None)
        if sorted(rsp.desired.resources) == before:
            break
    sack = fnv1.RunFunctionRequest()
    sack.CopyFrom(req)
    sack.input.update(policy)
    r1 = cache.stats.registry_requests
    c0, w0 = time.process_time(), time.perf_counter()
    rsp = await runner.RunFunction(sack, None)
    cold["warm_cpu_ms"] = (time.process_time() - c0) * 1000
    cold["warm_wall_ms"] = (time.perf_counter() - w0) * 1000
    cold["warm_registry_requests"] = cache.stats.registry_requests - r1
    # a new claim of an already-warm component (its values are new: the Flux mutation is not
    # memoised yet, the parsed ConfigData and files are): what a replica pays once per claim
    rounds = 5
    c0 = time.process_time()
    for _ in range(rounds):
        runner.memos.mutations.clear()
        runner.memos.tables["packed_mutations"].clear()
        await runner.RunFunction(sack, None)
    cold["new_claim_cpu_ms"] = (time.process_time() - c0) / rounds * 1000
    if ttl_probe:  # after the tag TTL: only the tag list and the tag -> digest resolution
        probe = Cache(ttl=0.05)
        prunner = FunctionRunner(sources=SourceFactory(cache=probe))
        await prunner.RunFunction(sack, None)
        await asyncio.sleep(0.1)
        p0 = probe.stats.registry_requests
        await prunner.RunFunction(sack, None)
        cold["after_ttl_registry_requests"] = probe.stats.registry_requests - p0
    keys = sorted(rsp.desired.resources)
    answer = {
        "resources": {k: struct(rsp.desired.resources[k].resource) for k in keys},
        "ready": {k: rsp.desired.resources[k].ready == fnv1.READY_TRUE for k in keys},
        "status": struct(rsp.desired.composite.resource).get("status", {}),
        "composite_ready": rsp.desired.composite.ready != fnv1.READY_FALSE,
        "results": [
            {"severity": r.severity, "reason": r.reason, "message": r.message} for r in rsp.results
        ],
        "conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
            for c in rsp.conditions
        ],
    }
    requests = {"sack8s": sack, COMPUTE: sack, "floor": sack, PROPOSED: sack}
    for server, inp in (("pythonic", peers.pythonic_input()), ("go-templating", peers.go_input())):
        r = fnv1.RunFunctionRequest()
        r.CopyFrom(req)
        r.input.update(inp)
        requests[server] = r
    return Prepared(name, size, requests, keys, answer, cold, len(keys))


# -- measuring ------------------------------------------------------------------------------


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


async def run_load(
    stub: Any, req: fnv1.RunFunctionRequest, n: int, conc: int
) -> tuple[list[float], float]:
    lat: list[float] = []
    todo = iter(range(n))

    async def worker() -> None:
        for _ in todo:
            t = time.perf_counter()
            await stub.RunFunction(req, timeout=120)
            lat.append((time.perf_counter() - t) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    return lat, time.perf_counter() - t0


@dataclass
class Budget:
    cpu_target_s: float  # keep sending sequential requests until the server used this much CPU
    min_n: int
    max_n: int
    conc_n: dict[int, int]
    inproc_n: int


FULL = Budget(
    cpu_target_s=3.0, min_n=50, max_n=2000, conc_n={1: 200, 8: 400, 32: 640}, inproc_n=200
)
QUICK = Budget(cpu_target_s=0.3, min_n=8, max_n=200, conc_n={1: 16, 8: 32, 32: 64}, inproc_n=10)


async def measure_server(srv: Server, p: Prepared, budget: Budget) -> dict[str, Any]:
    req = p.requests[srv.name]
    opts = [
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}", options=opts) as ch:
        stub = grpcv1.FunctionRunnerServiceStub(ch)
        t = time.perf_counter()
        first = await stub.RunFunction(req, timeout=300)
        first_ms = (time.perf_counter() - t) * 1000
        fatal = [r.message for r in first.results if r.severity == fnv1.SEVERITY_FATAL]
        got = sorted(first.desired.resources)
        if fatal or got != p.keys:
            missing, extra = sorted(set(p.keys) - set(got)), sorted(set(got) - set(p.keys))
            raise SystemExit(
                f"{srv.name} on workload {p.name} does not return the expected objects "
                f"({len(got)} instead of {len(p.keys)}; missing {missing[:5]}, extra "
                f"{extra[:5]}; fatal {fatal[:1]}): "
                "no peer is measured doing less work"
            )
        await run_load(stub, req, max(3, budget.min_n // 4), 1)  # warm-up
        # primary figure: server CPU per request, sequential requests
        n, lat_seq = 0, []
        c0, w0 = proc_cpu(srv.pid), time.perf_counter()
        while n < budget.max_n:
            lat, _ = await run_load(stub, req, 10, 1)
            lat_seq += lat
            n += 10
            if n >= budget.min_n and proc_cpu(srv.pid) - c0 >= budget.cpu_target_s:
                break
        cpu = proc_cpu(srv.pid) - c0
        wall = time.perf_counter() - w0
        out: dict[str, Any] = {
            "objects": len(got),
            "first_ms": first_ms,
            "cpu_ms_per_request": cpu / n * 1000,
            "cpu_requests": n,
            "p50_ms": pct(lat_seq, 50),
            "p99_ms": pct(lat_seq, 99),
            "server_cpu_share_c1": cpu / wall,
        }
        per = max(out["cpu_ms_per_request"], 0.1) / 1000
        for conc, cmax in budget.conc_n.items():
            cn = max(conc * 4, min(cmax, int(2 * budget.cpu_target_s / per)))
            c0 = proc_cpu(srv.pid)
            lat, secs = await run_load(stub, req, cn, conc)
            out[f"rps_c{conc}"] = cn / secs
            out[f"p50_ms_c{conc}"] = pct(lat, 50)
            out[f"p99_ms_c{conc}"] = pct(lat, 99)
            out[f"cpu_ms_per_request_c{conc}"] = (proc_cpu(srv.pid) - c0) / cn * 1000
        mem = proc_mem(srv.pid)
        out["peak_rss_mb"] = mem["VmHWM"] / 2**20
        out["rss_mb"] = mem["VmRSS"] / 2**20
    return out


async def rss_growth(
    srv: Server, req: fnv1.RunFunctionRequest, first: int, total: int
) -> dict[str, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        stub = grpcv1.FunctionRunnerServiceStub(ch)
        await run_load(stub, req, first, 8)
        a = proc_mem(srv.pid)["VmRSS"] / 2**20
        await run_load(stub, req, total - first, 8)
        b = proc_mem(srv.pid)["VmRSS"] / 2**20
    return {
        "requests_a": first,
        "rss_mb_a": a,
        "requests_b": total,
        "rss_mb_b": b,
        "growth_mb": b - a,
    }


def inprocess_latency(p: Prepared, n: int) -> dict[str, dict[str, float]]:
    """Warm RunFunction called directly (no gRPC): sack8s and the floor, wall and CPU per call."""

    async def go() -> dict[str, dict[str, float]]:
        out = {}
        runner = FunctionRunner(sources=SourceFactory(cache=Cache()))
        floor = Floor(p.answer)
        for name, fn, req in (
            ("sack8s", runner, p.requests["sack8s"]),
            ("floor", floor, p.requests["floor"]),
        ):
            await fn.RunFunction(req, None)
            lat = []
            c0 = time.process_time()
            for _ in range(n):
                t = time.perf_counter()
                await fn.RunFunction(req, None)
                lat.append((time.perf_counter() - t) * 1000)
            out[name] = {
                "p50_ms": pct(lat, 50),
                "p99_ms": pct(lat, 99),
                "cpu_ms": (time.process_time() - c0) / n * 1000,
            }
        return out

    return asyncio.run(go())


def fit_exponent(xs: list[float], ys: list[float]) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=False)) / sum(
        (a - mx) ** 2 for a in lx
    )


# -- output ---------------------------------------------------------------------------------


def table(results: dict[str, dict[str, dict[str, Any]]], inproc: dict[str, Any]) -> str:
    lines = []
    hdr = f"{'workload':8} {'server':14} {'objs':>5} {'cpu ms/req':>10} " + " ".join(
        f"{h:>8}"
        for h in (
            "x floor",
            "p50 ms",
            "p99 ms",
            "rps c1",
            "rps c8",
            "rps c32",
            "p99 c32",
            "peak MB",
        )
    )
    lines += [hdr, "-" * len(hdr)]
    for w, by in results.items():
        fl = by.get("floor", {}).get("cpu_ms_per_request")
        for s, r in by.items():
            ratio = r["cpu_ms_per_request"] / fl if fl else float("nan")
            lines.append(
                f"{w:8} {s:14} {r['objects']:>5} {r['cpu_ms_per_request']:>10.2f} {ratio:>8.2f} "
                f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                f"{r['rps_c1']:>8.0f} {r['rps_c8']:>8.0f} {r['rps_c32']:>8.0f} "
                f"{r['p99_ms_c32']:>8.1f} {r['peak_rss_mb']:>8.0f}"
            )
        if w in inproc:
            ip = inproc[w]
            lines.append(
                f"{w:8} {'in-process':14} {'':>5} sack8s p50 {ip['sack8s']['p50_ms']:.2f} / p99 "
                f"{ip['sack8s']['p99_ms']:.2f} ms "
                f"(cpu {ip['sack8s']['cpu_ms']:.2f}); floor p50 {ip['floor']['p50_ms']:.2f} / "
                f"p99 {ip['floor']['p99_ms']:.2f} ms (cpu {ip['floor']['cpu_ms']:.2f})"
            )
    return "\n".join(lines)


def plot(path: Path, results: dict[str, Any], scaling: dict[str, Any], caption: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    order = list(wl.SIZES)
    ws = sorted(results, key=lambda w: order.index(w) if w in order else len(order))
    servers = [
        s for s in (*SERVERS[:1], PROPOSED, *SERVERS[1:]) if any(s in results[w] for w in ws)
    ]
    width = 0.8 / max(1, len(servers))
    colors = {
        "sack8s": "#1f77b4",
        PROPOSED: "#9ecae1",
        "floor": "#7f7f7f",
        "pythonic": "#2ca02c",
        "go-templating": "#d62728",
    }
    for i, s in enumerate(servers):
        xs = [j + (i - (len(servers) - 1) / 2) * width for j in range(len(ws))]
        ys = [results[w].get(s, {}).get("cpu_ms_per_request", 0) for w in ws]
        bars = a.bar(xs, ys, width, label=s, color=colors.get(s))
        for x, y, w in zip(xs, ys, ws, strict=False):
            fl = results[w].get("floor", {}).get("cpu_ms_per_request")
            if y and fl:
                a.text(x, y, f"{y / fl:.1f}×", ha="center", va="bottom", fontsize=7)
        del bars
    a.set_xticks(range(len(ws)), [f"{w}\n({results[w]['sack8s']['objects']} objects)" for w in ws])
    a.set_yscale("log")
    a.set_ylabel("server CPU ms per RunFunction (log)")
    a.set_title("CPU per request over gRPC (label: × floor, same run)")
    a.legend(fontsize=8)
    if scaling:
        for s, pts in sorted(
            scaling["series"].items(),
            key=lambda kv: (*SERVERS[:1], PROPOSED, *SERVERS[1:]).index(kv[0]),
        ):
            b.loglog(
                pts["factor"],
                pts["cpu_ms"],
                "o-",
                label=f"{s} (exponent {pts['exponent']:.2f})",
                color=colors.get(s),
            )
        b.set_xlabel("size factor (namespaces, secrets, images, rules each ×f)")
        b.set_ylabel("server CPU ms per request")
        b.set_title("scaling")
        b.legend(fontsize=8)
    cmd, _, rest = caption.partition("  |  ")
    fig.text(0.01, 0.035, cmd, fontsize=7, family="monospace")
    fig.text(0.01, 0.01, rest, fontsize=7, family="monospace")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


# -- main -----------------------------------------------------------------------------------


def floor_argv(answer: Path) -> list[str]:
    """The floor server (benchmarks/floor.py) answering with ``answer``."""
    return [
        sys.executable,
        str(HERE / "floor.py"),
        "--answer",
        str(answer),
        "--insecure",
        "--address",
        "127.0.0.1:{port}",
    ]


def unmeasured(details: dict[str, Any], phase: str, e: BaseException) -> None:
    """A phase that could not be measured (a busy machine, a dead peer) is said, not fatal."""
    if isinstance(e, grpc.RpcError):
        code = e.code() if hasattr(e, "code") else "?"
        what = f"gRPC {code}: {e.details() if hasattr(e, 'details') else e}"
    else:
        what = f"{type(e).__name__}: {e}"
    details.setdefault("unmeasured", []).append({"phase": phase, "error": what})
    loud(f"{phase}: could not be measured ({what}); the run goes on without it")


def proc_rss_mb(pid: int) -> float:
    return proc_mem(pid)["VmRSS"] / 2**20


def run_fleets(
    exe: dict[str, list[str]], host: str, quick: bool, details: dict[str, Any]
) -> dict[str, Any]:
    """Fleets of distinct claims against sack8s with answer reuse on and off."""
    plan = (
        [("medium", 50, 2), ("large", 10, 2)]
        if quick
        else [
            ("medium", 1000, 3),
            ("medium", 10000, 2),
            ("large", 300, 2),
        ]
    )
    bases = {n: fleet.push_versions(host, wl.SIZES[n]) for n in {n for n, _, _ in plan}}
    out: dict[str, Any] = {}
    for mode in ("sack8s", COMPUTE):
        for name, claims, passes in plan:
            label = f"{name} x{claims}"
            mport = free_port()
            srv = Server(mode, [*exe[mode], "--metrics-address", f"127.0.0.1:{mport}"])
            try:
                srv.start(REPO)
                try:
                    r = asyncio.run(
                        fleet.run_fleet(
                            srv.port,
                            mport,
                            srv.pid,
                            proc_cpu,
                            proc_rss_mb,
                            wl.SIZES[name],
                            host,
                            bases[name],
                            claims,
                            passes,
                        )
                    )
                finally:
                    srv.stop()
            except (grpc.RpcError, RuntimeError, OSError) as e:
                unmeasured(details, f"fleet {mode} {label}", e)
                continue
            out.setdefault(mode, {})[label] = r.figures
            by_pass = ", ".join(f"{c:.2f}" for c in r.figures["cpu_ms_per_request_by_pass"])
            print(
                f"  fleet {mode:14} {label:12} cpu {r.figures['cpu_ms_per_request']:8.2f} ms/req "
                f"(passes {by_pass}), "
                f"RSS {r.figures['rss_mb_end']:.0f} MB",
                flush=True,
            )
    return out


def run_crossplane(
    exe: dict[str, list[str]],
    host: str,
    prepared: dict[str, Prepared],
    answers: dict[str, Path],
    quick: bool,
    details: dict[str, Any],
    many: int | None = None,
) -> dict[str, Any]:
    """What Crossplane sends (benchmarks/realistic.py): single claims, the fleet mix and
    10,000 claims, each call a fresh Go serialization with Crossplane's tag, three servers
    rotated round by round.
    """
    import realistic as xp
    import wire

    try:
        exe_path, build_s = wire.build(timeout=420)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        if STRICT:
            raise SystemExit(f"the Go re-serializer could not be built in strict mode: {e}") from e
        unmeasured(details, "crossplane requests (no Go re-serializer)", e)
        return {}
    gowire = wire.GoWire(exe_path)
    out: dict[str, Any] = {"go_build_s": build_s}
    print(f"\ncrossplane-wire built in {build_s:.0f} s (Go, module proxy)", flush=True)

    def start(floor_answer: Path) -> dict[str, Server]:
        servers: dict[str, Server] = {}
        for name, argv in (
            ("sack8s", exe["sack8s"]),
            (COMPUTE, exe[COMPUTE]),
            ("floor", floor_argv(floor_answer)),
        ):
            servers[name] = Server(name, argv).start(REPO)
        return servers

    def stop(servers: dict[str, Server]) -> dict[str, float]:
        rss = {n: proc_rss_mb(s.pid) for n, s in servers.items()}
        for s in servers.values():
            s.stop()
        return rss

    try:
        first = next(iter(prepared.values()))
        out["proof"] = wire.prove(gowire, first.requests["sack8s"])
        print(f"  Go re-serializer: {out['proof']}", flush=True)
        # single claims
        rounds = 3 if quick else 10
        per_round = {"small": 30, "medium": 20, "large": 3}
        for n, p in prepared.items():
            k = 4 if quick else per_round.get(n, 10)
            plain = fnv1.RunFunctionRequest()
            plain.CopyFrom(p.requests["sack8s"])
            plain.ClearField("meta")
            bodies = gowire.serialize([plain.SerializeToString()], (rounds + 1) * k)
            servers = start(answers[n])
            try:
                xp.rotate(servers, [bodies[:k]], proc_cpu, None)  # warm-up
                measured: dict[str, xp.Measured] = {}
                ttls = xp.rotate(servers, xp.slices(bodies[k:], k), proc_cpu, measured)
            finally:
                rss = stop(servers)
            tags = [[xp.tag_of(bodies[0])] * 100]
            share = xp.crossplane_cache_share(tags, [[ttls[-1][-1]] * 100])
            out[f"single {n}"] = s = xp.summary(measured, rss, share)
            print(xp.line(f"single {n}", s), flush=True)
        # the fleet mix, and 10,000 distinct claims over six component versions
        plans = [("fleet mix", 40 if quick else 300, 3 if quick else 6, True, 1)]
        many = (60 if quick else 10000) if many is None else many
        if many > 0:
            plans.append(("many claims", many, 2, False, 2))
        medium = wl.SIZES["medium"]
        for label, claims, passes, mix, repos in plans:
            bases = [fleet.push_versions(host, medium)]
            if repos > 1:
                bases.append(fleet.push_versions_at(host, medium, "-b"))
            servers = start(answers["medium"]) if "medium" in answers else None
            if servers is None:
                break
            try:
                t0 = time.perf_counter()
                steady = asyncio.run(
                    xp.first_reconciles(servers[COMPUTE].port, medium, host, bases, claims)
                )
                first_s = time.perf_counter() - t0
                measured = {}
                tags, ttls, counts = [], [], []
                for p_ in range(passes):
                    raw, c = xp.mix_pass(steady, p_) if mix else xp.same_pass(steady)
                    bodies = gowire.serialize(raw)
                    del raw
                    got = xp.rotate(
                        servers,
                        xp.slices(bodies, max(1, claims // (10 if quick else 20))),
                        proc_cpu,
                        measured if p_ > 0 else None,  # pass 0 fills whatever is cached
                    )
                    tags.append([xp.tag_of(b) for b in bodies])
                    ttls.append([t for r in got for t in r])
                    counts.append(c)
                    del bodies
            finally:
                rss = stop(servers)
            share = xp.crossplane_cache_share(tags, ttls)
            s = xp.summary(measured, rss, share)
            s.update({"claims": claims, "passes": passes, "changes": counts, "first_s": first_s})
            out[f"{label} x{claims}"] = s
            print(xp.line(f"{label} x{claims}", s), flush=True)
    except (grpc.RpcError, RuntimeError, OSError, subprocess.CalledProcessError) as e:
        unmeasured(details, "crossplane requests", e)
    finally:
        gowire.close()
    return out


def print_crossplane(xp: dict[str, Any]) -> None:
    """The headline: what Crossplane sends, and what 10,000 claims polled once a minute cost."""
    print("\nwhat Crossplane sends (fresh Go-order bytes, Crossplane's tag; servers rotated):")
    per_s = 10000 / 60
    for label, s in xp.items():
        if not isinstance(s, dict) or "floor" not in s:
            continue
        print(
            f"  {label:22} "
            + ", ".join(
                f"{n} {s[n]['cpu_ms_per_request']:.2f} ms ({s[n]['x_floor']:.2f}x floor, "
                f"RSS {s[n]['rss_mb']:.0f} MB)"
                for n in ("sack8s", COMPUTE, "floor")
                if n in s
            )
            + f"; Crossplane's cache: {100 * s['crossplane_cache_share']:.0f} %"
        )
        if label.startswith(("fleet mix", "many claims")):
            cores = {n: per_s * s[n]["cpu_ms_per_request"] / 1000 for n in ("sack8s", COMPUTE)}
            print(
                f"  {'':22} 10,000 claims polled once a minute: {cores['sack8s']:.2f} cores "
                f"(reuse on), {cores[COMPUTE]:.2f} cores (compute path); with Crossplane's "
                f"cache on, {cores['sack8s'] * (1 - s['crossplane_cache_share']):.2f} cores"
            )


def print_fleets(fleets: dict[str, Any], results: dict[str, Any]) -> None:
    print("\nfleets of distinct claims (round-robin, concurrency 8; last pass):")
    for mode, by in fleets.items():
        for label, f in by.items():
            w = label.split()[0]
            single = results.get(w, {}).get(mode, {}).get("cpu_ms_per_request")
            floor = results.get(w, {}).get("floor", {}).get("cpu_ms_per_request")
            ratio = f" = {f['cpu_ms_per_request'] / single:.2f}x the single claim" if single else ""
            fl = f", {f['cpu_ms_per_request'] / floor:.2f}x the floor" if floor else ""
            srv = f["server"]
            hits = srv.get("sack8s_responses_reused_total", srv.get("sack8s_responses_reused", 0))
            print(
                f"  {mode:14} {label:12} {f['cpu_ms_per_request']:.2f} ms/req{ratio}{fl}; "
                f"p50 {f['p50_ms']:.1f} ms, p99 {f['p99_ms']:.1f} ms; RSS by pass "
                f"{', '.join(f'{x:.0f}' for x in f['rss_mb_by_pass'])} MB; "
                f"answers reused {hits:.0f}; first reconcile "
                f"{f['first_reconcile_cpu_ms_per_claim']:.1f} ms/claim"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few iterations (smoke test)")
    ap.add_argument("--json", type=Path, help="write {workload: {server: {...}}} here")
    ap.add_argument(
        "--details", type=Path, help="write every figure (cold/warm, scaling, memory) here as JSON"
    )
    ap.add_argument(
        "--plot",
        type=Path,
        default=REPO / "docs" / "benchmarks.png",
        help="PNG plot (default docs/benchmarks.png)",
    )
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--workloads", default="small,medium,large")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument(
        "--fleet",
        default=False,
        action=argparse.BooleanOptionalAction,
        help="servers phase: also the older fleets of byte-identical requests (default off; "
        "the crossplane phase measures fleets as Crossplane sends them)",
    )
    ap.add_argument(
        "--phases",
        default="crossplane,servers,startup",
        help="crossplane (what Crossplane sends: Go-order bytes, churn, fleets; the headline), "
        "servers (RunFunction CPU of the peers on one request, scaling, memory) and/or startup "
        "(sack8s command start-up)",
    )
    ap.add_argument(
        "--startup-baseline",
        type=Path,
        metavar="DIR",
        help="a source tree of an older commit: startup figures before/after, paired",
    )
    ap.add_argument(
        "--many-claims",
        type=int,
        default=None,
        help="crossplane phase: distinct claims of the many-claims fleet (default 10000, "
        "--quick 60; 0 skips it)",
    )
    ap.add_argument("--startup-json", type=Path, help="write the startup figures here as JSON")
    args = ap.parse_args()
    phases = {p for p in args.phases.split(",") if p}
    budget = QUICK if args.quick else FULL
    sdklogging.configure(sdklogging.Level.DISABLED)
    started = time.time()
    cmd = " ".join(["python benchmarks/run.py", *sys.argv[1:]])
    print(f"# {cmd}\n# {machine()}\n# load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    startup_figures = None
    if "startup" in phases:
        import startup

        runs = 3 if args.quick else 10
        print(
            f"\nstartup: every command {runs} times after 1 warm-up"
            + (f", paired with {args.startup_baseline}" if args.startup_baseline else ""),
            flush=True,
        )
        startup_figures = startup.measure(runs=runs, warmup=1, baseline=args.startup_baseline)
        print(startup.table(startup_figures), flush=True)
        if args.startup_json:
            args.startup_json.parent.mkdir(parents=True, exist_ok=True)
            args.startup_json.write_text(
                json.dumps(
                    {"command": cmd, "machine": machine(), "startup": startup_figures},
                    indent=2,
                    sort_keys=True,
                )
                + "\n"
            )
    if not phases & {"servers", "crossplane"}:
        return 0

    servers = [s for s in args.servers.split(",") if s]
    if "servers" not in phases:  # the crossplane phase runs sack8s (both modes) and the floor
        servers = ["sack8s", COMPUTE, "floor"]
    reg_bin = find_binary()
    if reg_bin is None:
        raise SystemExit(
            "docker-registry not found (apt-get install docker-registry, or SACK8S_REGISTRY_BIN)"
        )
    exe: dict[str, list[str]] = {
        "sack8s": [sack8s_bin(), "serve", "--insecure", "--address", "127.0.0.1:{port}"],
    }
    exe[COMPUTE] = [*exe["sack8s"], "--response-bytes", "0"]
    skipped: dict[str, str] = {}
    if "pythonic" in servers:
        pb = pythonic_bin(args.quick)
        if pb:
            exe["pythonic"] = [pb, "grpc", "--insecure", "--address", "127.0.0.1:{port}"]
        else:
            skipped["pythonic"] = (
                "no Python >= 3.12 or crossplane-function-pythonic could not be installed"
            )
    if "go-templating" in servers:
        gb = go_templating_bin()
        if gb:
            exe["go-templating"] = [gb, "--insecure", "--address", "127.0.0.1:{port}"]
        else:
            skipped["go-templating"] = (
                "opt-in: set SACK8S_GO_TEMPLATING to the function-go-templating binary"
            )
    for s, why in skipped.items():
        if STRICT and s not in OPT_IN_PEERS:
            raise SystemExit(f"peer {s} unavailable in strict mode: {why}")
        loud(f"PEER {s} SKIPPED: {why} -- its figures are missing from this run")
    servers = [s for s in servers if s not in skipped]

    reg = Registry(reg_bin).start()
    tmp = Path(tempfile.mkdtemp(prefix="sack8s-bench-"))
    results: dict[str, dict[str, Any]] = {}
    details: dict[str, Any] = {
        "command": cmd,
        "machine": machine(),
        "cold_warm": {},
        "inprocess": {},
        "skipped": skipped,
    }
    if startup_figures is not None:
        details["startup"] = startup_figures
    try:
        names = [w for w in args.workloads.split(",") if w]
        factors = (1, 10) if args.quick else wl.SCALING_FACTORS
        scale_sizes = (
            {f"x{f}": wl.SCALING_BASE.scaled(f) for f in factors} if "servers" in phases else {}
        )
        for size in [*(wl.SIZES[n] for n in names), *scale_sizes.values()]:
            wl.push(reg.host, wl.build_component(size), wl.base_of(size))
        prepared = {
            n: asyncio.run(prepare(n, wl.SIZES[n], reg.host, ttl_probe=(n == "medium")))
            for n in names
        }
        scale_prep = {
            n: asyncio.run(prepare(n, s, reg.host, ttl_probe=False)) for n, s in scale_sizes.items()
        }
        for n, p in prepared.items():
            details["cold_warm"][n] = p.cold
            if "servers" in phases:
                details["inprocess"][n] = inprocess_latency(p, budget.inproc_n)
            results[n] = {}
        answers = {}
        for n, p in {**prepared, **scale_prep}.items():
            answers[n] = tmp / f"answer-{n}.json"
            answers[n].write_text(json.dumps(p.answer))
        if "crossplane" in phases:
            details["crossplane"] = run_crossplane(
                exe, reg.host, prepared, answers, args.quick, details, args.many_claims
            )
        if "servers" not in phases:
            servers = []
        for s in servers:
            for n, p in prepared.items():
                argv = exe.get(s) or floor_argv(answers[n])
                try:
                    srv = Server(s, argv).start(REPO)
                    try:
                        results[n][s] = asyncio.run(measure_server(srv, p, budget))
                    finally:
                        srv.stop()
                except (grpc.RpcError, RuntimeError, OSError) as e:
                    unmeasured(details, f"{s} on {n}", e)
                    continue
                r = results[n][s]
                print(
                    f"  {n:7} {s:14} cpu {r['cpu_ms_per_request']:8.2f} ms/req over "
                    f"{r['cpu_requests']} requests",
                    flush=True,
                )
        # scaling: sack8s and the floor, every dimension x f
        series: dict[str, Any] = {}
        for s in ("sack8s", PROPOSED, "floor"):
            if s not in servers:
                continue
            pts = {"factor": [], "cpu_ms": [], "objects": []}
            for n, p in scale_prep.items():
                argv = exe.get(s) or floor_argv(answers[n])
                srv = Server(s, argv).start(REPO)
                try:
                    r = asyncio.run(
                        measure_server(
                            srv,
                            p,
                            Budget(
                                budget.cpu_target_s,
                                budget.min_n,
                                budget.max_n,
                                {1: 4, 8: 8, 32: 32},
                                0,
                            ),
                        )
                    )
                finally:
                    srv.stop()
                pts["factor"].append(int(n[1:]))
                pts["cpu_ms"].append(r["cpu_ms_per_request"])
                pts["objects"].append(r["objects"])
            pts["exponent"] = fit_exponent(pts["factor"], pts["cpu_ms"])
            series[s] = pts
        scaling = {"base": wl.SCALING_BASE.__dict__, "series": series}
        details["scaling"] = scaling
        # memory: RSS after 1k vs 20k requests (medium)
        if "sack8s" in servers and "medium" in prepared and "servers" in phases:
            first, total = (100, 1000) if args.quick else (1000, 20000)
            try:
                srv = Server("sack8s", exe["sack8s"]).start(REPO)
                try:
                    details["rss_growth"] = asyncio.run(
                        rss_growth(srv, prepared["medium"].requests["sack8s"], first, total)
                    )
                finally:
                    srv.stop()
            except (grpc.RpcError, RuntimeError, OSError) as e:
                unmeasured(details, "memory growth", e)
        # fleets: thousands of distinct claims, round-robin (benchmarks/fleet.py)
        if args.fleet and "sack8s" in servers:
            details["fleet"] = run_fleets(exe, reg.host, args.quick, details)
    finally:
        reg.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(table(results, details["inprocess"]))
    print("\nratios to the floor (server CPU per request, same run):")
    for w, by in results.items():
        fl = by.get("floor", {}).get("cpu_ms_per_request")
        if fl:
            print(
                "  "
                + w
                + ": "
                + ", ".join(f"{s} {r['cpu_ms_per_request'] / fl:.2f}×" for s, r in by.items())
            )
    print("\ncold and warm reconcile (in process, fresh caches):")
    for w, c in details["cold_warm"].items():
        extra = (
            f", after the tag TTL {c['after_ttl_registry_requests']} requests"
            if "after_ttl_registry_requests" in c
            else ""
        )
        print(
            f"  {w}: first reconcile {c['registry_requests']} registry requests, "
            f"{c['wall_ms']:.1f} ms wall / {c['cpu_ms']:.1f} ms CPU; "
            f"warm {c['warm_registry_requests']} requests, {c['warm_wall_ms']:.1f} ms{extra}; "
            f"a new claim of the warm component {c['new_claim_cpu_ms']:.1f} ms CPU"
        )
    if scaling["series"]:
        print(f"\nscaling (base {wl.SCALING_BASE}, every dimension x f):")
        for s, pts in scaling["series"].items():
            print(
                f"  {s}: "
                + ", ".join(
                    f"x{f}: {c:.2f} ms ({o} objects)"
                    for f, c, o in zip(pts["factor"], pts["cpu_ms"], pts["objects"], strict=False)
                )
                + f"; fitted exponent {pts['exponent']:.2f}"
            )
    if "rss_growth" in details:
        g = details["rss_growth"]
        print(
            f"\nmemory (sack8s, medium, c=8): RSS {g['rss_mb_a']:.1f} MB after {g['requests_a']} "
            f"requests, {g['rss_mb_b']:.1f} MB after {g['requests_b']} (growth "
            f"{g['growth_mb']:+.1f} MB)"
        )
    if details.get("fleet"):
        print_fleets(details["fleet"], results)
    if details.get("crossplane"):
        print_crossplane(details["crossplane"])
    for u in details.get("unmeasured", []):
        loud(f"NOT MEASURED: {u['phase']}: {u['error']}")
    elapsed = time.time() - started
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    caption = f"{cmd}  |  {machine()}  |  {when}  |  {elapsed:.0f} s"
    print(f"\n# {caption}")
    table_json = {
        w: {
            s: {k: r[k] for k in ("cpu_ms_per_request", "p50_ms", "p99_ms", "rps_c8", "objects")}
            for s, r in by.items()
            if s in SERVERS
        }
        for w, by in results.items()
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(table_json, indent=2, sort_keys=True) + "\n")
    if args.details:
        details["results"] = results
        args.details.parent.mkdir(parents=True, exist_ok=True)
        args.details.write_text(json.dumps(details, indent=2, sort_keys=True, default=str) + "\n")
    if not args.no_plot:
        try:
            plot(args.plot, results, scaling, caption)
            print(f"plot: {args.plot}")
        except ImportError:
            msg = "matplotlib is not installed: no plot written (pip install matplotlib)"
            if STRICT:
                raise SystemExit(msg) from None
            loud(msg)
    for s, why in skipped.items():
        loud(f"PEER {s} WAS SKIPPED: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
