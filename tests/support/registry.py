"""Start Debian's ``docker-registry`` (CNCF distribution 2.8) on a free loopback port.

Modelled on the fixtures' ``serve-registry.sh``: copy the storage root, write a config,
``serve`` it, poll ``/v2/`` until it answers, and stop the process at the end. Optional
htpasswd basic auth and TLS (certificate + key files).
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RegistryServer:
    binary: str
    workdir: Path
    storage: Path | None = (
        None  # a storage root to copy (docker/registry/v2/...); None: use root as is
    )
    htpasswd: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    ca_file: Path | None = None  # to poll a TLS registry
    token: tuple[str, str, str, Path] | None = None  # (realm, service, issuer, rootcertbundle)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def root(self) -> Path:
        return self.workdir / "root"

    def start(self) -> RegistryServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.storage is not None:
            if self.root.exists():
                shutil.rmtree(self.root)
            shutil.copytree(self.storage, self.root, symlinks=True)
            for p in [self.root, *self.root.rglob("*")]:  # the fixture copy is read-only
                p.chmod(p.stat().st_mode | 0o200)
        else:
            self.root.mkdir(exist_ok=True)  # keep a root the caller prepared
        lines = [
            "version: 0.1",
            "log:",
            "  level: warn",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.root}",
            "  delete:",
            "    enabled: true",
            "http:",
            f"  addr: 127.0.0.1:{self.port}",
        ]
        if self.tls_cert:
            lines += ["  tls:", f"    certificate: {self.tls_cert}", f"    key: {self.tls_key}"]
        if self.token:
            realm, service, issuer, bundle = self.token
            lines += [
                "auth:",
                "  token:",
                f"    realm: {realm}",
                f"    service: {service}",
                f"    issuer: {issuer}",
                f"    rootcertbundle: {bundle}",
            ]
        if self.htpasswd:
            lines += [
                "auth:",
                "  htpasswd:",
                "    realm: sack8s-test",
                f"    path: {self.htpasswd}",
            ]
        config = self.workdir / "config.yml"
        config.write_text("\n".join(lines) + "\n")
        self.log = self.workdir / "registry.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [self.binary, "serve", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._wait()
        return self

    def _wait(self) -> None:
        scheme = "https" if self.tls_cert else "http"
        ctx = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                break
            try:
                urllib.request.urlopen(f"{scheme}://{self.host}/v2/", timeout=1, context=ctx)
                return
            except urllib.error.HTTPError:
                return  # 401 from an auth-enabled registry: it is up
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"registry on {self.host} did not come up: {self.log.read_text()[-2000:]}"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
