"""What the function composes is what ESO, Flux and the OCM controller keep (issue 19, items 4, 7).

Durations are spelled as Go's ``time.Duration.String()`` prints them, because ESO and the OCM
controller write them back that way (``reference/observed.md`` items 4 and 8); the e2e suite
checks the same against the real ESO and Flux. The Secrets ESO creates carry the claim's labels,
and two ``data`` entries with one ``secretKey`` are one Fatal.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from function.compose import durations
from function.edge.render import claim_to_xr, input_from_composition, load_docs, render
from function.errors import InvalidPolicy

REPO = Path(__file__).resolve().parents[1]
DURATION_FIELDS = {"interval", "retryInterval", "timeout", "refreshInterval"}

# Go 1.26: fmt.Println(time.ParseDuration(in)) for each, by hand on the Go playground's rules.
GO_SPELLING = [
    ("10m", "10m0s"),
    ("1h", "1h0m0s"),
    ("30s", "30s"),
    ("90s", "1m30s"),
    ("1m30s", "1m30s"),
    ("1.5h", "1h30m0s"),
    ("2h45m", "2h45m0s"),
    ("72h", "72h0m0s"),
    ("1h0m0s", "1h0m0s"),
    ("0", "0s"),
    ("500ms", "500ms"),
    ("1.5s", "1.5s"),
    ("1001ms", "1.001s"),
    (".5s", "500ms"),
    ("100us", "100µs"),
    ("100µs", "100µs"),
    ("1ns", "1ns"),
    ("1h1ns", "1h0m0.000000001s"),
    ("-1m", "-1m0s"),
    ("+5m", "5m0s"),
]


@pytest.mark.parametrize("given_,go", GO_SPELLING)
def test_go_spelling(given_: str, go: str) -> None:
    assert durations.go_string(durations.parse(given_)) == go


@pytest.mark.parametrize("bad", ["", "10", "ten", "1d", "1.s5", "s", "1h-5m", "9999999999h", "1 h"])
def test_not_a_go_duration(bad: str) -> None:
    with pytest.raises(ValueError):
        durations.parse(bad)


@given(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1))
def test_format_then_parse_is_the_same_duration(ns: int) -> None:
    text = durations.go_string(ns)
    assert durations.parse(text) == ns
    assert durations.go_string(durations.parse(text)) == text  # canonical is a fixed point


@pytest.mark.parametrize(
    "value,message",
    [
        ("ten minutes", "not a duration"),
        ("0s", "positive"),
        ("-5m", "positive"),
        ("500us", "millisecond"),
    ],
)
def test_policy_duration_refused_naming_the_field(value: str, message: str) -> None:
    with pytest.raises(InvalidPolicy) as e:
        durations.canonical(value, "flux.interval")
    assert e.value.where == "flux.interval" and message in e.value.message


# ------------------------------------------------------------------------- composed output


def _load(xr_file: str, composition: str = "examples/composition.yaml"):
    xr = claim_to_xr(load_docs([REPO / xr_file])[0])
    policy = input_from_composition(load_docs([REPO / composition])[0], composition)
    return xr, policy


def _render(xr: dict, policy: dict, **kw: Any):
    out = asyncio.run(render(xr, policy, **kw))
    assert out.fatal is None, out.fatal.message if out.fatal else ""
    return out


def _durations(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in DURATION_FIELDS and isinstance(v, str):
                yield f"{path}.{k}", v
            else:
                yield from _durations(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _durations(v, f"{path}[{i}]")


EXAMPLES = [
    ("examples/xr.yaml", "examples/composition.yaml", "helm"),
    ("examples/xr-kustomize.yaml", "examples/composition.yaml", "kustomize"),
    ("examples/claim.yaml", "examples/composition-claim.yaml", "claim"),
]


@pytest.mark.parametrize("xr_file,composition,observed", EXAMPLES)
def test_every_composed_duration_is_in_go_spelling(
    xr_file: str, composition: str, observed
) -> None:
    xr, policy = _load(xr_file, composition)
    kw: dict[str, Any] = {"observed": load_docs([REPO / "examples/observed" / observed])}
    if observed == "claim":
        kw["required"] = load_docs([REPO / "examples/required"])
    found = [
        (o["kind"], path, v)
        for o in _render(xr, policy, **kw).resources
        for path, v in _durations(o.get("spec") or {}, "spec")
    ]
    kinds = {k for k, _, _ in found}
    assert {"ExternalSecret", "Component", "OCIRepository"} <= kinds
    bad = [(k, p, v) for k, p, v in found if durations.go_string(durations.parse(v)) != v]
    assert not bad, bad


def test_policy_durations_are_normalised() -> None:
    xr, policy = _load("examples/xr.yaml")
    policy = copy.deepcopy(policy)
    policy["flux"] = {"interval": "90s", "sourceInterval": "1.5h", "timeout": "300s"}
    policy["ocm"] = {**policy.get("ocm", {}), "interval": "3600s"}
    got = {
        o["kind"]: o.get("spec") or {}
        for o in _render(
            xr, policy, observed=load_docs([REPO / "examples/observed/helm"])
        ).resources
    }
    assert got["HelmRelease"]["interval"] == "1m30s" and got["HelmRelease"]["timeout"] == "5m0s"
    assert got["OCIRepository"]["interval"] == "1h30m0s"
    assert got["Component"]["interval"] == "1h0m0s" and got["Repository"]["interval"] == "1h0m0s"


def test_every_secret_eso_creates_carries_the_claims_labels() -> None:
    xr, policy = _load("examples/claim.yaml", "examples/composition-claim.yaml")
    out = _render(
        xr,
        policy,
        required=load_docs([REPO / "examples/required"]),
        observed=load_docs([REPO / "examples/observed/claim"]),
    )
    secrets = [o for o in out.resources if o["kind"] == "ExternalSecret"]
    assert secrets
    for es in secrets:
        labels = es["spec"]["target"]["template"]["metadata"]["labels"]
        assert labels == es["metadata"]["labels"], es["metadata"]["name"]
        assert (
            labels["sack8s.io/claim-namespace"] == "team-a"
            and labels["sack8s.io/claim-name"] == "podinfo"
        )
