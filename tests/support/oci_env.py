"""Session-wide registries and proxies for the ``tests/test_oci_*.py`` files.

Each server is started at most once per pytest session (a module-level singleton) and
stopped at session end through the finalizer of the first fixture that started it. The
test files import the fixtures from here (``from support.oci_env import ...``).
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXTURES, need, need_binary, need_path

from support.faultproxy import FaultProxy
from support.registry import RegistryServer
from support.tlsca import TestPki, make_pki

COMPONENT = "acme.org/sack8s/podinfo"
USER, PASSWORD = "sack8s", "s3cret-Pa55word-for-tests"

_started: dict[str, object] = {}
_scratch: Path | None = None


def scratch() -> Path:
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="sack8s-oci-"))
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def _once(
    request: pytest.FixtureRequest,
    name: str,
    make: Callable[[], object],
    stop: Callable[[object], None],
):
    if name not in _started:
        obj = make()
        _started[name] = obj

        def fin() -> None:
            stop(_started.pop(name))

        request.addfinalizer(fin)
    return _started[name]


def registry_bin() -> str:
    return need_binary("docker-registry", "SACK8S_REGISTRY_BIN")


def storage() -> Path:
    root = need_path(FIXTURES / "registry", "fixture registry storage", "SACK8S_FIXTURES")
    return root


@pytest.fixture(scope="session")
def fixture_registry(request: pytest.FixtureRequest) -> RegistryServer:
    """The fixture storage served plain-HTTP on 127.0.0.1:<free port>."""
    binary, store = registry_bin(), storage()
    return _once(
        request,
        "plain",
        lambda: RegistryServer(binary, scratch() / "plain", storage=store).start(),
        lambda r: r.stop(),
    )  # type: ignore[return-value]


@pytest.fixture(scope="session")
def fault_proxy(request: pytest.FixtureRequest, fixture_registry: RegistryServer) -> FaultProxy:
    return _once(
        request,
        "proxy",
        lambda: FaultProxy("127.0.0.1", fixture_registry.port).start(),
        lambda p: p.stop(),
    )  # type: ignore[return-value]


@pytest.fixture
def proxy(fault_proxy: FaultProxy) -> FaultProxy:
    """The session fault proxy, with faults and request log cleared for this test."""
    fault_proxy.clear()
    fault_proxy.token_auth = None
    yield fault_proxy
    fault_proxy.clear()
    fault_proxy.token_auth = None


@pytest.fixture(scope="session")
def htpasswd_file() -> Path:
    tool = need_binary("htpasswd", "SACK8S_HTPASSWD_BIN")
    path = scratch() / "htpasswd"
    out = subprocess.run(
        [tool, "-Bbn", USER, PASSWORD], check=True, capture_output=True, text=True
    ).stdout
    path.write_text(out)
    return path


@pytest.fixture(scope="session")
def basic_auth_registry(request: pytest.FixtureRequest, htpasswd_file: Path) -> RegistryServer:
    binary, store = registry_bin(), storage()
    return _once(
        request,
        "basic",
        lambda: RegistryServer(
            binary, scratch() / "basic", storage=store, htpasswd=htpasswd_file
        ).start(),
        lambda r: r.stop(),
    )  # type: ignore[return-value]


@pytest.fixture(scope="session")
def token_registry(request: pytest.FixtureRequest):
    """The fixture storage behind distribution's token auth, with a loopback token service."""
    from support.tokenserver import ISSUER, SERVICE, TokenServer

    binary, store = registry_bin(), storage()

    def make():
        tokens = TokenServer(scratch() / "token", USER, PASSWORD).start()
        try:
            reg = RegistryServer(
                binary,
                scratch() / "tokenreg",
                storage=store,
                token=(tokens.realm, SERVICE, ISSUER, tokens.bundle),
            ).start()
        except Exception:
            tokens.stop()
            raise
        return reg, tokens

    def stop(pair) -> None:
        pair[0].stop()
        pair[1].stop()

    return _once(request, "token", make, stop)


@pytest.fixture(scope="session")
def pki() -> TestPki:
    return make_pki(scratch() / "pki")


@pytest.fixture(scope="session")
def tls_registry(request: pytest.FixtureRequest, pki: TestPki) -> RegistryServer:
    """The fixture storage over HTTPS with a certificate from a CA the test made."""
    binary, store = registry_bin(), storage()
    return _once(
        request,
        "tls",
        lambda: RegistryServer(
            binary,
            scratch() / "tls",
            storage=store,
            tls_cert=pki.cert_file,
            tls_key=pki.key_file,
            ca_file=pki.ca_file,
        ).start(),
        lambda r: r.stop(),
    )  # type: ignore[return-value]


@pytest.fixture
def tampered_registry(tmp_path: Path) -> Callable[[Callable[[Path], None]], RegistryServer]:
    """Start a private registry on a copy of the storage after ``tamper(root)`` changed it."""
    started: list[RegistryServer] = []
    binary, store = registry_bin(), storage()

    def start(tamper: Callable[[Path], None]) -> RegistryServer:
        reg = RegistryServer(binary, tmp_path / f"tampered{len(started)}", storage=None)
        reg.workdir.mkdir(parents=True)
        shutil.copytree(store, reg.root, symlinks=True)
        for p in [reg.root, *reg.root.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
        tamper(reg.root)
        started.append(reg.start())
        return reg

    yield start
    for reg in started:
        reg.stop()


def blob_path(root: Path, digest: str) -> Path:
    hexd = digest.split(":", 1)[1]
    return root / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


def need_gardener_ocm() -> None:
    try:
        import oci
        import ocm
    except ImportError as exc:
        need(False, f"gardener-ocm not importable ({exc.name})")
