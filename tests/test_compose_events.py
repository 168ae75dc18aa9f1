"""Events that stay readable (issue 19 item 8): a finding is sent once, and kept in status.

The bundled Helm example, given two inline values no rule reads (and its schema forbids,
reported as Warnings under ``schemaViolations: Warning``), yields ConfigData warnings and an
``UnusedValues`` (the bundled ConfigData itself is clean since issue 20). Crossplane calls the
function about once a minute;
the warnings must be events only when they first appear or change, and stay visible in
``status.warnings`` and the ``ConfigDataWarnings`` condition.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from support.settle import converge, with_status

from function.compose.events import Note, to_emit
from function.compose.readiness import Blocker
from function.edge.render import input_from_composition, load_docs, render

REPO = Path(__file__).resolve().parents[1]


def load():
    xr = load_docs([REPO / "examples/xr.yaml"])[0]
    # values no configuration rule consumes: a Warning on every reconcile, the case at hand
    xr["spec"]["values"]["inline"].update({"colour": "blue", "tier": "gold"})
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    # the ConfigData schema forbids unknown values: reported, not refused, while teams migrate
    policy["configData"] = {"schemaViolations": "Warning"}
    return xr, policy


def observed():
    return load_docs([REPO / "examples/observed/helm"])


def warnings(out) -> list[str]:
    return [r.message for r in out.results if r.severity == fnv1.SEVERITY_WARNING]


def condition(out, kind: str) -> dict:
    return next(c for c in out.xr["status"]["conditions"] if c["type"] == kind)


def test_a_warning_is_sent_once_and_kept_in_status() -> None:
    xr, policy = load()
    first = asyncio.run(render(xr, policy, observed=observed()))
    sent = warnings(first)
    reasons = [r.reason for r in first.results if r.severity == fnv1.SEVERITY_WARNING]
    assert reasons.count("UnusedValues") == 1 and "ConfigDataWarning" in reasons
    listed = first.xr["status"]["warnings"]
    assert [w["message"] for w in listed] == sent and [w["reason"] for w in listed] == reasons
    cond = condition(first, "ConfigDataWarnings")
    assert (cond["status"], cond["reason"]) == ("True", "Found") and sent[0] in cond["message"]

    again = asyncio.run(render(with_status(xr, first), policy, observed=observed()))
    assert warnings(again) == [], "re-sent although the XR status shows it was reported"
    assert again.xr["status"]["warnings"] == listed
    assert condition(again, "ConfigDataWarnings")["status"] == "True"
    assert (
        again.yaml()
        == asyncio.run(render(with_status(xr, first), policy, observed=observed())).yaml()
    )


def test_a_changed_warning_is_sent_and_a_gone_one_clears() -> None:
    xr, policy = load()
    first = asyncio.run(render(xr, policy, observed=observed()))
    earlier = with_status(xr, first)
    earlier["status"]["warnings"][0]["message"] = "an older wording"
    out = asyncio.run(render(earlier, policy, observed=observed()))
    assert warnings(out) == [first.xr["status"]["warnings"][0]["message"]]  # only what changed

    # The Kustomize example has no finding, though the last reconcile listed some: the list
    # empties and the condition clears, without an event.
    kustomize = load_docs([REPO / "examples/xr-kustomize.yaml"])[0]
    kustomize["status"] = copy.deepcopy(earlier["status"])
    out = asyncio.run(
        render(kustomize, policy, observed=load_docs([REPO / "examples/observed/kustomize"]))
    )
    assert out.xr["status"]["warnings"] == [] and warnings(out) == []
    cond = condition(out, "ConfigDataWarnings")
    assert (cond["status"], cond["reason"]) == ("False", "None")


def test_waiting_notes_are_sent_when_what_blocks_changes() -> None:
    xr, policy = load()
    renders, _ = asyncio.run(converge(xr, policy))
    # Each reconcile of the first deployment blocks on something new: each note once.
    normal = [
        [r.reason for r in out.results if r.severity == fnv1.SEVERITY_NORMAL] for out in renders
    ]
    assert normal[0] == ["WaitingForNamespace"]
    # The same blocker as the last reconcile wrote: nothing re-sent.
    first = renders[0]
    again = asyncio.run(render(with_status(xr, first), policy))
    assert [r for r in again.results if r.severity == fnv1.SEVERITY_NORMAL] == []
    assert again.xr["status"]["blockedBy"] == first.xr["status"]["blockedBy"]


def test_emission_is_a_pure_function_of_the_observed_status() -> None:
    notes = [
        Note("Warning", "ConfigDataWarning", "a"),
        Note("Warning", "ConfigDataWarning", "a"),
        Note("Normal", "WaitingForOCMComponent", "w"),
    ]
    blocked = Blocker("Component", "podinfo", "sack8s-podinfo", "WaitingForOCMComponent", "x")
    assert to_emit(notes, blocked, {}) == [notes[0], notes[2]]  # duplicates once
    before = {
        "warnings": [{"reason": "ConfigDataWarning", "message": "a"}],
        "blockedBy": {
            "kind": "Component",
            "name": "podinfo",
            "namespace": "sack8s-podinfo",
            "reason": "WaitingForOCMComponent",
            "message": "older",
        },
    }
    assert to_emit(notes, blocked, before) == []
    assert to_emit(notes, blocked, {"warnings": "garbage", "blockedBy": ["x"]}) == [
        notes[0],
        notes[2],
    ]
