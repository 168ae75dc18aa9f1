"""The reuse key is the content the function reads (function/edge/reads.py), not the bytes or the tag.

Crossplane serializes every request afresh in Go's random map order and sets ``meta.tag`` to a
hash computed before required resources are resolved, so neither the bytes nor the tag name
what the function computes from. These tests prove, first on the projection and then over
gRPC against a real registry: a change to anything the function reads misses; churn it does
not read (``resourceVersion``, ``managedFields``, ``lastTransitionTime``, unrelated status,
another serialization) hits; and two requests sharing a tag with different content are each
answered exactly as if computed. ``meta.ttl`` is chosen: 0 on answers that wait, carry a
Fatal or read a local mirror; at most ``--tag-ttl`` otherwise.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support.examples import COMPOSITION, EXAMPLES, load
from support.goorder import go_order
from support.oci_env import fixture_registry
from test_response_reuse import Clock, Served, composed, fatal, request

from function.cache import Cache
from function.compose import ocmobjects
from function.edge import reads
from function.edge.fn import FunctionRunner
from function.edge.render import input_from_composition
from function.edge.sources import SourceFactory

COMPONENT = ocmobjects.key_component()
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Succeeded",
    "message": "ok",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def base() -> fnv1.RunFunctionRequest:
    req = fnv1.RunFunctionRequest()
    req.meta.tag = "tag-1"
    resource.update(
        req.observed.composite,
        {
            "apiVersion": "sack8s.io/v1alpha1",
            "kind": "XComponentVersion",
            "metadata": {
                "name": "x-1",
                "labels": {"crossplane.io/claim-name": "c"},
                "resourceVersion": "1",
                "managedFields": [{"manager": "crossplane"}],
            },
            "spec": {"component": {"version": "1.0.0"}},
            "status": {
                "component": {"version": "1.0.0"},
                "conditions": [{"type": "Synced", "status": "True"}],
                "images": {"a": "b"},
            },
        },
    )
    resource.update(
        req.observed.resources["namespace-a"],
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "a", "labels": {"sack8s.io/owner": "o"}, "resourceVersion": "7"},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        },
    )
    resource.update(
        req.observed.resources["externalsecret-s"],
        {
            "apiVersion": "external-secrets.io/v1",
            "kind": "ExternalSecret",
            "metadata": {"name": "s", "namespace": "a", "annotations": {"k": "v"}},
            "spec": {"refreshInterval": "1h"},
            "status": {"conditions": [READY], "refreshTime": "2026-01-01T00:00:00Z"},
        },
    )
    resource.update(
        req.observed.resources[COMPONENT],
        {
            "apiVersion": "delivery.ocm.software/v1alpha1",
            "kind": "Component",
            "metadata": {"name": "c", "generation": 2, "uid": "u"},
            "spec": {"semver": "1.0.0"},
            "status": {
                "conditions": [READY],
                "observedGeneration": 2,
                "component": {"version": "1.0.0", "digest": {"value": "aa"}},
            },
        },
    )
    req.required_resources["ns"].items.add()
    resource.update(
        req.required_resources["ns"].items[0],
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {}}},
    )
    req.input.update({"registries": [{"host": "r"}]})
    req.context.update({"k": "v"})
    req.credentials["c"].credential_data.data["u"] = b"1"
    resource.update(req.desired.resources["other"], {"apiVersion": "v1", "kind": "ConfigMap"})
    return req


def _set(path: str, value: Any, last: str = "") -> Callable[[fnv1.RunFunctionRequest], None]:
    """A change at ``path`` (``<observed key>``/``xr``/``required``, ``:``, dotted fields;
    ``last`` for a final key holding dots).
    """
    where, _, dotted = path.partition(":")

    def change(req: fnv1.RunFunctionRequest) -> None:
        if where == "xr":
            s = req.observed.composite.resource
        elif where == "required":
            s = req.required_resources["ns"].items[0].resource
        else:
            s = req.observed.resources[where].resource
        *parents, final = [*dotted.split("."), *([last] if last else [])]
        for p in parents:
            s = s[p] if not p.isdigit() else s[int(p)]  # type: ignore[index]
        s[final] = value  # type: ignore[index]

    return change


UNREAD: dict[str, Callable[[fnv1.RunFunctionRequest], None]] = {
    "the XR's resourceVersion": _set("xr:metadata.resourceVersion", "2"),
    "the XR's managedFields": _set("xr:metadata.managedFields", [{"manager": "kubectl"}]),
    "the XR's conditions": _set("xr:status.conditions", [{"type": "Ready", "status": "False"}]),
    "an XR status field not read back": _set("xr:status.images", {"a": "c"}),
    "an observed resourceVersion": _set("namespace-a:metadata.resourceVersion", "8"),
    "an observed Namespace's status": _set("namespace-a:status.phase", "Terminating"),
    "an observed spec that is not read": _set("externalsecret-s:spec.refreshInterval", "2h"),
    "unrelated status of an observed object": _set(
        "externalsecret-s:status.refreshTime", "2026-02-01T00:00:00Z"
    ),
    "a condition's lastTransitionTime": _set(
        "externalsecret-s:status.conditions.0.lastTransitionTime", "2026-02-01T00:00:00Z"
    ),
    "the OCM Component's uid": _set(f"{COMPONENT}:metadata.uid", "v"),
    "a required resource's resourceVersion": _set("required:metadata.resourceVersion", "9"),
}

READ: dict[str, Callable[[fnv1.RunFunctionRequest], None]] = {
    "the XR's spec": _set("xr:spec.component.version", "1.1.0"),
    "the XR's labels": _set("xr:metadata.labels", "d", "crossplane.io/claim-name"),
    "the XR's sticky version": _set("xr:status.component.version", "1.1.0"),
    "an observed object's readiness": _set("externalsecret-s:status.conditions.0.status", "False"),
    "an observed Ready message": _set("externalsecret-s:status.conditions.0.message", "other"),
    "an observed object's ownership label": _set(
        "namespace-a:metadata.labels", "p", "sack8s.io/owner"
    ),
    "an observed object's annotation": _set("externalsecret-s:metadata.annotations.k", "w"),
    "an observed object's controller reference": _set(
        "namespace-a:metadata.ownerReferences", [{"controller": True, "uid": "x"}]
    ),
    "the OCM Component's digest": _set(f"{COMPONENT}:status.component.digest.value", "bb"),
    "the OCM Component's generation": _set(f"{COMPONENT}:metadata.generation", 3),
    "the OCM Component's spec": _set(f"{COMPONENT}:spec.semver", "1.1.0"),
    "a required resource's labels": _set("required:metadata.labels.team", "t"),
    "an observed object disappears": lambda r: r.observed.resources.pop("namespace-a"),
    "a required resource is resolved differently": lambda r: r.required_resources["ns"].ClearField(
        "items"
    ),
    "the input": lambda r: r.input.update({"registries": [{"host": "s"}]}),
    "the context": lambda r: r.context.update({"k": "w"}),
    "a credential": lambda r: r.credentials["c"].credential_data.data.update({"u": b"2"}),
    "an earlier step's desired state": lambda r: resource.update(
        r.desired.resources["other"], {"metadata": {"name": "n"}}
    ),
    "the capabilities": lambda r: r.meta.capabilities.append(1),
}


def key_of(req: fnv1.RunFunctionRequest) -> bytes:
    return reads.key(reads.view(req))


@pytest.mark.parametrize("change", sorted(UNREAD))
def test_churn_the_function_does_not_read_keeps_the_key(change: str) -> None:
    req = base()
    changed = copy.deepcopy(req)
    UNREAD[change](changed)
    assert changed != req, f"{change}: the test changed nothing"
    assert key_of(changed) == key_of(req), change


@pytest.mark.parametrize("change", sorted(READ))
def test_a_change_to_what_the_function_reads_changes_the_key(change: str) -> None:
    req = base()
    changed = copy.deepcopy(req)
    READ[change](changed)
    assert changed != req, f"{change}: the test changed nothing"
    assert key_of(changed) != key_of(req), change


def test_the_key_ignores_bytes_order_and_tag() -> None:
    req = base()
    rng = random.Random(33)
    wires = {go_order(req, rng) for _ in range(20)}
    assert len(wires) > 10  # Crossplane's bytes differ call by call ...
    keys = {key_of(fnv1.RunFunctionRequest.FromString(w)) for w in wires}
    other_tag = copy.deepcopy(req)
    other_tag.meta.tag = "tag-2"
    assert keys == {key_of(req)} == {key_of(other_tag)}  # ... the content does not


def test_the_view_keeps_what_the_core_reads() -> None:
    """The core runs on the view: what it reads must be there, whole."""
    v = reads.view(base())
    comp = resource.struct_to_dict(v.observed.resources[COMPONENT].resource)
    assert comp["status"]["component"]["digest"] == {"value": "aa"}
    assert comp["metadata"]["generation"] == 2
    assert comp["spec"] == {"semver": "1.0.0"}
    es = resource.struct_to_dict(v.observed.resources["externalsecret-s"].resource)
    assert es["status"] == {"conditions": [{k: v for k, v in READY.items() if "Time" not in k}]}
    assert es["metadata"]["annotations"] == {"k": "v"}
    xr = resource.struct_to_dict(v.observed.composite.resource)
    assert xr["status"] == {"component": {"version": "1.0.0"}}
    assert "resourceVersion" not in xr["metadata"]
    assert v.meta.tag == "tag-1"


# --------------------------------------------------------------------------- over gRPC


def _churned(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionRequest:
    """``req`` as the next poll sends it: a resourceVersion bump, a new lastTransitionTime."""
    out = copy.deepcopy(req)
    out.meta.tag = "next-poll"
    out.observed.composite.resource["metadata"]["resourceVersion"] = "42"
    for r in out.observed.resources.values():
        r.resource["metadata"]["resourceVersion"] = "43"
        r.resource["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
        for c in r.resource["status"]["conditions"]:
            c["lastTransitionTime"] = "2026-06-01T00:00:00Z"
    return out


def _observe(req: fnv1.RunFunctionRequest, rsp: fnv1.RunFunctionResponse) -> None:
    """What Crossplane observes once the answer is applied: every object, Ready."""
    for k, r in rsp.desired.resources.items():
        obj = resource.struct_to_dict(r.resource)
        obj.setdefault("metadata", {})["resourceVersion"] = "1"
        obj["status"] = {"conditions": [READY]}
        resource.update(req.observed.resources[k], obj)


async def _direct(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    rsp, _ = await FunctionRunner(sources=SourceFactory(cache=Cache())).answer(copy.deepcopy(req))
    return rsp


def _sans_ttl(rsp: fnv1.RunFunctionResponse) -> fnv1.RunFunctionResponse:
    out = copy.deepcopy(rsp)
    out.meta.ClearField("ttl")
    return out


async def test_crossplane_bytes_and_churn_reuse_the_answer(fixture_registry) -> None:
    async with Served(Clock()) as s:
        req = request(fixture_registry.host)
        _observe(req, await composed(s, req))
        first = await s.run(req)
        assert fatal(first) is None
        reused = s.responses.stats.reused
        stored = s.responses.stats.stored
        churned = _churned(req)
        # sent as Crossplane sends it: a fresh Go-order serialization, another tag
        wire = go_order(churned, random.Random(7))
        assert wire != churned.SerializeToString()
        call = s.channel.unary_unary(
            "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction",
            request_serializer=None,
            response_deserializer=fnv1.RunFunctionResponse.FromString,
        )
        again = await call(wire, timeout=60)
        assert s.responses.stats.reused == reused + 1
        assert s.responses.stats.stored == stored  # nothing new stored for the same content
        assert again.meta.tag == "next-poll"  # the answer names this request
        assert 0 < again.meta.ttl.seconds <= 60
        assert _sans_ttl(again) == _sans_ttl(await _direct(churned))


async def test_one_tag_two_contents_each_answered_as_computed(fixture_registry) -> None:
    """Crossplane calls again under the same tag with the required resources filled in."""
    async with Served(Clock()) as s:
        req = request(fixture_registry.host)
        asked = await s.run(req)  # asks for required resources
        assert asked.requirements.resources
        assert asked.meta.ttl.seconds == 0  # waiting: Crossplane must call again
        resolved = copy.deepcopy(req)  # same tag, different content
        for k in asked.requirements.resources:
            resolved.required_resources[k].CopyFrom(fnv1.Resources())
        got = await s.run(resolved)
        assert _sans_ttl(got) == _sans_ttl(await _direct(resolved))
        assert got.desired.resources  # composed, not the stored waiting answer
        # and the other way round: the first content again, same tag, is not the composed answer
        again = await s.run(req)
        assert _sans_ttl(again) == _sans_ttl(await _direct(req))
        assert not again.desired.resources


async def test_a_read_status_change_is_computed_anew(fixture_registry) -> None:
    async with Served(Clock()) as s:
        req = request(fixture_registry.host)
        _observe(req, await composed(s, req))
        await s.run(req)
        reused = s.responses.stats.reused
        changed = copy.deepcopy(req)
        key = sorted(changed.observed.resources)[0]
        changed.observed.resources[key].resource["status"]["conditions"][0]["status"] = "False"
        got = await s.run(changed)
        assert s.responses.stats.reused == reused
        assert _sans_ttl(got) == _sans_ttl(await _direct(changed))


async def test_ttl_is_chosen(fixture_registry) -> None:
    async with Served(Clock()) as s:
        ok = await composed(s, request(fixture_registry.host))
        assert 0 < ok.meta.ttl.seconds <= 60  # never past the tag facts (--tag-ttl 60 here)
        bad = request("127.0.0.1:1")
        bad.input.update({"registries": [{"host": "127.0.0.1:1", "plainHTTP": True}]})
        for _ in range(3):
            rsp = await s.run(bad)
            for k in rsp.requirements.resources:
                bad.required_resources[k].CopyFrom(fnv1.Resources())
        assert fatal(rsp) and rsp.meta.ttl.seconds == 0
        local = fnv1.RunFunctionRequest()
        resource.update(local.observed.composite, load(EXAMPLES / "xr.yaml")[0])
        local.input.update(input_from_composition(load(COMPOSITION)[0], "composition"))
        s.runner.base_dir = EXAMPLES.parent
        for _ in range(3):
            rsp = await s.run(local)
            for k in rsp.requirements.resources:
                local.required_resources[k].CopyFrom(fnv1.Resources())
        assert rsp.desired.resources and fatal(rsp) is None
        assert rsp.meta.ttl.seconds == 0  # read a local mirror: not reusable


def test_what_is_deleted_by_name_is_never_a_read_field() -> None:
    """``reads._only`` deletes the usual churn by name before it looks for anything else: a
    name there that the function reads would be pruned from the view unseen."""
    for allowed, churn in (
        (reads._TOP, reads._TOP_CHURN),
        (reads._TOP_SPEC, ()),
        (reads._META, reads._META_CHURN),
        (reads._META_GEN, reads._META_CHURN_GEN),
    ):
        assert not set(allowed) & set(churn), (allowed, churn)
    assert "spec" in reads._TOP_SPEC and "generation" in reads._META_GEN
