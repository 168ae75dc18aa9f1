"""The server under load and faults (issue 12, requirement 4), against a real ``sack8s serve``.

* Soak: N gRPC requests at concurrency 64 against ``sack8s serve --insecure`` in a
  subprocess, mixed: valid claims (composed from the CTF mirror), invalid claims (one
  Fatal), garbage specs, oversized messages (over ``--max-recv-message-size 1``: must be
  ``RESOURCE_EXHAUSTED``), and claims read from the real registry through the loopback fault
  proxy (``tests/support/faultproxy.py``) while it injects 500s, resets, truncations,
  stalls and corrupt bodies. Zero ``INTERNAL``/``UNKNOWN``/``UNAVAILABLE`` statuses, zero
  ``InternalError`` results, the process never dies, RSS at the end within 10 % of the warm
  plateau (the higher of requests 5,000 and 10,000, with small cache caps that are full early). The default run sends 1,000
  requests (``test_soak_short``); CI's soak stage sends 20,000 (``SACK8S_SOAK=1 pytest -m soak tests/test_soak.py``).
* Graceful shutdown: SIGTERM while 64 requests are in flight (stalled at the registry):
  every one is answered, the process exits 0.
* mTLS (``--tls-certs-dir`` with ``tls.crt``, ``tls.key``, ``ca.crt``; certificates made
  here with ``cryptography``): a client certificate from the CA is served; no client
  certificate, or one from another CA, is refused by the TLS handshake.
"""

from __future__ import annotations

import asyncio
import copy
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from hypothesis_profiles import REPO, as_claim, example
from support.faultproxy import MARKER
from support.oci_env import fault_proxy, fixture_registry, proxy
from support.registry import free_port
from support.tlsca import client_cert, make_pki, tls_certs_dir

SACK8S = str(Path(sys.executable).with_name("sack8s"))
CONCURRENCY = 64
FULL = int(os.environ.get("SACK8S_SOAK_REQUESTS", "20000"))
SHORT = 1000
SOAK_ENABLED = os.environ.get("SACK8S_SOAK", "") not in ("", "0", "false")


# -- the server subprocess --------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    """The resident set of a process, in KiB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def scrape(metrics_port: int, timeout: float = 5) -> str:
    """The metrics a server on this machine exposes at ``metrics_port``."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    return urllib.request.urlopen(url, timeout=timeout).read().decode()


@dataclass
class Server:
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    log_path: Path | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, tmp: Path) -> Server:
        self.log_path = tmp / f"serve-{self.port}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                SACK8S,
                "serve",
                "--address",
                self.address,
                "--metrics-address",
                f"127.0.0.1:{self.metrics_port}",
                *self.args,
            ],
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"sack8s serve exited: {self.output()[-2000:]}"
            try:
                scrape(self.metrics_port, timeout=1)
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"sack8s serve did not come up: {self.output()[-2000:]}")

    def output(self) -> str:
        return (
            self.log_path.read_text(errors="replace")
            if self.log_path and self.log_path.exists()
            else ""
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    def metrics(self) -> str:
        return scrape(self.metrics_port)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        return self.proc.returncode


# -- requests -----------------------------------------------------------------------------------


def request(
    xr: dict[str, Any],
    policy: dict[str, Any],
    *,
    observed: bool = False,
    credentials: dict[str, bytes] | None = None,
) -> fnv1.RunFunctionRequest:
    req = fnv1.RunFunctionRequest()
    req.meta.tag = "soak"
    resource.update(req.observed.composite, xr)
    req.input.update(policy)
    for name in namespaces_required(xr, policy):
        req.required_resources[f"namespace-{name}"].CopyFrom(fnv1.Resources())
    if observed:
        from hypothesis_profiles import observed_helm

        for obj in observed_helm():
            resource.update(
                req.observed.resources[
                    obj["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
                ],
                obj,
            )
    if credentials:
        req.credentials["registry-creds"].CopyFrom(
            fnv1.Credentials(credential_data=fnv1.CredentialData(data=credentials))
        )
    return req


def namespaces_required(xr: dict[str, Any], policy: dict[str, Any]) -> list[str]:
    """The Namespaces RunFunction will ask for (targets and the deploy namespace), all absent here."""
    from function.api.parse import parse_policy, parse_spec
    from function.compose.identity import identity_of
    from function.edge.requirements import requirements_for

    try:
        return requirements_for(parse_spec(xr), identity_of(xr), parse_policy(policy)).namespaces
    except Exception:
        nss = xr.get("spec", {}).get("namespaces", []) if isinstance(xr.get("spec"), dict) else []
        return [
            ns["name"] for ns in nss if isinstance(ns, dict) and isinstance(ns.get("name"), str)
        ]


def claim(name: str) -> dict[str, Any]:
    xr, _ = example()
    return as_claim(xr, "team-a", name, xr_name=f"{name}-x1")


def mix(
    n: int, registry_host: str | None, seed: int = 12
) -> list[tuple[str, fnv1.RunFunctionRequest]]:
    """n requests: kind label and message. Built up front so the client measures the server."""
    rnd = random.Random(seed)
    _, policy = example()
    out: list[tuple[str, fnv1.RunFunctionRequest]] = []
    pool: dict[str, list[fnv1.RunFunctionRequest]] = {
        "valid": [],
        "invalid": [],
        "garbage": [],
        "oversized": [],
        "registry": [],
    }
    for i in range(50):
        xr = claim(f"svc{i}")
        xr["spec"]["values"]["inline"]["replicas"] = i % 5
        pool["valid"].append(request(xr, policy, observed=(i % 2 == 0)))
        bad = claim(f"bad{i}")
        bad["spec"]["namespaces"][0]["name"] = rnd.choice(["kube-system", "default", "flux-system"])
        pool["invalid"].append(request(bad, policy))
        g = claim(f"garbage{i}")
        g["spec"] = rnd.choice(
            [
                {"x": "y" * rnd.randint(0, 100)},
                {"component": [1, 2]},
                {},
                {"namespaces": [{"name": "A" * 300}]},
            ]
        )
        pool["garbage"].append(request(g, policy))
    big = claim("big")
    big["spec"]["values"]["inline"]["message"] = "x" * (1536 * 1024)
    pool["oversized"].append(request(big, policy))
    if registry_host:
        for i in range(20):
            xr = claim(f"reg{i}")
            xr["spec"]["component"]["repository"] = f"oci::http://{registry_host}/source"
            xr["spec"]["component"]["version"] = "6.2.0"
            pol = copy.deepcopy(policy)
            pol["registries"] = [{"host": registry_host, "plainHTTP": True}]
            pol["imageRegistries"] = [
                {"host": "127.0.0.1:5000", "pullCredential": True}
            ]  # the fixture's images
            pol["mirrors"] = []
            pool["registry"].append(request(xr, pol))
    weights = [
        ("valid", 50),
        ("invalid", 20),
        ("garbage", 10),
        ("oversized", 5),
        ("registry", 15 if registry_host else 0),
    ]
    kinds = [k for k, w in weights for _ in range(w)]
    for _ in range(n):
        k = rnd.choice(kinds)
        out.append((k, rnd.choice(pool[k])))
    return out


@dataclass
class Tally:
    sent: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    results: dict[str, int] = field(default_factory=dict)
    internal_errors: int = 0
    wrong: list[str] = field(default_factory=list)


async def drive(
    address: str,
    reqs: list[tuple[str, fnv1.RunFunctionRequest]],
    *,
    on_count=None,
    credentials=None,
) -> Tally:
    tally = Tally()
    options = [
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ]
    channel = (
        grpc.aio.secure_channel(address, credentials, options=options)
        if credentials
        else grpc.aio.insecure_channel(address, options=options)
    )
    stub = grpcv1.FunctionRunnerServiceStub(channel)
    queue: asyncio.Queue = asyncio.Queue()
    for item in reqs:
        queue.put_nowait(item)

    async def worker() -> None:
        while True:
            try:
                kind, req = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            code = "OK"
            try:
                rsp = await stub.RunFunction(req, timeout=120)
                for r in rsp.results:
                    sev = fnv1.Severity.Name(r.severity)
                    tally.results[sev] = tally.results.get(sev, 0) + 1
                    if r.reason == "InternalError":
                        tally.internal_errors += 1
                fatal = any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results)
                if kind == "valid" and fatal:
                    tally.wrong.append(f"valid request got a Fatal: {rsp.results[0].message}")
                if kind in ("invalid", "garbage") and not fatal:
                    tally.wrong.append(f"{kind} request composed")
                if kind == "oversized":
                    tally.wrong.append("oversized request was served")
            except grpc.aio.AioRpcError as e:
                code = e.code().name
                if kind == "oversized" and code != "RESOURCE_EXHAUSTED":
                    tally.wrong.append(f"oversized request got {code}")
            tally.codes[code] = tally.codes.get(code, 0) + 1
            tally.sent += 1
            if on_count is not None:
                on_count(tally.sent)

    try:
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    finally:
        await channel.close()
    return tally


SOAK_ARGS = [
    "--insecure",
    "--max-recv-message-size",
    "1",
    "--tag-ttl",
    "0",
    # Small cache caps, so every bounded cache is full within the first thousand requests and
    # what RSS does after that is the leak check, not caches filling toward their defaults.
    "--memo-bytes",
    str(16 << 20),
    "--response-bytes",
    str(16 << 20),
    "--cache-bytes",
    str(32 << 20),
]


def soak(n: int, tmp: Path, proxy, server=None) -> dict[str, Any]:
    """Drive n mixed requests; ``server`` (started, serving SOAK_ARGS and metrics) defaults to a
    ``sack8s serve`` subprocess (tests/test_image.py passes the container)."""
    server = server if server is not None else Server(SOAK_ARGS).start(tmp)
    faults = ["500", "reset", "truncate", "corrupt", "401", None, None, None]
    rss: dict[str, int] = {"start": server.rss_kib()}
    injected = [0]

    def on_count(i: int) -> None:
        if i % 50 == 0 and proxy is not None:  # a new registry fault every 50 requests
            f = faults[(i // 50) % len(faults)]
            proxy.fault(f)
            injected[0] += f is not None
        if i in (1000, 5000, 10000, 15000):
            rss[f"at_{i // 1000}k"] = server.rss_kib()

    try:
        started = time.monotonic()
        tally = asyncio.run(
            drive(server.address, mix(n, proxy.host if proxy else None), on_count=on_count)
        )
        took = time.monotonic() - started
        rss["end"] = server.rss_kib()
        assert server.alive(), "the server died"
        metrics = server.metrics()
    finally:
        if proxy is not None:
            proxy.fault(None)
        code = server.stop()
    out = server.output()
    figures = {
        "requests": tally.sent,
        "seconds": round(took, 1),
        "rps": round(tally.sent / took, 1),
        "codes": tally.codes,
        "results": tally.results,
        "registry_faults_injected": injected[0],
        "rss_kib": rss,
        "exit": code,
    }
    print(f"[soak] {figures}", file=sys.__stderr__)
    assert tally.sent == n
    assert not tally.wrong, tally.wrong[:5]
    assert tally.internal_errors == 0
    assert set(tally.codes) <= {"OK", "RESOURCE_EXHAUSTED"}, tally.codes
    assert "Traceback" not in out and "unexpected error" not in out, out[-3000:]
    assert MARKER not in out
    assert code == 0
    assert 'sack8s_requests_total{outcome="composed"}' in metrics
    # The leak check: once warm (the small cache caps above are full after the first thousand
    # requests), RSS swings with the 64 requests in flight and the fault bursts (±15 % between
    # checkpoints, docs/image.md) but does not climb: the end stays within 10 % of the warm
    # plateau, the higher of the 5k and 10k figures. A leak grows past every checkpoint.
    warm = [rss[k] for k in ("at_5k", "at_10k") if k in rss] or [rss.get("at_1k", rss["start"])]
    base = max(warm)
    if n > 1000:
        assert rss["end"] <= base * 1.10, (
            f"RSS grew from a warm {base} KiB to {rss['end']} KiB at the end: {rss}"
        )
    return figures


def test_soak_short(tmp_path: Path, proxy) -> None:
    soak(SHORT, tmp_path, proxy)


@pytest.mark.soak
@pytest.mark.skipif(
    not SOAK_ENABLED, reason="the 20,000-request soak runs in CI's soak stage (SACK8S_SOAK=1)"
)
def test_soak_full(tmp_path: Path, proxy) -> None:
    soak(FULL, tmp_path, proxy)


# -- graceful shutdown -------------------------------------------------------------------------


def test_sigterm_completes_in_flight_requests(tmp_path: Path, proxy) -> None:
    proxy.stall_seconds = 3.0  # under the SDK's 5 s shutdown grace period
    proxy.fault("stall", when=lambda m, p: "/manifests/" in p)
    server = Server(["--insecure", "--tag-ttl", "0"]).start(tmp_path)
    reqs = [(k, r) for k, r in mix(CONCURRENCY * 8, proxy.host, seed=3) if k == "registry"][
        :CONCURRENCY
    ]
    assert len(reqs) == CONCURRENCY

    async def go() -> Tally:
        task = asyncio.create_task(drive(server.address, reqs))
        deadline = time.monotonic() + 2.5
        while (
            not any("/manifests/" in r.path for r in proxy.requests) and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.05)
        assert any("/manifests/" in r.path for r in proxy.requests), (
            "no request reached the registry"
        )
        await asyncio.sleep(
            0.5
        )  # every request is now in the server, waiting on the stalled registry
        server.proc.send_signal(signal.SIGTERM)
        return await task

    try:
        tally = asyncio.run(go())
        code = server.proc.wait(15)
    finally:
        proxy.fault(None)
        proxy.stall_seconds = 5.0
        server.stop()
    print(f"[sigterm] in flight {len(reqs)}: {tally.codes}, exit {code}", file=sys.__stderr__)
    assert tally.codes == {"OK": len(reqs)}, (
        tally.codes
    )  # answered (a Fatal naming the registry), not cancelled
    assert code == 0
    assert "Traceback" not in server.output()


# -- mTLS ------------------------------------------------------------------------------------------


def test_mtls_serves_only_clients_of_the_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    certs = tls_certs_dir(pki, tmp_path / "certs")
    ca_pem = pki.ca_pem.encode()
    client_crt, client_key = (p.read_bytes() for p in client_cert(pki, tmp_path / "client"))
    other = make_pki(tmp_path / "other", name="another CA")
    rogue_crt, rogue_key = (p.read_bytes() for p in client_cert(other, tmp_path / "rogue"))
    server = Server(["--tls-certs-dir", str(certs)]).start(tmp_path)
    xr, policy = example()
    req = [("valid", request(xr, policy))]
    try:
        good = asyncio.run(
            drive(
                server.address,
                req,
                credentials=grpc.ssl_channel_credentials(ca_pem, client_key, client_crt),
            )
        )
        none = asyncio.run(
            drive(server.address, req, credentials=grpc.ssl_channel_credentials(ca_pem))
        )
        rogue = asyncio.run(
            drive(
                server.address,
                req,
                credentials=grpc.ssl_channel_credentials(ca_pem, rogue_key, rogue_crt),
            )
        )
        assert server.proc.poll() is None
    finally:
        server.stop()
    assert good.codes == {"OK": 1} and not good.wrong, (good.codes, good.wrong)
    assert none.codes == {"UNAVAILABLE": 1}, (
        none.codes
    )  # the TLS handshake fails: no client certificate
    assert rogue.codes == {"UNAVAILABLE": 1}, rogue.codes  # certificate from another CA


def test_insecure_port_is_not_opened_with_tls(tmp_path: Path) -> None:
    """With --tls-certs-dir and no --insecure, a plaintext client is not served."""
    certs = tls_certs_dir(make_pki(tmp_path / "pki"), tmp_path / "certs")
    server = Server(["--tls-certs-dir", str(certs)]).start(tmp_path)
    xr, policy = example()
    try:
        plain = asyncio.run(drive(server.address, [("valid", request(xr, policy))]))
    finally:
        server.stop()
    assert plain.codes == {"UNAVAILABLE": 1}, plain.codes
