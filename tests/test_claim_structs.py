"""A claim's composed objects kept packed (function/edge/structs.py ``ClaimStructs``, issue 33).

A fleet larger than memo table ``structs`` composes each claim with its objects evicted; the
claim's serialized entries are also kept compressed together under the claim. These tests
prove the packed form only ever gives what building the Struct gives: equal bytes, found by
exact content only, rewritten when the set of entries changes and not otherwise -- and, over
the whole runner against a real registry, an answer from packed entries equals one computed
with no memo at all.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import struct_pb2
from support.oci_env import fixture_registry
from test_reuse_key import READY, request

from function.cache import Cache, Memos
from function.edge import structs
from function.edge.fn import FunctionRunner
from function.edge.sources import SourceFactory
from function.edge.structs import ClaimStructs, desired_field, resource_entry, struct_bytes


def objects(name: str, replicas: int = 2) -> dict[str, dict[str, Any]]:
    """Three objects of one claim: nested maps, a list, every scalar kind a Struct holds."""
    return {
        f"namespace-{name}": {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"sack8s.io/owner": name + "x"}},
        },
        f"deploy-{name}": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": name},
            "spec": {
                "replicas": replicas,
                "paused": False,
                "ratio": 0.25,
                "selector": None,
                "template": {"spec": {"containers": [{"name": "app", "args": ["a", "b"]}]}},
            },
        },
        f"status-{name}": {"status": {"ok": True, "notes": [], "n": 1e300}},
    }


def answer(
    group: tuple[str, ...],
    objs: dict[str, dict[str, Any]],
    memos: Memos | None,
    family: str | None = "component-digest",
) -> bytes:
    """The desired field of an answer, as fn.py writes it (objects, then the XR's status)."""
    claim = ClaimStructs(group, memos, family)
    entries = [claim.entry(k, objs[k], fnv1.READY_TRUE) for k in sorted(objs)]
    status = claim.struct({"status": {"phase": group[-1]}})
    claim.close()
    return desired_field(entries) + status


def state_of(objs: dict[str, dict[str, Any]]) -> fnv1.State:
    """The same objects as the SDK builds them (``resource.update``, field by field)."""
    out = fnv1.State()
    for k in sorted(objs):
        resource.update(out.resources[k], objs[k])
        out.resources[k].ready = fnv1.READY_TRUE
    return out


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every Struct built (not found in a memo) by the structs module."""
    seen: list[Any] = []
    real = structs.struct_bytes

    def counting(obj: Any, memos: Memos | None = None) -> bytes:
        seen.append(obj)
        return real(obj, memos)

    monkeypatch.setattr(structs, "struct_bytes", counting)
    return seen


def test_entries_are_what_the_sdk_builds() -> None:
    objs = objects("team-a")
    for memos in (Memos(), None):
        claim = ClaimStructs(("claim", "team-a", "x"), memos)
        got = fnv1.RunFunctionResponse.FromString(
            desired_field([claim.entry(k, objs[k], fnv1.READY_TRUE) for k in sorted(objs)])
        )
        assert got.desired == state_of(objs)
        want = struct_pb2.Struct()
        want.update({"a": [1, "b", None]})
        assert struct_pb2.Struct.FromString(claim.struct({"a": [1, "b", None]})) == want
        assert [claim.entry(k, objs[k], 1) for k in sorted(objs)] == [
            resource_entry(k, struct_bytes(objs[k]), 1) for k in sorted(objs)
        ]


def test_an_evicted_claim_is_answered_from_its_packed_entries(builds: list[Any]) -> None:
    memos = Memos()
    group = ("claim", "team-a", "app")
    first = answer(group, objects("team-a"), memos)
    assert len(builds) == 4  # three objects and the status, built once
    memos.tables["structs"].clear()  # the fleet pushed them out one by one
    hits = memos.tables["packed_structs"].stats.hits
    again = answer(group, objects("team-a"), memos)
    assert again == first
    assert len(builds) == 4  # nothing built again: one decompression
    assert memos.tables["packed_structs"].stats.hits == hits + 1
    assert again == answer(group, objects("team-a"), None)  # what no memo at all gives


def test_changed_content_is_built_and_the_group_rewritten(builds: list[Any]) -> None:
    memos = Memos()
    group = ("claim", "team-a", "app")
    table = memos.tables["packed_structs"]
    answer(group, objects("team-a"), memos)
    held = table.peek(group)
    answer(group, objects("team-a"), memos)
    assert table.peek(group) is held  # the same entries: not written again
    memos.tables["structs"].clear()
    n = len(builds)
    changed = answer(group, objects("team-a", replicas=3), memos)
    assert len(builds) == n + 1  # only the changed object is built
    assert changed == answer(group, objects("team-a", replicas=3), None)
    assert table.peek(group) is not held  # its set of entries changed: rewritten
    memos.tables["structs"].clear()
    back = answer(group, objects("team-a"), memos)  # the old content: built, never stale
    assert back == answer(group, objects("team-a"), None)


def test_another_claims_group_gives_nothing_it_does_not_hold(builds: list[Any]) -> None:
    memos = Memos()
    answer(("claim", "team-a", "app"), objects("team-a"), memos)
    memos.tables["structs"].clear()
    n = len(builds)
    other = answer(("claim", "team-b", "app"), objects("team-b"), memos)
    assert len(builds) == n + 4  # its own content, built
    assert other == answer(("claim", "team-b", "app"), objects("team-b"), None)


def test_claims_of_one_component_are_packed_against_the_first(builds: list[Any]) -> None:
    sizes = {}
    for family in ("component-digest", None):
        memos = Memos()
        for team in ("team-a", "team-b"):
            answer(("claim", team, "app"), objects(team), memos, family)
        sizes[family] = len(memos.tables["packed_structs"].peek(("claim", "team-b", "app"))[2])
        memos.tables["structs"].clear()
        want = answer(("claim", "team-b", "app"), objects("team-b"), None)
        n = len(builds)
        assert answer(("claim", "team-b", "app"), objects("team-b"), memos, family) == want
        assert len(builds) == n  # unpacked (against the reference), nothing built
    # the second claim is mostly the first's text: far smaller against its dictionary
    assert sizes["component-digest"] < 0.6 * sizes[None]


def test_a_lost_reference_costs_a_build_never_a_wrong_answer(builds: list[Any]) -> None:
    memos = Memos()
    for team in ("team-a", "team-b"):
        answer(("claim", team, "app"), objects(team), memos)
    memos.tables["structs"].clear()
    memos.tables["struct_dictionaries"].clear()  # evicted: team-b's blob cannot be read
    answer(("claim", "team-c", "app"), objects("team-c"), memos)  # a new reference
    memos.tables["structs"].clear()
    want = answer(("claim", "team-b", "app"), objects("team-b"), None)
    n = len(builds)
    got = answer(("claim", "team-b", "app"), objects("team-b"), memos)
    assert got == want
    assert len(builds) == n + 4  # built again, and packed against the new reference
    memos.tables["structs"].clear()
    assert answer(("claim", "team-b", "app"), objects("team-b"), memos) == got
    assert len(builds) == n + 4


def test_the_packed_table_is_bounded() -> None:
    memos = Memos(max_bytes=2**20)
    table = memos.tables["packed_structs"]
    for i in range(400):
        answer(("claim", f"team-{i}", "app"), objects(f"team-{i}"), memos)
    assert 0 < table.size_bytes <= table.max_bytes
    assert len(table) < 400


async def _composed(
    runner: FunctionRunner, req: fnv1.RunFunctionRequest
) -> fnv1.RunFunctionResponse:
    """Answer until composed (the first rounds ask for required resources)."""
    for _ in range(3):
        rsp, _ = await runner.answer(copy.deepcopy(req))
        if rsp.desired.resources:
            return rsp
        for k in rsp.requirements.resources:
            req.required_resources[k].CopyFrom(fnv1.Resources())
    raise AssertionError("never composed")


@pytest.mark.registry
async def test_an_answer_from_packed_entries_equals_one_computed_without_memos(
    fixture_registry: Any,
) -> None:
    req = request(fixture_registry.host)
    runner = FunctionRunner(sources=SourceFactory(cache=Cache()))
    rsp = await _composed(runner, req)
    for k, r in rsp.desired.resources.items():  # observed, Ready: the steady state
        obj = resource.struct_to_dict(r.resource)
        obj["status"] = {"conditions": [READY]}
        resource.update(req.observed.resources[k], obj)
    steady = await _composed(runner, req)
    whole = await _composed(runner, req)  # the same again: answered whole (claim_answers)
    assert runner.memos.tables["claim_answers"].stats.hits > 0
    runner.memos.tables["structs"].clear()
    runner.memos.tables["claim_answers"].clear()
    hits = runner.memos.tables["packed_structs"].stats.hits
    packed = await _composed(runner, req)
    assert runner.memos.tables["packed_structs"].stats.hits > hits
    fresh = FunctionRunner(sources=SourceFactory(cache=Cache()), memos=Memos(max_bytes=0))
    computed = await _composed(fresh, req)
    assert len(packed.desired.resources) > 10
    assert packed.desired == computed.desired == steady.desired == whole.desired
    assert packed.SerializeToString() == steady.SerializeToString()


def test_a_claim_answered_again_whole_equals_built_and_misses_on_any_change(builds) -> None:
    """``ClaimStructs.answer``: the same objects, readiness and status again are given from
    the claim's last answer (nothing built, the same bytes); an object, a ready value or the
    status changed is built as before, equal to what the SDK builds."""
    memos = Memos()
    group = ("claim", "team-a", "one", "one-x")
    objs = objects("one")

    def run(objs: dict[str, dict[str, Any]], ready: int, phase: str) -> tuple[bytes, bytes]:
        claim = ClaimStructs(group, memos, "component-digest")
        entries, status = claim.answer(
            [(k, objs[k], ready) for k in sorted(objs)], {"phase": phase}
        )
        return desired_field(entries), status

    first = run(objs, fnv1.READY_TRUE, "a")
    built = len(builds)
    assert built > 0
    assert run(objects("one"), fnv1.READY_TRUE, "a") == first  # as the core builds them
    assert len(builds) == built  # answered whole: nothing built
    for changed, ready, phase in (
        (objects("one", replicas=3), fnv1.READY_TRUE, "a"),
        (objs, fnv1.READY_FALSE, "a"),
        (objs, fnv1.READY_TRUE, "b"),
        (objs, fnv1.READY_TRUE, "a"),  # back to the first: still equal to what is built
    ):
        entries, status = run(changed, ready, phase)
        got = fnv1.RunFunctionResponse()
        got.MergeFromString(entries)
        want = state_of(changed)
        for k in want.resources:
            want.resources[k].ready = ready
        assert got.desired.resources == want.resources
        xr = struct_pb2.Struct()
        xr.MergeFromString(status)
        assert resource.struct_to_dict(xr) == {"status": {"phase": phase}}
