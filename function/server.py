"""The gRPC server: RunFunction over the raw request bytes, answering identical requests again.

The SDK's server (``crossplane.function.runtime.serve``) hands the function a parsed request
and serializes the returned message on every call. In steady state Crossplane sends every
claim the same bytes once a minute, so this server registers RunFunction with no
deserializer: it hashes the bytes first and, while the answer it computed for them still
holds (``function.cache.Responses``), sends the stored serialized answer without parsing or
composing anything. Otherwise it parses, runs ``FunctionRunner.answer`` and stores what may
be reused. Everything else follows the SDK's server: the same service names (v1, and v1beta1
through the SDK's converting wrapper), reflection, mTLS credentials, message size options,
and a graceful stop on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import grpc
import structlog
from crossplane.function import runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1
from grpc_reflection.v1alpha import reflection

from function import metrics
from function.cache import Responses
from function.fn import FunctionRunner

SERVICE = fnv1.DESCRIPTOR.services_by_name["FunctionRunnerService"].full_name
GRACE_SECONDS = runtime.SHUTDOWN_GRACE_PERIOD_SECONDS


class RawRunFunction:
    """RunFunction on bytes: reuse a stored answer, or compute and maybe store one."""

    def __init__(self, runner: FunctionRunner, responses: Responses) -> None:
        self.runner = runner
        self.responses = responses
        self.log = structlog.get_logger("function.server")

    async def run(self, request: bytes, _context: grpc.aio.ServicerContext | None) -> bytes:
        started = time.perf_counter()
        key = self.responses.key(request)
        hit = self.responses.lookup(key)
        if hit is not None:
            payload, note = hit
            metrics.observe_request("reused", time.perf_counter() - started, ())
            self.log.debug("reused an identical request's answer", **(note or {}))
            return payload
        req = fnv1.RunFunctionRequest.FromString(request)
        with self.responses.recording() as facts:
            rsp, outcome = await self.runner.answer(req)
        payload = rsp.SerializeToString()
        if outcome == "composed":
            xr = req.observed.composite.resource
            note = {"tag": req.meta.tag, "xr": _xr_name(xr)}
            self.responses.store(key, payload, facts, note)
        else:
            self.responses.refuse()
        return payload


def _xr_name(xr: Any) -> str:
    try:
        return str(xr["metadata"]["name"])
    except (KeyError, TypeError, ValueError):
        return ""


def build_server(
    runner: FunctionRunner,
    responses: Responses,
    *,
    options: Sequence[tuple[str, Any]] | None = None,
) -> grpc.aio.Server:
    """A server with RunFunction (v1 raw, v1beta1 through the SDK's wrapper) and reflection."""
    server = grpc.aio.server(options=options)
    raw = RawRunFunction(runner, responses)
    handler = grpc.unary_unary_rpc_method_handler(
        raw.run, request_deserializer=None, response_serializer=None
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"RunFunction": handler}),)
    )
    grpcv1beta1.add_FunctionRunnerServiceServicer_to_server(
        runtime.BetaFunctionRunner(wrapped=runner), server
    )
    reflection.enable_server_reflection(runtime.SERVICE_NAMES, server)
    return server


def serve(
    runner: FunctionRunner,
    responses: Responses,
    address: str,
    *,
    creds: grpc.ServerCredentials | None,
    insecure: bool,
    options: Sequence[tuple[str, Any]] | None = None,
) -> None:
    """Listen on ``address`` until SIGTERM, then stop within the grace period."""
    if creds is None and not insecure:
        raise ValueError("no credentials were provided: pass --tls-certs-dir or --insecure")
    # Compositions run in worker threads (function/fn.py); hand the GIL over every 1 ms
    # instead of 5 so the event loop and short renders are not queued behind a long one.
    sys.setswitchinterval(0.001)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def main() -> None:
        server = build_server(runner, responses, options=options)
        loop.add_signal_handler(
            signal.SIGTERM, lambda: asyncio.ensure_future(server.stop(grace=GRACE_SECONDS))
        )
        if insecure:
            server.add_insecure_port(address)
        else:
            server.add_secure_port(address, creds)
        await server.start()
        try:
            await server.wait_for_termination()
        finally:
            await server.stop(grace=GRACE_SECONDS)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
