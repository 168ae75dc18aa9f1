#!/usr/bin/env python3
"""What gRPC alone costs the server per call, as the crossplane phase sends (issue 33).

    python benchmarks/grpc_echo.py [--request-bytes N] [--response-bytes N] [--per-channel K]

A grpc.aio server whose only handler returns fixed bytes (no parsing, no work), in its own
process, called the way ``benchmarks/realistic.py`` calls the servers: ``--per-channel``
requests per fresh channel, 4 in flight. Prints the server's CPU per call (``utime + stime``
from ``/proc``), the least and the median of five passes: the part of every server's figure,
the floor's included, that no function code can remove.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

import grpc

METHOD = "/bench.Echo/Call"


async def _serve(port: int, size: int) -> None:
    body = b"x" * size

    async def call(_request: bytes, _context: object) -> bytes:
        return body

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(call)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Echo", {"Call": handler}),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _round(port: int, request: bytes, per_channel: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD)
        todo = iter(range(per_channel))

        async def worker() -> None:
            for _ in todo:
                await call(request, timeout=60)

        await asyncio.gather(*(worker() for _ in range(4)))


async def _send(port: int, request: bytes, calls: int, per_channel: int) -> None:
    for _ in range(calls // per_channel):
        await _round(port, request, per_channel)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--request-bytes", type=int, default=17_871)  # the small workload's request
    ap.add_argument("--response-bytes", type=int, default=14_715)  # and its answer
    ap.add_argument("--per-channel", type=int, default=30, help="calls per fresh channel")
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server process
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.response_bytes))
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, __file__, "--serve", str(port)]
    server = subprocess.Popen([*argv, "--response-bytes", str(args.response_bytes)])
    try:
        request = b"y" * args.request_bytes
        time.sleep(1.0)
        asyncio.run(_send(port, request, 4 * args.per_channel, args.per_channel))  # warm-up
        per = []
        for _ in range(5):
            c0 = _cpu(server.pid)
            asyncio.run(_send(port, request, args.calls, args.per_channel))
            per.append((_cpu(server.pid) - c0) / args.calls * 1000)
    finally:
        server.kill()
        server.wait()
    print(
        f"gRPC echo, {args.request_bytes} B in, {args.response_bytes} B out, "
        f"{args.per_channel} calls per channel: {min(per):.3f} ms server CPU per call "
        f"(least of 5 passes of {args.calls}; median {sorted(per)[2]:.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
