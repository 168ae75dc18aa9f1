"""Requests as Crossplane sends them: a real Go re-serializer (benchmarks/crossplane-wire).

Crossplane's function runner marshals each request with grpc-go's default codec: every
protobuf map (every field of every ``Struct``) in Go's random map order, so the same content
is different bytes on every call; and it sets ``meta.tag`` to the hex SHA-256 of the
request's deterministic marshal. :class:`GoWire` builds the small Go program in
``benchmarks/crossplane-wire`` (google.golang.org/protobuf from the Go module proxy; no
generated code: the message types come from the SDK's own descriptors, written here) at
benchmark time, and streams requests through it. :func:`prove` checks what the benchmark
relies on: the copies differ byte-wise, parse back to the same request, and carry one tag.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import descriptor_pb2

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "crossplane-wire"
BUILD = HERE / ".peers" / "crossplane-wire"


def go_binary() -> str | None:
    """``go``: $SACK8S_GO, the PATH, or /usr/local/go/bin/go."""
    for c in (os.environ.get("SACK8S_GO"), shutil.which("go"), "/usr/local/go/bin/go"):
        if c and Path(c).exists():
            return c
    return None


def build(timeout: float = 600) -> tuple[Path, float]:
    """Build the re-serializer (module download included); returns it and the seconds taken."""
    go = go_binary()
    if go is None:
        raise RuntimeError("no Go toolchain (set SACK8S_GO or put go on PATH)")
    BUILD.mkdir(parents=True, exist_ok=True)
    exe = BUILD / "crossplane-wire"
    t0 = time.monotonic()
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "CGO_ENABLED": "0"}
    subprocess.run(
        [go, "build", "-o", str(exe), "."], cwd=SOURCE, env=env, check=True, timeout=timeout
    )
    return exe, time.monotonic() - t0


def descriptor_set(path: Path) -> Path:
    """The SDK's run_function.proto and its imports as a FileDescriptorSet."""
    fds = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(fd) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        fds.file.append(proto)

    add(fnv1.DESCRIPTOR)
    path.write_bytes(fds.SerializeToString())
    return path


class GoWire:
    """Streams requests through the Go re-serializer: ``copies`` fresh serializations each."""

    def __init__(self, exe: Path) -> None:
        self.exe = exe
        self.dir = Path(tempfile.mkdtemp(prefix="sack8s-wire-"))
        self.fds = descriptor_set(self.dir / "fn.fds")

    def serialize(self, requests: Iterable[bytes], copies: int = 1) -> list[bytes]:
        src = self.dir / "in.bin"
        with src.open("wb") as f:
            for r in requests:
                f.write(struct.pack(">I", len(r)) + r)
        with src.open("rb") as stdin:
            out = subprocess.run(
                [str(self.exe), "-descriptors", str(self.fds), "-copies", str(copies)],
                stdin=stdin,
                capture_output=True,
                check=True,
                timeout=1800,
            ).stdout
        frames, i = [], 0
        while i < len(out):
            (n,) = struct.unpack(">I", out[i : i + 4])
            frames.append(out[i + 4 : i + 4 + n])
            i += 4 + n
        return frames

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def prove(wire: GoWire, req: fnv1.RunFunctionRequest, copies: int = 20) -> dict[str, object]:
    """What the benchmark relies on, checked on ``req``: distinct bytes, equal content, one
    tag (Go's deterministic marshal; Python's differs in field order, so the tag is Go's).
    """
    plain = fnv1.RunFunctionRequest()
    plain.CopyFrom(req)
    plain.ClearField("meta")
    frames = wire.serialize([plain.SerializeToString()], copies)
    parsed = [fnv1.RunFunctionRequest.FromString(b) for b in frames]
    tags = {p.meta.tag for p in parsed}
    for p in parsed:
        p.ClearField("meta")
    same = all(p == plain for p in parsed)
    python_tag = hashlib.sha256(plain.SerializeToString(deterministic=True)).hexdigest()
    out = {
        "copies": copies,
        "distinct_bytes": len(set(frames)),
        "content_equal": same,
        "tags": len(tags),
        "tag_equals_pythons_deterministic_sha256": tags == {python_tag},
    }
    if not (same and len(tags) == 1 and len(set(frames)) > 1):
        raise SystemExit(f"the Go re-serializer does not behave as Crossplane's codec: {out}")
    return out
