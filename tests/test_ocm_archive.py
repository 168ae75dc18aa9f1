"""Safe archive extraction: the real blobs, and the bombs and escapes it must refuse."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from function.errors import ComponentError
from function.ocm.archive import extract_archive, gunzip_capped, helm_chart_files

W = "component acme.org/x:1.0 resource manifests"


def _tar(entries: list[tarfile.TarInfo | tuple[str, bytes]], *, gz: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            if isinstance(e, tuple):
                info = tarfile.TarInfo(e[0])
                info.size = len(e[1])
                tf.addfile(info, io.BytesIO(e[1]))
            else:
                tf.addfile(e)
    data = buf.getvalue()
    return gzip.compress(data) if gz else data


def _special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def test_real_blobs(fixtures_dir: Path) -> None:
    blobs = fixtures_dir / "ctf" / "blobs"
    chart = helm_chart_files(
        (
            blobs / "sha256.b066b463394241cbe4fe377c9c99e6b968b06a7ae6fcf1477bf65b5bdf207f8b"
        ).read_bytes(),
        W,
    )
    assert set(chart) == {"Chart.yaml", "values.yaml", "templates/deployment.yaml"}
    tgz = extract_archive(
        (
            blobs / "sha256.8e58f26c448517d24f1aa8900dee2092e683ebb7ff210198be8760a79f63ba97"
        ).read_bytes(),
        W,
        require_gzip=True,
    )
    plain = extract_archive(
        (
            blobs / "sha256.2bef48462c47fb8eabf5f64aec4984bf2f50a2bd67e07c40546eba424168f6bd"
        ).read_bytes(),
        W,
    )
    assert tgz == plain  # "./" prefixes normalised in both
    assert set(tgz) == {"configmap.yaml", "deployment.yaml", "kustomization.yaml"}


def test_dot_prefix_and_dirs_normalised() -> None:
    files = extract_archive(
        _tar([_special("./", tarfile.DIRTYPE), ("./a/./b.yaml", b"x"), ("c", b"y")], gz=True), W
    )
    assert files == {"a/b.yaml": b"x", "c": b"y"}


def test_gzip_bomb() -> None:
    bomb = gzip.compress(b"\0" * (80 * 1024 * 1024))
    assert len(bomb) < 200_000
    with pytest.raises(
        ComponentError,
        match=f"^{W}: archive expands to more than \\d+ bytes when decompressed \\(gzip bomb\\?\\)",
    ):
        extract_archive(bomb, W)
    with pytest.raises(ComponentError, match="gzip bomb"):
        gunzip_capped(gzip.compress(b"a" * 2000), W, max_bytes=1000)


def test_too_many_entries() -> None:
    data = _tar([(f"f{i}", b"") for i in range(50)], gz=True)
    with pytest.raises(ComponentError, match=f"^{W}: archive has more than 10 entries"):
        extract_archive(data, W, max_entries=10)


def test_file_and_total_caps() -> None:
    with pytest.raises(
        ComponentError, match="archive entry 'big' is 2000 bytes, more than the 1000 byte limit"
    ):
        extract_archive(_tar([("big", b"x" * 2000)]), W, max_file_bytes=1000)
    with pytest.raises(ComponentError, match="more than 1500 bytes in total"):
        extract_archive(_tar([("a", b"x" * 1000), ("b", b"x" * 1000)]), W, max_total_bytes=1500)


def test_traversal() -> None:
    with pytest.raises(
        ComponentError,
        match=f"^{W}: archive entry '../evil.yaml': path traversal \\('..'\\) refused",
    ):
        extract_archive(_tar([("../evil.yaml", b"x")], gz=True), W)
    with pytest.raises(ComponentError, match="path traversal"):
        extract_archive(_tar([("a/../../evil", b"x")]), W)


def test_absolute_path() -> None:
    with pytest.raises(
        ComponentError, match=f"^{W}: archive entry '/etc/passwd': absolute path refused"
    ):
        extract_archive(_tar([("/etc/passwd", b"x")], gz=True), W)


def test_symlink_hardlink_device() -> None:
    with pytest.raises(ComponentError, match="archive entry 'link': symlink refused"):
        extract_archive(_tar([_special("link", tarfile.SYMTYPE, "/etc/passwd")], gz=True), W)
    with pytest.raises(ComponentError, match="archive entry 'hard': hardlink refused"):
        extract_archive(_tar([("a", b"x"), _special("hard", tarfile.LNKTYPE, "a")]), W)
    with pytest.raises(ComponentError, match="archive entry 'dev': device or FIFO refused"):
        extract_archive(_tar([_special("dev", tarfile.CHRTYPE)]), W)
    with pytest.raises(ComponentError, match="device or FIFO"):
        extract_archive(_tar([_special("fifo", tarfile.FIFOTYPE)]), W)


def test_duplicates_and_garbage() -> None:
    with pytest.raises(ComponentError, match="duplicate path 'a'"):
        extract_archive(_tar([("a", b"1"), ("./a", b"2")]), W)
    with pytest.raises(ComponentError, match="not a valid tar archive|corrupt"):
        extract_archive(b"not a tar at all" * 100, W)
    with pytest.raises(ComponentError, match="not a valid gzip stream|truncated"):
        extract_archive(b"\x1f\x8b" + b"\x00" * 50, W)
    with pytest.raises(ComponentError, match="does not start with the gzip magic 1f 8b"):
        extract_archive(_tar([("a", b"1")]), W, require_gzip=True)


def test_helm_chart_layout() -> None:
    with pytest.raises(ComponentError, match="exactly one top directory"):
        helm_chart_files(_tar([("a/Chart.yaml", b""), ("b/values.yaml", b"")], gz=True), W)
    with pytest.raises(ComponentError, match="has no c/Chart.yaml"):
        helm_chart_files(_tar([("c/values.yaml", b"")], gz=True), W)
    assert helm_chart_files(
        _tar([("c/Chart.yaml", b"n"), ("c/values.yaml", b"v")], gz=True), W
    ) == {
        "Chart.yaml": b"n",
        "values.yaml": b"v",
    }


from hypothesis import given, settings
from hypothesis import strategies as st


@given(st.binary(max_size=2048))
@settings(max_examples=300, deadline=None)
def test_random_bytes_only_component_errors(data: bytes) -> None:
    for blob in (data, gzip.compress(data), b"\x1f\x8b" + data):
        try:
            extract_archive(blob, W)
        except ComponentError:
            pass
