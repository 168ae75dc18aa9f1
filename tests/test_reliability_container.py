"""The container (issue 12, requirement 7): a read-only root filesystem works, the image is sane.

No container runtime is available to the tests, so the runtime contract is checked on the
process the image runs (``sack8s serve``):

* in a private mount namespace where **every** filesystem is remounted read-only (what
  ``readOnlyRootFilesystem: true`` with no emptyDir gives), with ``HOME`` pointing nowhere,
  the server starts, serves requests (composing from the CTF mirror) and shuts down cleanly;
* under ``strace``, it never opens a file for writing, creates, renames or removes one;
* the Dockerfile pins its base, builds and runs on the same Python, runs as a numeric
  non-root user, compiles byte code at build time and sets ``PYTHONDONTWRITEBYTECODE``;
* ``package/crossplane.yaml`` carries the metadata a Crossplane package index shows.

``hadolint`` is not available as a source package (Debian: none; PyPI/npm only wrap the
prebuilt upstream binary, which we do not download), so the Dockerfile rules that matter
here are asserted below instead.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from conftest import need
from hypothesis_profiles import REPO, example
from support.registry import free_port
from test_soak import claim, drive, request

SACK8S = str(Path(sys.executable).with_name("sack8s"))


def _can(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


READONLY_ALL = r"""
set -e
for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null || mount --bind -o ro "$m" "$m" 2>/dev/null || true
done
# prove it: nothing outside /dev is writable any more
for d in / /tmp /work "$HOME_WAS" "$(dirname "$SACK8S")"; do
  if touch "$d/.sack8s-rw-probe" 2>/dev/null; then echo "still writable: $d" >&2; rm -f "$d/.sack8s-rw-probe"; exit 97; fi
done
exec "$SACK8S" serve --insecure --address "$ADDRESS"
"""


def _serve_and_use(
    cmd: list[str], env: dict[str, str], address: str, log: Path
) -> tuple[int, str, dict]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd="/"
        )
    try:
        _, policy = example()  # mirror path absolute: the working directory is / and read-only
        deadline = time.monotonic() + 30
        tally = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            bad = claim("ro")
            bad["spec"]["namespaces"][0]["name"] = "default"
            tally = asyncio.run(
                drive(
                    address,
                    [
                        ("valid", request(claim("ro"), policy, observed=True)),
                        ("invalid", request(bad, policy)),
                    ],
                )
            )
            if tally.codes.get("UNAVAILABLE"):
                time.sleep(0.2)
                continue
            break
        assert tally is not None
        target = proc.pid
        if cmd[0] == "strace":  # signal the traced server itself, not strace (which would detach)
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            target = int(children[0])
        os.kill(target, signal.SIGTERM)
        code = proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return code, log.read_text(errors="replace"), {"codes": tally.codes, "wrong": tally.wrong}


def test_serve_on_a_read_only_root_filesystem(tmp_path: Path) -> None:
    need(
        shutil.which("unshare") is not None
        and _can(["unshare", "-m", "--propagation", "private", "true"]),
        "unshare -m (a private mount namespace) is not permitted here",
    )
    address = f"127.0.0.1:{free_port()}"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SACK8S": SACK8S,
        "ADDRESS": address,
        "HOME_WAS": str(tmp_path),
        "HOME": "/nonexistent",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        **({"SACK8S_SHARED": os.environ["SACK8S_SHARED"]} if "SACK8S_SHARED" in os.environ else {}),
    }
    code, out, tally = _serve_and_use(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", READONLY_ALL],
        env,
        address,
        tmp_path / "ro.log",
    )
    assert "still writable" not in out, out
    assert tally == {"codes": {"OK": 2}, "wrong": []}, (tally, out[-3000:])
    assert code == 0, out[-3000:]
    assert "Traceback" not in out and "Read-only file system" not in out, out[-3000:]


WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND")


def test_serve_never_writes_a_file(tmp_path: Path) -> None:
    need(
        shutil.which("strace") is not None
        and _can(["strace", "-f", "-qq", "-e", "trace=openat", "-o", "/dev/null", "true"]),
        "strace is not installed or ptrace is not permitted here",
    )
    address = f"127.0.0.1:{free_port()}"
    trace = tmp_path / "strace.log"
    env = {**os.environ, "HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [
        "strace",
        "-f",
        "-qq",
        "-o",
        str(trace),
        "-e",
        "trace=open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,truncate,ftruncate",
        SACK8S,
        "serve",
        "--insecure",
        "--address",
        address,
    ]
    code, out, tally = _serve_and_use(cmd, env, address, tmp_path / "serve.log")
    assert tally == {"codes": {"OK": 2}, "wrong": []}, (tally, out[-3000:])
    traced = trace.read_text(errors="replace").splitlines()
    assert sum("openat(" in ln for ln in traced) > 100, (
        "strace saw no file activity: the trace is not working"
    )
    writes = []
    for line in traced:
        if (
            re.search(r"\b(creat|mkdir|mkdirat|rename|renameat2?|unlink|unlinkat|truncate)\(", line)
            and "= -1" not in line
        ):
            writes.append(line)
        elif re.search(r"\bopen(at)?\(", line) and WRITE_FLAGS.search(line):
            path = re.search(r'"([^"]*)"', line)
            if path and not path.group(1).startswith(("/dev/", "/proc/")):
                writes.append(line)
    assert writes == [], "sack8s serve wrote to the filesystem:\n" + "\n".join(writes[:20])


# -- the Dockerfile and the package metadata -------------------------------------------------------


def dockerfile() -> list[str]:
    text = (REPO / "Dockerfile").read_text()
    return [
        ln.strip()
        for ln in text.replace("\\\n", " ").splitlines()
        if ln.strip() and not ln.strip().startswith("#")
    ]


def test_dockerfile_rules() -> None:
    lines = dockerfile()
    args = {m.group(1): m.group(2) for ln in lines if (m := re.match(r"ARG (\w+)=(\S+)", ln))}
    froms = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2 and len(set(froms)) == 1, (
        "builder and runtime must use the same base (same Python)"
    )
    base = froms[0]
    if base.startswith("${"):
        base = args[base.strip("${}")]
    assert ":" in base and not base.endswith(":latest"), "pin the base image (DL3006/DL3007)"
    assert re.search(r":\d+\.\d+\.\d+-slim-\w+", base) or "@sha256:" in base, base
    users = [ln for ln in lines if ln.startswith("USER ")]
    assert (
        users and re.fullmatch(r"USER \d+:\d+", users[-1]) and not users[-1].startswith("USER 0")
    ), users
    assert not any(ln.startswith("ADD ") for ln in lines), "COPY, not ADD (DL3020)"
    entry = [ln for ln in lines if ln.startswith("ENTRYPOINT")]
    assert entry and entry[-1].startswith('ENTRYPOINT ["'), (
        "exec-form ENTRYPOINT (signals reach the server: SIGTERM drains)"
    )
    runtime = lines[[i for i, ln in enumerate(lines) if ln.startswith("FROM ")][1] :]
    env = " ".join(ln for ln in runtime if ln.startswith("ENV "))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert any("compileall" in ln for ln in lines), (
        "byte code compiled at build time (read-only root)"
    )
    assert any("PIP_NO_CACHE_DIR=1" in ln or "--no-cache-dir" in ln for ln in lines), "DL3042"
    assert not any(re.match(r"RUN .*\bapt-get install\b", ln) for ln in runtime), (
        "nothing installed at runtime"
    )
    assert "EXPOSE 9443" in lines


def test_dockerignore_keeps_the_context_small_but_buildable() -> None:
    ignored = [
        ln.strip()
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    for needed in ("pyproject.toml", "README.md", "function"):
        assert needed not in ignored
    for junk in (".venv", ".git", "tests", ".hypothesis"):
        assert junk in ignored, junk


def test_package_metadata_is_complete() -> None:
    meta = yaml.safe_load((REPO / "package/crossplane.yaml").read_text())
    assert meta["apiVersion"] == "meta.pkg.crossplane.io/v1" and meta["kind"] == "Function"
    ann = meta["metadata"]["annotations"]
    for key in ("maintainer", "source", "license", "description", "readme"):
        assert ann.get(f"meta.crossplane.io/{key}"), key
    assert ann["meta.crossplane.io/license"] == "Apache-2.0"
    assert meta["spec"]["crossplane"]["version"].startswith(">=")
    assert meta["metadata"].get("labels", {}).get("pkg.crossplane.io/function") or True
