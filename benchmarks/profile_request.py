#!/usr/bin/env python3
"""Profile one request path in process: what a compute or a reuse hit costs, and where.

    python benchmarks/profile_request.py --workload medium --path compute [--cprofile N]

Starts Debian's ``docker-registry``, writes the workload's component (benchmarks/workloads.py),
settles the steady-state request of one claim (as benchmarks/run.py does), has the Go
re-serializer (benchmarks/wire.py) write ``--calls`` fresh Go-order copies of it with
Crossplane's tag, and sends them to the gRPC edge's ``RawRunFunction.run`` in this process
(no sockets): ``--path compute`` with answer reuse off (``--response-bytes 0``), ``reuse``
with it on, ``new-claim`` the compute path of a claim whose Flux mutation is not memoised
(every memo of the component warm; ``unseen``: nor its spec, admission and composed
objects; ``evicted``: those, its mutation kept packed only), ``floor`` the floor
(benchmarks/floor.py). Prints CPU per call; with ``--cprofile N`` the N functions with the
most cumulative time. Without a Go toolchain the copies are Python's serialization (same
content, one byte string).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
import wire  # noqa: E402
import workloads as wl  # noqa: E402
from crossplane.function import logging as sdklogging  # noqa: E402
from crossplane.function.proto.v1 import run_function_pb2 as fnv1  # noqa: E402
from floor import Floor  # noqa: E402
from registry import Registry, find_binary  # noqa: E402

from function.cache import Cache, Responses  # noqa: E402
from function.edge.fn import FunctionRunner  # noqa: E402
from function.edge.server import RawRunFunction  # noqa: E402
from function.edge.sources import SourceFactory  # noqa: E402


def bodies_of(req: fnv1.RunFunctionRequest, copies: int) -> list[bytes]:
    plain = fnv1.RunFunctionRequest()
    plain.CopyFrom(req)
    plain.ClearField("meta")
    try:
        exe, _ = wire.build(timeout=600)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"no Go re-serializer ({e}): Python's bytes", file=sys.stderr)
        plain.meta.tag = "python"
        return [plain.SerializeToString()] * copies
    gw = wire.GoWire(exe)
    try:
        return gw.serialize([plain.SerializeToString()], copies)
    finally:
        gw.close()


async def measure(
    path: str, p: run.Prepared, bodies: list[bytes], top: int, concurrency: int = 1
) -> None:
    if path == "floor":
        floor = Floor(p.answer)

        async def call(b: bytes) -> object:
            rsp = await floor.RunFunction(fnv1.RunFunctionRequest.FromString(b), None)
            return rsp.SerializeToString()

    else:
        runner = FunctionRunner(sources=SourceFactory(cache=Cache(ttl=3600)))
        responses = Responses(256 * 2**20 if path == "reuse" else 0)
        raw = RawRunFunction(runner, responses)
        # a claim never seen: its Flux mutation is not memoised ("new-claim"), nor anything
        # else of its own ("unseen": its spec, admission, composed objects); a claim not seen
        # lately, whose mutation is kept packed only ("evicted")
        fresh = {
            "new-claim": ("mutations", "packed_mutations"),
            "unseen": (
                "mutations",
                "packed_mutations",
                "specs",
                "admissions",
                "structs",
                "claim_answers",
            ),
            "evicted": ("mutations", "specs", "admissions", "structs", "claim_answers"),
        }.get(path, ())

        async def call(b: bytes) -> object:
            for table in fresh:
                runner.memos.tables[table].clear()
            return await raw.run(b, None)

    for b in bodies[:5]:  # warm: registry reads, memos, a stored answer
        await call(b)

    async def send_all() -> None:  # ``concurrency`` requests in flight, as the benchmark
        todo = iter(bodies)

        async def worker() -> None:
            for b in todo:
                await call(b)

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    per = []
    for _ in range(5):  # the least of five passes: other work on shared cores only adds
        c0 = time.process_time()
        await send_all()
        per.append((time.process_time() - c0) / len(bodies) * 1000)
    print(
        f"{p.name} {path}: {min(per):.3f} ms CPU per call (least of 5 passes of "
        f"{len(bodies)} calls; median {sorted(per)[2]:.3f})",
        flush=True,
    )
    if top:
        # The composition runs in a worker thread (function/edge/fn.py ``_compose``): profiled
        # there with a second profiler, reported after the event loop's.
        from function.edge import fn

        worker = cProfile.Profile()
        compose = fn._compose

        def profiled(*args: object) -> object:
            if threading.current_thread() is threading.main_thread():
                return compose(*args)  # inline: seen by the event loop's profiler
            worker.enable()
            try:
                return compose(*args)
            finally:
                worker.disable()

        fn._compose = profiled
        prof = cProfile.Profile()
        prof.enable()
        for b in bodies:
            await call(b)
        prof.disable()
        fn._compose = compose
        print("== event loop thread")
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(top)
        if worker.getstats():
            print("== composition (worker thread)")
            pstats.Stats(worker).sort_stats("cumulative").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="medium", choices=sorted(wl.SIZES))
    ap.add_argument("--path", default="compute", help="compute, reuse, floor (comma-separated)")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    ap.add_argument("--concurrency", type=int, default=1, help="requests in flight")
    args = ap.parse_args()
    sys.setswitchinterval(0.001)  # as `sack8s serve` (function/edge/server.py)
    binary = find_binary()
    if binary is None:
        raise SystemExit("docker-registry not found (SACK8S_REGISTRY_BIN)")
    reg = Registry(binary).start()
    try:
        size = wl.SIZES[args.workload]
        wl.push(reg.host, wl.build_component(size), wl.base_of(size))
        p = asyncio.run(run.prepare(args.workload, size, reg.host, ttl_probe=False))
        json.dumps(p.answer)
        bodies = bodies_of(p.requests["sack8s"], args.calls)
        sdklogging.configure(level=sdklogging.Level.INFO)  # as `sack8s serve`
        for path in args.path.split(","):
            asyncio.run(measure(path, p, bodies, args.cprofile, args.concurrency))
    finally:
        reg.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
