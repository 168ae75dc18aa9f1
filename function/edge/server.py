"""The gRPC server: RunFunction over the raw request bytes, answering unchanged content again.

The SDK's server (``crossplane.function.runtime.serve``) hands the function a parsed request
and serializes the returned message on every call. In steady state Crossplane sends every
claim the same *content* once a minute -- never the same bytes (Go's random map order), and
with churn the function does not read. So this server registers RunFunction with no
deserializer: it parses, projects the request onto what the function reads
(function/edge/reads.py) and, while the answer computed for that content still holds
(``function.cache.Responses``), sends the stored serialized answer behind a fresh ``meta``
(this request's tag, the remaining ttl) without composing or serializing anything.
Otherwise it runs ``FunctionRunner.compute`` on the view and stores what may be reused.
Everything else follows the SDK's server: the same service names (v1, and v1beta1 through
the SDK's converting wrapper), reflection, mTLS credentials, message size options, and a
graceful stop on SIGTERM.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import grpc
import structlog
from crossplane.function import runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1
from grpc_reflection.v1alpha import reflection

from function.cache import Responses
from function.edge import metrics, reads
from function.edge.fn import FunctionRunner

SERVICE = fnv1.DESCRIPTOR.services_by_name["FunctionRunnerService"].full_name
GRACE_SECONDS = runtime.SHUTDOWN_GRACE_PERIOD_SECONDS


class RawRunFunction:
    """RunFunction on bytes: reuse a stored answer for the same content, or compute one."""

    def __init__(self, runner: FunctionRunner, responses: Responses) -> None:
        self.runner = runner
        self.responses = responses
        self.log = structlog.get_logger("function.edge.server")
        self._log: Any = None

    async def run(self, request: bytes, _context: grpc.aio.ServicerContext | None) -> bytes:
        started = time.perf_counter()
        req = fnv1.RunFunctionRequest.FromString(request)
        v = None
        key = None
        if self.responses.enabled:
            # The view key of this exact content, if seen before (a claim polled again with
            # nothing changed: the projection is skipped); else project and remember. The
            # request is read through its view only, so it is pruned in place.
            exact = reads.exact_key(req)
            key = self.responses.alias(exact)
            if key is None:
                v = reads.view(req, in_place=True)
                key = reads.key(v)
                self.responses.remember_alias(exact, key)
            hit = self.responses.lookup(key)
            if hit is not None:
                body, lifetime, note = hit
                ttl = self.runner.answer_ttl if lifetime is None else lifetime
                metrics.observe_request("reused", time.perf_counter() - started, ())
                if self._log is None:  # bound once: the lazy proxy binds on every call
                    self._log = self.log.bind()
                self._log.debug("reused the answer to the same content", **(note or {}))
                return _meta(req.meta.tag, min(ttl, self.runner.answer_ttl)) + body
        if v is None:
            v = reads.view(req, in_place=True)
        rsp, desired, outcome, facts = await self.runner.compute_wire(v)
        if key is None:
            return rsp.SerializeToString() + desired
        if outcome != "composed":
            self.responses.refuse()
            return rsp.SerializeToString() + desired
        # Stored without meta (tag and ttl are written afresh for every call); protobuf writes
        # fields in number order, so meta + body is exactly the computed payload.
        meta = _meta(rsp.meta.tag, rsp.meta.ttl.ToTimedelta().total_seconds())
        rsp.ClearField("meta")
        body = rsp.SerializeToString() + desired
        note = {"tag": v.meta.tag, "xr": _xr_name(v.observed.composite.resource)}
        self.responses.store(key, body, facts, note)
        return meta + body


def _meta(tag: str, ttl: float) -> bytes:
    """The serialized ``meta`` field of a response (field 1, first on the wire)."""
    return _meta_bytes(tag, round(ttl))


@functools.lru_cache(maxsize=4096)
def _meta_bytes(tag: str, seconds: int) -> bytes:
    # A claim polled with unchanged content sends the same tag each time: built once.
    out = fnv1.RunFunctionResponse()
    out.meta.tag = tag
    out.meta.ttl.FromTimedelta(timedelta(seconds=seconds))
    return out.SerializeToString()


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
