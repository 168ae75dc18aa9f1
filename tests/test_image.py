"""The runtime image, run the way Crossplane runs it (issue 22).

Opt-in (marker ``image``, deselected from the default run): ``.ci/run`` builds the image with
``hack/image.sh`` and runs ``SACK8S_IMAGE=<name> pytest -m image tests/test_image.py``. Without
podman or the image the tests skip with one line (under ``SACK8S_STRICT=1``: fail).

Every container runs ``--read-only`` with no tmpfs, as user 65532:65532 (the image's) with no
capabilities and ``no-new-privileges``, on the host network listening on 127.0.0.1 only; one
runs exactly as Crossplane's function Deployment does (uid 2000, no arguments,
``TLS_SERVER_CERTS_DIR``, port 9443 published on 127.0.0.1).

* Crossplane's view: with mTLS (``--tls-certs-dir``; CA, server and client certificates made
  here by ``support/tlsca.py``), every example (``xr.yaml``, ``xr-kustomize.yaml`` with and
  without observed state, ``claim.yaml`` with its required ConfigMap) rendered over gRPC by the
  container equals, byte for byte, the in-process render (``function/edge/render.py``: the same
  requirement loop, only the transport differs). The component comes from a real registry:
  Debian's ``docker-registry`` over TLS on a free loopback port, holding the example CTF pushed
  by ``support/ctfpush.py`` (gardener-ocm's OCI client). A client without a certificate is
  refused.
* Nothing is written inside the container: the root filesystem is read-only (every writable
  looking path refuses a write), and a container of the same image *without* ``--read-only``,
  after serving every example, shows the same ``podman diff`` as one that ran ``/bin/true``
  (the runtime's own mount points): the server added, changed or removed nothing.
* SIGTERM with requests in flight (stalled at the registry by the fault proxy): every one is
  answered, the container exits 0 before Kubernetes' default grace period (30 s) would kill
  it, and its last log line is ``stopped``.
* The reliability soak (``tests/test_soak.py``'s driver and assertions) against the container.
* Figures (printed, and written to ``$SACK8S_IMAGE_FIGURES`` as JSON when set; docs/image.md):
  image and layer sizes, cold start to first answer against a ``sack8s serve`` process, RSS
  under the soak. Nothing here asserts a speed or memory target except what the soak asserts
  for the process too (RSS growth).
* The docker-archive ``hack/image.sh`` writes is what ``crossplane xpkg build
  --embed-runtime-image-tarball`` reads (go-containerregistry's ``tarball.ImageFromPath``): one
  image, its config and every layer's diff ID check out; the layers above the base hold only
  ``/venv`` (nothing of the CA bundle and pip.conf mounted into the build).

``package/`` itself is checked against ``crossplane xpkg build``'s rules in tests/test_package.py.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import STRICT, need, need_binary
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from hypothesis_profiles import example
from support.oci_env import (
    fault_proxy,
    fixture_registry,
    need_gardener_ocm,
    proxy,
    registry_bin,
)
from support.registry import RegistryServer, free_port
from support.tlsca import client_cert, make_pki, tls_certs_dir
from test_soak import CONCURRENCY, SOAK_ARGS, drive, mix, request, rss_kib, scrape, soak

from function.edge.fn import FunctionRunner
from function.edge.render import claim_to_xr, input_from_composition, load_docs, render
from function.edge.structs import to_dict

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
IMAGE = os.environ.get("SACK8S_IMAGE", "")  # e.g. localhost/function-sack8s:dev (hack/image.sh)
IMAGE_TAR = Path(os.environ.get("SACK8S_IMAGE_TAR", REPO / "dist" / "function-sack8s-image.tar"))
FIGURES_FILE = os.environ.get("SACK8S_IMAGE_FIGURES")
SOAK_REQUESTS = int(os.environ.get("SACK8S_IMAGE_SOAK_REQUESTS", "20000"))  # as the process soak
COLD_RUNS = int(os.environ.get("SACK8S_IMAGE_COLD_RUNS", "5"))
GRACE = 30  # Kubernetes' default terminationGracePeriodSeconds: SIGKILL after it
CONTAINERS_CONF = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "sack8s/image/containers.conf"
)
USER = "65532:65532"

NO_IMAGE = "SACK8S_IMAGE not set (an image hack/image.sh built, e.g. localhost/function-sack8s:dev)"
pytestmark = pytest.mark.image
if not IMAGE and not STRICT:  # one skip line; under SACK8S_STRICT=1 the podman fixture fails
    pytest.skip(NO_IMAGE, allow_module_level=True)
FIGURES: dict[str, Any] = {}


def figure(key: str, value: Any) -> None:
    FIGURES[key] = value
    print(f"[image] {key}: {json.dumps(value)}", file=sys.__stderr__)
    if FIGURES_FILE:
        Path(FIGURES_FILE).write_text(json.dumps(FIGURES, indent=2, sort_keys=True) + "\n")


# -- podman ----------------------------------------------------------------------------------------


class Podman:
    """The podman CLI, with hack/image.sh's containers.conf unless CONTAINERS_CONF is set."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.env = dict(os.environ)
        if "CONTAINERS_CONF" not in self.env and CONTAINERS_CONF.exists():
            self.env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        out = subprocess.run(
            [self.binary, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)}: exit {out.returncode}: {out.stderr[-2000:]}"
            )
        return out

    def inspect(self, what: str, fmt: str) -> str:
        return self("inspect", "--format", fmt, what).stdout.strip()


@pytest.fixture(scope="session", autouse=True)  # first, so a missing image is the one skip reason
def podman() -> Podman:
    need(bool(IMAGE), NO_IMAGE)
    pm = Podman(need_binary("podman", "SACK8S_PODMAN"))
    found = pm("image", "exists", IMAGE, check=False).returncode == 0
    need(found, f"image {IMAGE} not found (build it with hack/image.sh; set SACK8S_IMAGE)")
    return pm


@dataclass
class Container:
    """``podman run`` of the image; the same surface as test_soak's Server."""

    podman: Podman
    args: list[str]
    read_only: bool = True
    mounts: list[tuple[Path, str]] = field(default_factory=list)
    entrypoint: str | None = None
    user: str = USER
    env: dict[str, str] = field(default_factory=dict)
    # False: host network, --address/--metrics-address on 127.0.0.1. True: as Crossplane's
    # Deployment runs it, no arguments (the image's default 0.0.0.0:9443) in the container's own
    # network namespace, 9443 published on 127.0.0.1 only.
    published: bool = False
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    name: str = field(default_factory=lambda: f"sack8s-test-{uuid.uuid4().hex[:10]}")
    started: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = ["run", "--detach", "--name", self.name, "--user", self.user, "--passwd=false"]
        cmd += ["--cap-drop", "all", "--security-opt", "no-new-privileges"]
        if self.published:
            cmd += ["--publish", f"127.0.0.1:{self.port}:9443"]
        else:
            cmd += ["--network", "host"]
        if self.read_only:
            cmd += ["--read-only", "--read-only-tmpfs=false"]
        for host, inside in self.mounts:
            cmd += ["--volume", f"{host}:{inside}:ro"]
        for key, value in self.env.items():
            cmd += ["--env", f"{key}={value}"]
        if self.entrypoint:
            return [*cmd, "--entrypoint", self.entrypoint, IMAGE]
        if self.published:
            return [*cmd, IMAGE, *self.args]
        listen = ["--address", self.address, "--metrics-address", f"127.0.0.1:{self.metrics_port}"]
        return [*cmd, IMAGE, *listen, *self.args]

    def run(self) -> Container:
        self.podman(*self.command())
        self.started = True
        return self

    def pid(self) -> int:
        return int(self.podman.inspect(self.name, "{{.State.Pid}}"))

    def alive(self) -> bool:
        return self.podman.inspect(self.name, "{{.State.Running}}") == "true"

    def rss_kib(self) -> int:
        return rss_kib(self.pid())

    def metrics(self) -> str:
        return scrape(self.metrics_port)

    def output(self) -> str:
        out = self.podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def wait_metrics(self, timeout: float = 60) -> Container:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.alive(), f"the container exited: {self.output()[-2000:]}"
            try:
                self.metrics()
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"the container did not come up: {self.output()[-2000:]}")

    def stop(self) -> int:
        """SIGTERM, SIGKILL after GRACE seconds (what the kubelet does); the exit code."""
        self.podman("stop", "--time", str(GRACE), self.name, timeout=GRACE + 30)
        return int(self.podman.inspect(self.name, "{{.State.ExitCode}}"))

    def diff(self) -> list[str]:
        return sorted(self.podman("diff", self.name).stdout.split("\n")[:-1])

    def remove(self) -> None:
        if self.started:
            self.podman("rm", "--force", "--time", "0", self.name, check=False)


@pytest.fixture
def containers(podman: Podman):
    made: list[Container] = []

    def make(*args: str, **kw: Any) -> Container:
        c = Container(podman, list(args), **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.remove()


# -- the registry, the certificates, the examples --------------------------------------------------


@dataclass
class Tls:
    dir: Path  # tls.crt, tls.key, ca.crt: what --tls-certs-dir reads
    ca_pem: str
    client: grpc.ChannelCredentials


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    root = tmp_path_factory.mktemp("mtls")
    pki = make_pki(root / "pki", name="sack8s function CA")  # server certificate for 127.0.0.1
    crt, key = client_cert(pki, root / "client", "crossplane")
    certs = tls_certs_dir(pki, root / "certs")
    for p in (certs, *certs.iterdir()):  # readable by the container's user (a throw-away key)
        p.chmod(0o755 if p.is_dir() else 0o644)
    return Tls(
        certs,
        pki.ca_pem,
        grpc.ssl_channel_credentials(pki.ca_pem.encode(), key.read_bytes(), crt.read_bytes()),
    )


@dataclass
class Registry:
    host: str
    ca_pem: str


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """Debian's docker-registry over TLS, holding the example CTF (pushed with gardener-ocm)."""
    from support.ctfpush import push_ctf

    need_gardener_ocm()
    binary = registry_bin()
    root = tmp_path_factory.mktemp("registry")
    pki = make_pki(root / "pki", name="sack8s registry CA")
    reg = RegistryServer(
        binary, root / "reg", tls_cert=pki.cert_file, tls_key=pki.key_file, ca_file=pki.ca_file
    ).start()
    try:
        pushed = push_ctf(EXAMPLES / "component" / "ctf", reg.host, "source", pki.ca_file)
        assert any(ref.endswith(":6.2.0") for ref in pushed), pushed
        yield Registry(reg.host, pki.ca_pem)
    finally:
        reg.stop()


@dataclass(frozen=True)
class Case:
    id: str
    xr: str
    composition: str
    observed: str | None = None
    required: str | None = None


CASES = [
    Case("helm", "xr.yaml", "composition.yaml"),
    Case("helm-observed", "xr.yaml", "composition.yaml", observed="observed/helm"),
    Case("kustomize", "xr-kustomize.yaml", "composition.yaml"),
    Case(
        "kustomize-observed", "xr-kustomize.yaml", "composition.yaml", observed="observed/kustomize"
    ),
    Case("claim", "claim.yaml", "composition-claim.yaml", required="required"),
]


def inputs(case: Case, reg: Registry) -> dict[str, Any]:
    """The example, its component read from the test registry instead of 127.0.0.1:5000 (plain
    HTTP) and the repository's CTF mirror (a path the container does not have)."""
    xr = claim_to_xr(load_docs([EXAMPLES / case.xr])[0])
    xr["spec"]["component"]["repository"] = f"oci::https://{reg.host}/source"
    policy = input_from_composition(load_docs([EXAMPLES / case.composition])[0], case.composition)
    # The example's images stay where its descriptor names them (127.0.0.1:5000): keep the
    # image allowlist the example's registries implied before they were replaced.
    images = policy.get("imageRegistries") or [
        {"host": r["host"], "pullCredential": True} for r in policy.get("registries") or []
    ]
    policy["registries"] = [{"host": reg.host, "caBundle": reg.ca_pem}]
    policy["imageRegistries"] = images
    policy["mirrors"] = []
    return {
        "xr": xr,
        "function_input": policy,
        "observed": load_docs([EXAMPLES / case.observed]) if case.observed else [],
        "required": load_docs([EXAMPLES / case.required]) if case.required else [],
    }


class GrpcRunner:
    """The function behind a gRPC channel: render()'s requirement loop then talks to it as
    Crossplane does."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = grpcv1.FunctionRunnerServiceStub(channel)

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _context: Any
    ) -> fnv1.RunFunctionResponse:
        return await self.stub.RunFunction(req, timeout=60, wait_for_ready=True)


CHANNEL_OPTIONS = [  # reconnect quickly while the server starts (gRPC's default backoff is 1 s)
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 50),
]


def results(rendered) -> list[tuple[str, str, str]]:
    return [(fnv1.Severity.Name(r.severity), r.reason, r.message) for r in rendered.results]


async def render_both(
    address: str, creds: grpc.ChannelCredentials, reg: Registry
) -> dict[str, tuple[Any, Any]]:
    out = {}
    async with grpc.aio.secure_channel(address, creds, options=CHANNEL_OPTIONS) as channel:
        remote = GrpcRunner(channel)
        for case in CASES:
            there = await render(**inputs(case, reg), runner=remote)
            here = await render(**inputs(case, reg), runner=FunctionRunner())
            out[case.id] = (there, here)
    return out


def assert_identical(rendered: dict[str, tuple[Any, Any]], reg: Registry) -> None:
    for case_id, (there, here) in rendered.items():
        assert here.fatal is None, (case_id, here.fatal.message)
        assert there.yaml() == here.yaml(), case_id
        assert results(there) == results(here), case_id
        status = there.xr["status"]["component"]
        assert status["repository"] == f"oci::https://{reg.host}/source" and status[
            "descriptorDigest"
        ].startswith("sha256:")
        # A first reconcile composes the Namespaces only (issue 19: objects follow their
        # Namespace); with the observed state of the examples every kind is composed.
        want = 10 if next(c for c in CASES if c.id == case_id).observed else 2
        assert len(there.resources) >= want, (
            case_id,
            [r["metadata"]["annotations"] for r in there.resources],
        )


# -- Crossplane's view: mTLS, every example byte-identical -----------------------------------------


@pytest.fixture(scope="module")
def served(podman: Podman, tls: Tls):
    """The image as Crossplane deploys it: read-only, non-root, mTLS."""
    c = Container(podman, ["--tls-certs-dir", "/tls"], mounts=[(tls.dir, "/tls")])
    try:
        yield c.run().wait_metrics()
    finally:
        c.remove()


def test_every_example_over_mtls_equals_the_in_process_render(
    served: Container, tls: Tls, registry: Registry
) -> None:
    rendered = asyncio.run(render_both(served.address, tls.client, registry))
    assert [c.id for c in CASES] == list(rendered)
    assert_identical(rendered, registry)
    assert "Traceback" not in served.output()


def test_a_client_without_a_certificate_is_refused(
    served: Container, tls: Tls, registry: Registry
) -> None:
    xr, policy = inputs(CASES[0], registry)["xr"], inputs(CASES[0], registry)["function_input"]
    no_cert = grpc.ssl_channel_credentials(tls.ca_pem.encode())
    tally = asyncio.run(
        drive(served.address, [("valid", request(xr, policy))], credentials=no_cert)
    )
    assert tally.codes == {"UNAVAILABLE": 1}, tally.codes
    plain = asyncio.run(drive(served.address, [("valid", request(xr, policy))]))
    assert plain.codes == {"UNAVAILABLE": 1}, plain.codes


# -- nothing written inside ------------------------------------------------------------------------


PROBE = r"""
for d in / /tmp /var/tmp /run /root /home /venv/fn /venv/fn/lib /etc "$HOME"; do
  if (echo x > "$d/.sack8s-write-probe") 2>/dev/null; then echo "writable: $d"; fi
done
echo probed
"""


def test_the_root_filesystem_is_read_only(served: Container) -> None:
    assert served.podman.inspect(served.name, "{{.HostConfig.ReadonlyRootfs}}") == "true"
    probe = served.podman("exec", served.name, "sh", "-c", PROBE)
    assert probe.stdout.strip() == "probed", probe.stdout  # no "writable: ..." line
    mounts = served.podman("exec", served.name, "cat", "/proc/mounts").stdout.splitlines()
    tmpfs = sorted(
        m.split()[1] for m in mounts if m.split()[2] == "tmpfs" and " rw" in f" {m.split()[3]}"
    )
    assert not [m for m in tmpfs if not m.startswith(("/dev", "/proc/", "/sys/"))], (
        tmpfs
    )  # no tmpfs for the server


def test_a_writable_container_is_left_unchanged(containers, tls: Tls, registry: Registry) -> None:
    baseline = containers(entrypoint="/bin/true", read_only=False, mounts=[(tls.dir, "/tls")]).run()
    assert baseline.podman("wait", baseline.name).stdout.strip() == "0"
    used = (
        containers("--tls-certs-dir", "/tls", read_only=False, mounts=[(tls.dir, "/tls")])
        .run()
        .wait_metrics()
    )
    rendered = asyncio.run(render_both(used.address, tls.client, registry))
    assert_identical(rendered, registry)
    assert used.stop() == 0
    # what runc and podman themselves put there (mount points for /etc/hosts, /etc/resolv.conf, ...)
    print(f"[image] podman diff of /bin/true: {baseline.diff()}", file=sys.__stderr__)
    assert used.diff() == baseline.diff()


# -- SIGTERM ---------------------------------------------------------------------------------------


def test_sigterm_answers_in_flight_requests_and_exits_0(served: Container, tls: Tls, proxy) -> None:
    proxy.stall_seconds = 3.0  # under the SDK's 5 s drain
    proxy.fault("stall", when=lambda m, p: "/manifests/" in p)
    reqs = [(k, r) for k, r in mix(CONCURRENCY * 8, proxy.host, seed=5) if k == "registry"][:16]

    async def go():
        task = asyncio.create_task(drive(served.address, reqs, credentials=tls.client))
        deadline = time.monotonic() + 10
        while (
            not any("/manifests/" in r.path for r in proxy.requests) and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.05)
        assert any("/manifests/" in r.path for r in proxy.requests), (
            "no request reached the registry"
        )
        await asyncio.sleep(0.5)
        started = time.monotonic()
        served.podman("kill", "--signal", "TERM", served.name)
        tally = await task
        return tally, started

    try:
        tally, signalled = asyncio.run(go())
        code = served.podman("wait", served.name, timeout=GRACE).stdout.strip()
        took = time.monotonic() - signalled
    finally:
        proxy.fault(None)
        proxy.stall_seconds = 5.0
    log = served.output()
    figure(
        "sigterm",
        {
            "in_flight": len(reqs),
            "codes": tally.codes,
            "exit": int(code),
            "seconds_to_exit": round(took, 2),
        },
    )
    assert tally.codes == {"OK": len(reqs)}, (
        tally.codes
    )  # answered (a Fatal naming the stalled registry)
    assert code == "0"  # exited by itself; a kill after the grace period would be 137
    lines = [
        json.loads(ln)
        for ln in served.podman("logs", served.name).stdout.splitlines()
        if ln.startswith("{")
    ]
    assert lines[0]["msg"] == "serving" and lines[0]["tls"] is True, lines[0]
    assert lines[-1]["msg"] == "stopped", lines[
        -3:
    ]  # logged once the in-flight requests were answered
    assert "Traceback" not in log


# -- the soak --------------------------------------------------------------------------------------


def test_soak_against_the_container(containers, tmp_path: Path, proxy) -> None:
    ctf = (
        EXAMPLES / "component" / "ctf"
    )  # the soak's valid claims read the mirror at its absolute path
    c = containers(*SOAK_ARGS, mounts=[(ctf, str(ctf))]).run().wait_metrics()
    figures = soak(SOAK_REQUESTS, tmp_path, proxy, server=c)
    figure("soak_container", figures)


# -- Crossplane's own Deployment -------------------------------------------------------------------


def test_as_crossplanes_function_deployment_runs_it(containers, tls: Tls) -> None:
    """Crossplane v2.2.4 (internal/controller/pkg/runtime) runs a function as uid/gid 2000 with
    no arguments, the server certificate Secret mounted at /tls/server and named by
    TLS_SERVER_CERTS_DIR, and dials port 9443. Here also read-only; the component comes from
    the CTF mirror mounted at its absolute path (this network namespace has no registry)."""
    ctf = EXAMPLES / "component" / "ctf"
    c = containers(
        user="2000:2000",
        published=True,
        env={"TLS_SERVER_CERTS_DIR": "/tls/server"},
        mounts=[(tls.dir, "/tls/server"), (ctf, str(ctf))],
    ).run()
    xr, policy = example()
    req = request(xr, policy, observed=True)
    expected = answer(asyncio.run(FunctionRunner().RunFunction(req, None)))
    assert expected["desired"]["resources"], expected["results"]
    assert answer(asyncio.run(first_answer(c.address, tls.client, req))) == expected
    assert c.stop() == 0
    lines = [
        json.loads(ln) for ln in c.podman("logs", c.name).stdout.splitlines() if ln.startswith("{")
    ]
    assert (lines[0]["msg"], lines[0]["address"], lines[0]["tls"]) == (
        "serving",
        "0.0.0.0:9443",
        True,
    )
    assert lines[-1]["msg"] == "stopped"


# -- cold start ------------------------------------------------------------------------------------


async def first_answer(
    address: str, creds: grpc.ChannelCredentials, req: fnv1.RunFunctionRequest
) -> fnv1.RunFunctionResponse:
    async with grpc.aio.secure_channel(address, creds, options=CHANNEL_OPTIONS) as channel:
        return await grpcv1.FunctionRunnerServiceStub(channel).RunFunction(
            req, timeout=120, wait_for_ready=True
        )


def answer(rsp: fnv1.RunFunctionResponse) -> dict[str, Any]:
    return {"desired": to_dict(rsp.desired), "results": [to_dict(r) for r in rsp.results]}


def test_cold_start_to_first_answer(
    podman: Podman, tls: Tls, registry: Registry, tmp_path: Path
) -> None:
    """podman run (or the process's start) until the first composed answer, registry read cold."""
    i = inputs(CASES[0], registry)
    req = request(i["xr"], i["function_input"])
    expected = answer(asyncio.run(FunctionRunner().RunFunction(req, None)))
    assert expected["desired"]["resources"], expected["results"]
    runs: dict[str, list[float]] = {
        "container_run_returned": [],
        "container_first_answer": [],
        "process_first_answer": [],
    }
    for _ in range(COLD_RUNS):
        c = Container(podman, ["--tls-certs-dir", "/tls"], mounts=[(tls.dir, "/tls")])
        try:
            t0 = time.monotonic()
            c.run()
            runs["container_run_returned"].append(time.monotonic() - t0)
            rsp = asyncio.run(first_answer(c.address, tls.client, req))
            runs["container_first_answer"].append(time.monotonic() - t0)
            assert answer(rsp) == expected
        finally:
            c.remove()
        port = free_port()
        with open(tmp_path / f"cold-{port}.log", "wb") as log:
            t0 = time.monotonic()
            proc = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("sack8s")),
                    "serve",
                    "--address",
                    f"127.0.0.1:{port}",
                    "--tls-certs-dir",
                    str(tls.dir),
                ],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            try:
                rsp = asyncio.run(first_answer(f"127.0.0.1:{port}", tls.client, req))
                runs["process_first_answer"].append(time.monotonic() - t0)
                assert answer(rsp) == expected
            finally:
                proc.terminate()
                proc.wait(GRACE)
    figure(
        "cold_start_seconds",
        {
            k: {"median": round(statistics.median(v), 3), "runs": [round(x, 3) for x in v]}
            for k, v in runs.items()
        },
    )


# -- the docker-archive crossplane xpkg embeds -----------------------------------------------------


def layer_entries(tar: tarfile.TarFile, member: str) -> list[str]:
    with tarfile.open(fileobj=tar.extractfile(member)) as layer:
        return [m.name for m in layer.getmembers()]


def test_the_docker_archive_is_what_crossplane_embeds(podman: Podman) -> None:
    need(
        IMAGE_TAR.exists(),
        f"docker-archive {IMAGE_TAR} not found (hack/image.sh writes it; set SACK8S_IMAGE_TAR)",
    )
    image_id = podman.inspect(IMAGE, "{{.Id}}")
    with tarfile.open(IMAGE_TAR) as tar:
        (manifest,) = json.load(
            tar.extractfile("manifest.json")
        )  # tarball.ImageFromPath(path, nil): one image
        assert IMAGE in manifest["RepoTags"], manifest["RepoTags"]
        config_bytes = tar.extractfile(manifest["Config"]).read()
        assert hashlib.sha256(config_bytes).hexdigest() == image_id.removeprefix("sha256:")
        config = json.loads(config_bytes)
        assert (config["os"], config["architecture"]) == ("linux", "amd64")
        assert config["config"]["User"] == USER and config["config"]["Entrypoint"] == [
            "/venv/fn/bin/sack8s",
            "serve",
        ]
        assert "9443/tcp" in config["config"]["ExposedPorts"]
        layers = []
        for member, diff_id in zip(manifest["Layers"], config["rootfs"]["diff_ids"], strict=True):
            data = tar.extractfile(member).read()
            assert "sha256:" + hashlib.sha256(data).hexdigest() == diff_id, member
            layers.append(
                {"diff_id": diff_id, "bytes": len(data), "gzip_bytes": len(gzip.compress(data, 6))}
            )
        base = config["config"]["Labels"].get("org.opencontainers.image.base.name")
        base_layers = (
            len(json.loads(podman("image", "inspect", base).stdout)[0]["RootFS"]["Layers"])
            if base
            else None
        )
        entries = {m: layer_entries(tar, m) for m in manifest["Layers"]}
    for member, names in entries.items():
        assert not [n for n in names if n.lstrip("./") == "etc/pip.conf"], member
    if base_layers is not None:  # above the base: only the virtualenv
        for member in manifest["Layers"][base_layers:]:
            stray = [n for n in entries[member] if not n.lstrip("./").startswith("venv")]
            assert not stray, (member, stray[:20])
    skopeo = need_binary("skopeo", "SACK8S_SKOPEO")
    seen = json.loads(
        subprocess.run(
            [skopeo, "inspect", f"docker-archive:{IMAGE_TAR}"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
    assert len(seen["Layers"]) == len(layers) and seen["Architecture"] == "amd64"
    inspected = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    figure(
        "image",
        {
            "name": IMAGE,
            "id": image_id,
            "base": base,
            "base_layers": base_layers,
            "size_bytes": inspected["Size"],
            "archive_bytes": IMAGE_TAR.stat().st_size,
            "layers": layers,
            "gzip_total_bytes": sum(ly["gzip_bytes"] for ly in layers),
        },
    )
