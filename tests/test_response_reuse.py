"""Answers reused for identical requests (issue 21): only while nothing they rest on changed.

The server (function/edge/server.py) keeps a composed answer under the SHA-256 of the request
bytes with the short-lived registry facts it read. These tests drive it over gRPC, as
Crossplane does, against a real registry, and prove the cache is never wrong: any change in
the request that the output depends on -- an observed object, the XR's status, a credential,
the function input -- is computed anew; an expired or changed tag list is re-read; a Fatal,
an answer waiting for required resources and an answer read from a local mirror are never
kept.
"""

from __future__ import annotations

import base64
import copy
import socket
from typing import Any

import grpc
import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from support.examples import COMPOSITION, EXAMPLES, load
from support.oci_env import fixture_registry

from function.cache import Cache, Responses
from function.edge.fn import FunctionRunner
from function.edge.render import input_from_composition
from function.edge.server import build_server
from function.edge.sources import SourceFactory

pytestmark = pytest.mark.registry


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, clock: Clock) -> None:
        self.cache = Cache(ttl=60.0, clock=clock)
        self.runner = FunctionRunner(sources=SourceFactory(cache=self.cache))
        self.responses = Responses()
        self.port = _free_port()

    async def __aenter__(self) -> Served:
        self.server = build_server(self.runner, self.responses)
        self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = grpcv1.FunctionRunnerServiceStub(self.channel)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.channel.close()
        await self.server.stop(grace=None)

    async def run(self, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        return await self.stub.RunFunction(req, timeout=60)


def request(host: str, version: str = "6.2.0", **policy_changes: Any) -> fnv1.RunFunctionRequest:
    xr = load(EXAMPLES / "xr.yaml")[0]
    xr["spec"]["component"]["repository"] = f"oci::http://{host}/copied-default"
    xr["spec"]["component"]["version"] = version
    policy = input_from_composition(load(COMPOSITION)[0], "composition")
    policy["registries"] = [{"host": host, "plainHTTP": True}]
    policy["mirrors"] = []
    policy["ocm"] = {"enabled": True, "gate": False}
    # The fixture registry's components ship the OCM CLI fixtures' ConfigData, whose Helm rule
    # writes `repository` without the registry: an image-pair defect, Fatal by default (issue
    # 20). These tests are about reusing answers, so they take the downgrade.
    policy["configData"] = {"imagePairs": "Warning"}
    policy.update(policy_changes)
    req = fnv1.RunFunctionRequest()
    req.meta.tag = "t1"
    resource.update(req.observed.composite, xr)
    req.input.update(policy)
    return req


def fatal(rsp: fnv1.RunFunctionResponse) -> str | None:
    return next((r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL), None)


async def composed(s: Served, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    """Run until the answer composes (the first rounds ask for required resources)."""
    for _ in range(3):
        rsp = await s.run(req)
        assert fatal(rsp) is None, fatal(rsp)
        if rsp.desired.resources:
            return rsp
        for k, _sel in rsp.requirements.resources.items():
            req.required_resources[k].CopyFrom(fnv1.Resources())
    raise AssertionError("never composed")


async def test_identical_request_is_answered_again_byte_for_byte(fixture_registry) -> None:
    async with Served(Clock()) as s:
        req = request(fixture_registry.host)
        first = await composed(s, req)
        stored = s.responses.stats.stored
        assert stored >= 1
        requests_before = s.cache.stats.registry_requests
        again = await s.run(req)
        assert s.responses.stats.reused == 1
        assert again.SerializeToString() == first.SerializeToString()
        assert s.cache.stats.registry_requests == requests_before


def _variants(req: fnv1.RunFunctionRequest) -> dict[str, fnv1.RunFunctionRequest]:
    out: dict[str, fnv1.RunFunctionRequest] = {}

    observed = copy.deepcopy(req)
    obj = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "podinfo", "annotations": {"a": "b"}},
    }
    resource.update(observed.observed.resources["namespace-podinfo"], obj)
    out["an observed object appears"] = observed

    status = copy.deepcopy(req)
    resource.update(status.observed.composite, {"status": {"component": {"version": "6.1.0"}}})
    out["the XR's status changes"] = status

    cred = copy.deepcopy(req)
    cred.credentials["registry-creds"].CopyFrom(
        fnv1.Credentials(
            credential_data=fnv1.CredentialData(
                data={"username": b"u", "password": base64.b64encode(b"p")}
            )
        )
    )
    out["a credential is added"] = cred

    inp = copy.deepcopy(req)
    # A field of what this first reconcile composes (its Namespaces: Flux waits for them).
    namespaces = dict(inp.input["namespaces"]) if "namespaces" in inp.input else {}
    namespaces["podSecurity"] = {"enforce": "privileged"}
    inp.input.update({"namespaces": namespaces})
    out["the function input changes"] = inp

    spec = copy.deepcopy(req)
    resource.update(spec.observed.composite, {"spec": {"values": {"inline": {"replicas": 5}}}})
    out["the claim's spec changes"] = spec
    return out


@pytest.mark.parametrize(
    "change",
    [
        "an observed object appears",
        "the XR's status changes",
        "a credential is added",
        "the function input changes",
        "the claim's spec changes",
    ],
)
async def test_any_change_the_output_depends_on_is_computed_anew(
    fixture_registry, change: str
) -> None:
    async with Served(Clock()) as s:
        req = request(fixture_registry.host)
        first = await composed(s, req)
        changed = _variants(req)[change]
        reused_before = s.responses.stats.reused
        rsp = await s.run(changed)
        assert s.responses.stats.reused == reused_before, f"{change}: answered from the cache"
        # ... and what was computed is the answer to the changed request, not the old one.
        direct = FunctionRunner(sources=SourceFactory(cache=Cache()))
        want, _ = await direct.answer(copy.deepcopy(changed))
        # meta.ttl is what is left of the tag facts' life: a second or so apart on two clocks
        assert abs(rsp.meta.ttl.seconds - want.meta.ttl.seconds) <= 5
        rsp.meta.ClearField("ttl")
        want.meta.ClearField("ttl")
        assert rsp == want
        if change == "the function input changes":
            assert rsp != first


async def test_a_version_range_rests_on_the_tag_list_and_expires_with_it(
    fixture_registry,
) -> None:
    clock = Clock()
    async with Served(clock) as s:
        req = request(fixture_registry.host, version=">=6.2.0 <7")
        await composed(s, req)
        await s.run(req)
        assert s.responses.stats.reused == 1
        clock.now += 61  # the tag list's TTL passed: the fact is no longer known to hold
        requests_before = s.cache.stats.registry_requests
        await s.run(req)
        assert s.responses.stats.reused == 1
        assert s.responses.stats.stale == 1
        assert s.cache.stats.registry_requests > requests_before  # the tags were listed again
        await s.run(req)  # stored again with the fresh fact
        assert s.responses.stats.reused == 2


async def test_fatal_waiting_and_local_answers_are_never_kept(fixture_registry) -> None:
    async with Served(Clock()) as s:
        # A Fatal (an unreachable registry: transient, must be retried).
        bad = request("127.0.0.1:1")
        bad.input.update({"registries": [{"host": "127.0.0.1:1", "plainHTTP": True}]})
        for _ in range(3):
            rsp = await s.run(bad)
            for k in rsp.requirements.resources:
                bad.required_resources[k].CopyFrom(fnv1.Resources())
        assert fatal(rsp)
        assert s.responses.stats.reused == 0
        # Waiting for required resources: a fresh request asks for them again.
        waiting = request(fixture_registry.host)
        await s.run(waiting)
        await s.run(waiting)
        assert s.responses.stats.reused == 0
        # The bundled example reads its component from a local mirror: never kept.
        local = fnv1.RunFunctionRequest()
        resource.update(local.observed.composite, load(EXAMPLES / "xr.yaml")[0])
        policy = input_from_composition(load(COMPOSITION)[0], "composition")
        local.input.update(policy)
        s.runner.base_dir = EXAMPLES.parent
        for _ in range(3):
            rsp = await s.run(local)
            for k in rsp.requirements.resources:
                local.required_resources[k].CopyFrom(fnv1.Resources())
        await s.run(local)
        assert s.responses.stats.reused == 0
        assert s.responses.stats.stored == 0


async def test_reuse_can_be_turned_off(fixture_registry) -> None:
    s = Served(Clock())
    s.responses = Responses(0)
    async with s:
        req = request(fixture_registry.host)
        await composed(s, req)
        await s.run(req)
        assert s.responses.stats.reused == 0


async def test_stored_answers_are_packed(fixture_registry) -> None:
    """The budget counts packed bytes; what is sent is the answer exactly as computed."""
    async with Served(Clock()) as s:
        req = request(fixture_registry.host)
        first = await composed(s, req)
        snap = s.responses.snapshot()
        assert 0 < snap["packed_bytes"] < snap["payload_bytes"] / 2, snap
        assert snap["bytes"] < snap["payload_bytes"]
        again = await s.run(req)
        assert again == first
