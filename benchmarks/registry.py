"""Debian's ``docker-registry`` (CNCF distribution) on a free loopback port, empty storage."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary() -> str | None:
    import os

    return (
        os.environ.get("SACK8S_REGISTRY_BIN")
        or shutil.which("docker-registry")
        or ("/usr/bin/docker-registry" if Path("/usr/bin/docker-registry").exists() else None)
    )


class Registry:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="sack8s-bench-registry-"))
        self.proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Registry:
        (self.dir / "root").mkdir()
        cfg = self.dir / "config.yml"
        cfg.write_text(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  "
            "filesystem:\n"
            f"    rootdirectory: {self.dir / 'root'}\nhttp:\n  addr: {self.host}\n"
        )
        self.log = open(self.dir / "registry.log", "wb")
        self.proc = subprocess.Popen(
            [self.binary, "serve", str(cfg)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1)
                return self
            except urllib.error.HTTPError:
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"registry did not start: {(self.dir / 'registry.log').read_text()[-1000:]}"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
