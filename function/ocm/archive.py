"""Safe, in-memory extraction of the tar and tar.gz blobs a component ships.

Helm charts and Kustomize directories arrive as archives written by someone else. They are
never written to disk here: extraction yields ``{relative path: bytes}``. That removes the
classic tar attacks on the filesystem, but not the ones on memory and on meaning, so:

* the gzip stream is decompressed by hand, chunk by chunk, and refused as soon as it expands
  past the cap (``tarfile``'s own ``r:gz`` would inflate everything first);
* entry count, per-file size and total size are capped;
* absolute paths, ``..`` components, symlinks, hardlinks and devices are refused (a later
  consumer, Flux or Helm, *does* write them to disk), and so are duplicate names, whose
  meaning depends on the reader;
* ``./`` prefixes (``ocm``'s ``dir`` input writes ``./deployment.yaml``) are normalised away.

Every error names the resource (``where``) and the entry at fault.
"""

from __future__ import annotations

import io
import tarfile
import zlib
from collections.abc import Callable, Iterator

from function.errors import ComponentError

GZIP_MAGIC = b"\x1f\x8b"
MAX_ENTRIES = 4096
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024
_TAR_OVERHEAD_PER_ENTRY = 3 * 512  # header, PAX/long-name header, padding


def is_gzip(data: bytes) -> bool:
    return data[:2] == GZIP_MAGIC


def gunzip_capped(data: bytes, where: str, *, max_bytes: int) -> bytes:
    """Decompress a (possibly multi-member) gzip stream, refusing once it passes ``max_bytes``."""
    out = bytearray()
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        buf = rest
        try:
            while True:
                chunk = d.decompress(buf, _CHUNK)
                out += chunk
                if len(out) > max_bytes:
                    raise ComponentError(
                        where,
                        f"archive expands to more than {max_bytes} bytes when decompressed (gzip "
                        "bomb?)",
                    )
                buf = d.unconsumed_tail
                if d.eof or (not buf and not chunk):
                    break
        except zlib.error:
            raise ComponentError(where, "archive is not a valid gzip stream") from None
        if not d.eof:
            raise ComponentError(where, "archive gzip stream is truncated")
        rest = d.unused_data
        # Trailing zero padding after the last member is tolerated (some writers pad).
        if rest and not rest.startswith(GZIP_MAGIC):
            if rest.strip(b"\x00"):
                raise ComponentError(where, "archive has trailing data after the gzip stream")
            break
    return bytes(out)


def _normalise(name: str, where: str) -> str | None:
    """Relative POSIX path of an entry, ``None`` for the archive root; raise on unsafe names."""
    if "\x00" in name:
        raise ComponentError(where, f"archive entry {name[:120]!r}: NUL in the name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":") or name.startswith("\\"):
        raise ComponentError(where, f"archive entry {name[:120]!r}: absolute path refused")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ComponentError(where, f"archive entry {name[:120]!r}: path traversal ('..') refused")
    return "/".join(parts) or None


def tar_entries(
    raw: bytes, where: str, *, what: str, max_entries: int
) -> Iterator[tuple[tarfile.TarInfo, Callable[[], bytes]]]:
    """The one walk over an (uncompressed) tar: ``(member, read)`` per entry, refusing past
    ``max_entries`` and on a bad header; ``read()`` returns the member's bytes, refusing a
    truncated one. ``what`` names the archive in errors (``archive``, ``component descriptor tar``).
    """
    try:
        tf = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
    except (tarfile.TarError, EOFError, ValueError, OverflowError):
        raise ComponentError(where, f"{what} is not a valid tar archive") from None
    count = 0
    with tf:
        while True:
            try:
                member = tf.next()
            except (tarfile.TarError, EOFError, ValueError, OverflowError):
                raise ComponentError(where, f"{what} is corrupt (bad tar header)") from None
            if member is None:
                return
            count += 1
            if count > max_entries:
                raise ComponentError(where, f"{what} has more than {max_entries} entries")

            def read(m: tarfile.TarInfo = member) -> bytes:
                try:
                    fh = tf.extractfile(m)
                    content = fh.read() if fh is not None else b""
                except (tarfile.TarError, EOFError, ValueError, OSError):
                    raise ComponentError(
                        where, f"{what} entry {m.name[:120]!r} is truncated"
                    ) from None
                if len(content) != m.size:
                    raise ComponentError(where, f"{what} entry {m.name[:120]!r} is truncated")
                return content

            yield member, read


def extract_archive(
    data: bytes,
    where: str,
    *,
    require_gzip: bool = False,
    max_entries: int = MAX_ENTRIES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> dict[str, bytes]:
    """Regular files of a tar or tar.gz (gzip detected by magic) as ``{path: bytes}``.

    Directories are implied by the paths and not returned. ``require_gzip`` refuses a plain
    tar (for media types that promise gzip).
    """
    if is_gzip(data):
        raw = gunzip_capped(
            data, where, max_bytes=max_total_bytes + _TAR_OVERHEAD_PER_ENTRY * (max_entries + 2)
        )
    elif require_gzip:
        raise ComponentError(
            where,
            "archive is declared gzip-compressed but does not start with the gzip magic 1f 8b",
        )
    else:
        raw = data
    files: dict[str, bytes] = {}
    total = 0
    for member, read in tar_entries(raw, where, what="archive", max_entries=max_entries):
        shown = member.name[:120]
        path = _normalise(member.name, where)
        if member.issym() or member.islnk():
            kind = "symlink" if member.issym() else "hardlink"
            raise ComponentError(where, f"archive entry {shown!r}: {kind} refused")
        if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
            raise ComponentError(where, f"archive entry {shown!r}: device or FIFO refused")
        if member.isdir():
            continue
        if not member.isfile():
            raise ComponentError(
                where, f"archive entry {shown!r}: unsupported entry type {member.type!r}"
            )
        if path is None:
            raise ComponentError(where, f"archive entry {shown!r}: a file without a name")
        if member.size > max_file_bytes:
            raise ComponentError(
                where,
                f"archive entry {shown!r} is {member.size} bytes, more than the {max_file_bytes} "
                "byte limit",
            )
        total += member.size
        if total > max_total_bytes:
            raise ComponentError(
                where, f"archive content is more than {max_total_bytes} bytes in total"
            )
        if path in files:
            raise ComponentError(where, f"archive entry {shown!r}: duplicate path {path!r}")
        files[path] = read()
    return files


def helm_chart_files(tgz: bytes, where: str, **caps: int) -> dict[str, bytes]:
    """A packaged Helm chart's files with the chart's top directory stripped (``values.yaml``).

    ``helm package`` puts everything under ``<chart name>/``; exactly one top directory and a
    ``Chart.yaml`` in it are required.
    """
    files = extract_archive(tgz, where, require_gzip=True, **caps)
    tops = {p.split("/", 1)[0] for p in files}
    if len(tops) != 1 or any("/" not in p for p in files):
        raise ComponentError(
            where,
            "Helm chart archive must hold exactly one top directory, found "
            f"{', '.join(sorted(tops))[:200] or 'none'}",
        )
    top = tops.pop()
    stripped = {p.split("/", 1)[1]: b for p, b in files.items()}
    if "Chart.yaml" not in stripped:
        raise ComponentError(where, f"Helm chart archive has no {top}/Chart.yaml")
    return stripped
