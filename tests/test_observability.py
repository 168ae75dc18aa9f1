"""Observability (issue 12, requirement 6): Prometheus metrics and request-scoped structured logs.

* ``function/edge/metrics.py``: requests by outcome, duration, results by severity and reason,
  registry latency (real registry), cache statistics; exposed only with
  ``--metrics-address`` / ``SACK8S_METRICS_ADDRESS``.
* Every log line written while a request runs -- by ``fn.py`` itself, by deeper modules
  through structlog or through stdlib ``logging`` -- carries the XR name and the claim.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import structlog
from crossplane.function import logging as sdklogging
from hypothesis_profiles import as_claim, example
from support.oci_env import fault_proxy, fixture_registry, proxy
from support.registry import free_port
from test_soak import Server, claim, drive, request

from function.cache import Cache
from function.edge import metrics
from function.edge.fn import FunctionRunner
from function.edge.render import render
from function.edge.sources import SourceFactory


def sample(text: str, name: str, labels: dict[str, str] | None = None) -> float:
    """The value of ``name{labels}`` in a Prometheus text exposition (0 when absent); label order free."""
    want = dict(labels or {})
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([0-9.e+-]+|NaN|[+-]Inf)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if got == want:
            return float(m.group(3))
    return 0.0


def scrape() -> str:
    return metrics.exposition().decode()


def runner() -> FunctionRunner:
    return FunctionRunner(sources=SourceFactory(cache=Cache()))


def test_request_and_result_counters_in_process() -> None:
    sdklogging.configure(sdklogging.Level.DISABLED)
    before = scrape()
    xr, policy = example()
    r = runner()
    assert asyncio.run(render(copy.deepcopy(xr), policy, runner=r)).fatal is None
    bad = copy.deepcopy(xr)
    bad["spec"]["namespaces"][0]["name"] = "kube-system"
    assert asyncio.run(render(bad, policy, runner=r)).fatal is not None
    after = scrape()

    def delta(name: str, labels: dict[str, str] | None = None) -> float:
        return sample(after, name, labels) - sample(before, name, labels)

    assert (
        delta("sack8s_requests_total", {"outcome": "waiting"}) == 1
    )  # the first round, before required resources
    assert delta("sack8s_requests_total", {"outcome": "composed"}) == 1
    assert delta("sack8s_requests_total", {"outcome": "fatal"}) == 1
    assert delta("sack8s_results_total", {"severity": "Fatal", "reason": "PolicyViolation"}) == 1
    assert (
        delta("sack8s_results_total", {"severity": "Normal", "reason": "WaitingForNamespace"}) == 1
    )
    assert delta("sack8s_request_duration_seconds_count") == 3


def test_cache_statistics_and_registry_latency_from_the_real_registry(proxy) -> None:
    sdklogging.configure(sdklogging.Level.DISABLED)
    xr, policy = example()
    xr["spec"]["component"]["repository"] = f"oci::http://{proxy.host}/source"
    xr["spec"]["component"]["version"] = "6.2.0"
    policy["registries"] = [{"host": proxy.host, "plainHTTP": True}]
    policy["imageRegistries"] = [
        {"host": "127.0.0.1:5000", "pullCredential": True}
    ]  # the fixture's images
    policy["mirrors"] = []
    policy["configData"] = {"imagePairs": "Warning"}  # the fixture registry's ConfigData (issue 20)
    # The cache counters sum over the caches alive: collect other tests' garbage first, or one
    # collected mid-test takes its hits out of the sum and the difference below can be 0.
    gc.collect()
    before = scrape()
    r = runner()
    assert asyncio.run(render(copy.deepcopy(xr), policy, runner=r)).fatal is None
    assert (
        asyncio.run(render(copy.deepcopy(xr), policy, runner=r)).fatal is None
    )  # warm: cache hits
    proxy.fault("500")
    assert asyncio.run(render(copy.deepcopy(xr), policy, runner=runner())).fatal is not None
    after = scrape()
    ok = sample(
        after, "sack8s_registry_request_duration_seconds_count", {"outcome": "ok"}
    ) - sample(before, "sack8s_registry_request_duration_seconds_count", {"outcome": "ok"})
    err = sample(
        after, "sack8s_registry_request_duration_seconds_count", {"outcome": "error"}
    ) - sample(before, "sack8s_registry_request_duration_seconds_count", {"outcome": "error"})
    assert ok >= 3 and err >= 1, (ok, err)
    assert sample(after, "sack8s_cache_hits_total") > sample(before, "sack8s_cache_hits_total")
    assert sample(after, "sack8s_cache_registry_requests_total") >= len(proxy.requests) > 0
    assert (
        sample(
            after,
            "sack8s_results_total",
            {"severity": "Fatal", "reason": "ComponentSourceUnavailable"},
        )
        >= 1
    )


def test_label_values_are_bounded() -> None:
    """Reasons come from error classes, never from user text: hostile claims add no label values."""
    sdklogging.configure(sdklogging.Level.DISABLED)
    xr, policy = example()
    r = runner()
    for i in range(20):
        bad = copy.deepcopy(xr)
        bad["spec"]["namespaces"][0]["name"] = f'Evil-{i}-"label"{{}}'
        asyncio.run(render(bad, policy, runner=r))
    reasons = set(re.findall(r'reason="([^"]*)"', scrape()))
    assert not any("Evil" in x for x in reasons)
    assert all(re.fullmatch(r"[A-Za-z]+", x) for x in reasons), reasons


def test_metrics_address_validation() -> None:
    with pytest.raises(ValueError):
        metrics.parse_address("nonsense")
    assert metrics.parse_address(":9090") == ("0.0.0.0", 9090)
    assert metrics.parse_address("[::1]:9090") == ("::1", 9090)
    out = subprocess.run(
        [
            str(Path(sys.executable).with_name("sack8s")),
            "serve",
            "--insecure",
            "--metrics-address",
            "nope",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "--metrics-address" in out.stderr


def _serve(port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``sack8s serve --insecure`` on ``port``, in ``env`` (where SACK8S_METRICS_ADDRESS may be)."""
    return subprocess.Popen(
        [
            str(Path(sys.executable).with_name("sack8s")),
            "serve",
            "--insecure",
            "--address",
            f"127.0.0.1:{port}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_serve_exposes_metrics_only_when_asked(tmp_path: Path) -> None:
    # Through the flag (test_soak.Server always passes --metrics-address).
    server = Server(["--insecure"]).start(tmp_path)
    _, policy = example()
    bad = claim("obs")
    bad["spec"]["namespaces"][0]["name"] = "default"
    try:
        asyncio.run(
            drive(
                server.address,
                [("valid", request(claim("obs"), policy)), ("invalid", request(bad, policy))],
            )
        )
        text = server.metrics()
    finally:
        server.stop()
    assert sample(text, "sack8s_requests_total", {"outcome": "composed"}) == 1
    assert (
        sample(text, "sack8s_results_total", {"severity": "Fatal", "reason": "PolicyViolation"})
        == 1
    )
    assert "sack8s_cache_hits_total" in text and "sack8s_registry_request_duration_seconds" in text
    # Through SACK8S_METRICS_ADDRESS, and nothing listens without it.
    port = free_port()
    env = {**os.environ, metrics.ENV_ADDRESS: f"127.0.0.1:{port}"}
    gport = free_port()
    proc = _serve(gport, env)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert (
                    b"sack8s_requests_total"
                    in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
                )
                break
            except OSError:
                assert time.monotonic() < deadline, "metrics not served with SACK8S_METRICS_ADDRESS"
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)
    env.pop(metrics.ENV_ADDRESS)
    proc = _serve(gport, env)
    try:
        time.sleep(2)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)
    finally:
        proc.terminate()
        proc.wait(10)


# -- logs -----------------------------------------------------------------------------------------


def test_every_log_line_of_a_request_carries_the_claim(caplog: pytest.LogCaptureFixture) -> None:
    """structlog lines from fn.py and stdlib lines from deeper modules alike."""
    caplog.set_level(logging.DEBUG, logger="function")
    xr, policy = example()
    as_claim(xr)
    xr["spec"]["values"]["inline"]["extra"] = {
        "deep": 1
    }  # not in the schema: a Fatal from a deeper module
    with structlog.testing.capture_logs() as logs:
        asyncio.run(render(copy.deepcopy(xr), policy, runner=runner()))
        ok = copy.deepcopy(xr)
        del ok["spec"]["values"]["inline"]["extra"]
        asyncio.run(render(ok, policy, runner=runner()))
        # A stdlib line from a deeper module, inside a request's context.
        from function.edge.fn import bridge_stdlib_logging

        bridge_stdlib_logging()

        async def deeper() -> None:
            with structlog.contextvars.bound_contextvars(xr="podinfo", claim="team-a/podinfo"):
                logging.getLogger("function.configdata.substitution").warning(
                    "from a deeper module"
                )

        asyncio.run(deeper())
    assert len(logs) >= 4, logs
    for entry in logs:
        assert entry.get("xr") == "podinfo", entry
        assert entry.get("claim") == "team-a/podinfo", entry
    assert any(e.get("logger") == "function.configdata.substitution" for e in logs)
    assert any(e.get("event") == "fatal" for e in logs) and any(
        e.get("event") == "composed" for e in logs
    )


def test_request_context_does_not_leak_between_concurrent_requests() -> None:
    xr, policy = example()
    a = copy.deepcopy(xr)
    as_claim(a, "ns-a", "a", xr_name="a-x")
    b = copy.deepcopy(xr)
    as_claim(b, "ns-b", "b", xr_name="b-x")
    r = runner()

    async def both() -> None:
        await asyncio.gather(*(render(copy.deepcopy(x), policy, runner=r) for x in (a, b, a, b)))

    with structlog.testing.capture_logs() as logs:
        asyncio.run(both())
    for entry in logs:
        assert (entry.get("xr"), entry.get("claim")) in (("a-x", "ns-a/a"), ("b-x", "ns-b/b")), (
            entry
        )
    assert structlog.contextvars.get_contextvars() == {}


def test_serve_debug_log_lines_all_name_the_claim(tmp_path: Path) -> None:
    server = Server(["--insecure", "--debug"]).start(tmp_path)
    _, policy = example()
    bad = claim("logged")
    bad["spec"]["namespaces"][0]["name"] = "default"
    try:
        start = len(server.output().splitlines())
        asyncio.run(
            drive(
                server.address,
                [("valid", request(claim("logged"), policy)), ("invalid", request(bad, policy))],
            )
        )
        time.sleep(0.3)
        output = server.output()  # the request lines; the server's own "stopped" line comes later
    finally:
        server.stop()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)  # the debug renderer colours its output
    lines = [ln for ln in plain.splitlines()[start:] if ln.strip()]
    assert len(lines) >= 3, lines
    for ln in lines:
        assert "claim=team-a/logged" in ln and "xr=logged-x1" in ln, ln


def test_a_real_deeper_module_line_carries_the_claim(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """function.configdata.substitution logs (stdlib, debug) when a rule creates keys."""
    import json as _json

    import yaml as _yaml
    from test_security_hostile import CONFIGDATA_BLOB, component_dir, with_component

    cd = _yaml.safe_load(CONFIGDATA_BLOB.read_text())
    cd["configuration"]["rules"].append(
        {"file": "values.yaml", "path": "brand.new.key", "value": "(( message ))"}
    )
    xr, policy = with_component(component_dir(tmp_path / "c", _json.dumps(cd)))
    as_claim(xr)
    caplog.set_level(logging.DEBUG, logger="function")
    with structlog.testing.capture_logs() as logs:
        out = asyncio.run(render(xr, policy, runner=runner()))
    assert out.fatal is None, out.fatal.message
    deeper = [e for e in logs if e.get("logger") == "function.configdata.substitution"]
    assert deeper, logs
    for entry in logs:
        assert entry.get("xr") == "podinfo" and entry.get("claim") == "team-a/podinfo", entry


def test_composed_is_said_at_info_when_it_changes() -> None:
    """A claim's first answer is logged at info; the same answer again at debug (a fleet's
    steady polls); an answer that changed (more objects, once what it composed is observed)
    at info again, as is another claim's."""
    xr, policy = example()
    r = runner()
    with structlog.testing.capture_logs() as logs:
        first = asyncio.run(render(copy.deepcopy(xr), policy, runner=r))
        asyncio.run(render(copy.deepcopy(xr), policy, runner=r))
        # Everything the first answer composed (its namespaces) observed and Ready: the next
        # answer composes the rest.
        observed = [
            {**obj, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            for obj in first.resources
        ]
        asyncio.run(render(copy.deepcopy(xr), policy, runner=r, observed=observed))
        other = copy.deepcopy(xr)
        as_claim(other, "ns-b", "b", xr_name="b-x")
        asyncio.run(render(other, policy, runner=r))
    said = [(e["log_level"], e["xr"]) for e in logs if e.get("event") == "composed"]
    assert said == [
        ("info", "podinfo"),
        ("debug", "podinfo"),
        ("info", "podinfo"),
        ("info", "b-x"),
    ], said
