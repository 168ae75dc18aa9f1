"""A Common Transport Format (CTF) directory as a component source.

A CTF is what ``ocm add component-version --repository ctf::DIR`` writes (observed with the
OCM CLI v0.9.1, ``fixtures/ocm-cli-v0.9.1/ctf``)::

    artifact-index.json            {"schemaVersion":1,"artifacts":[{repository, tag?, digest,
mediaType}]}
    blobs/sha256.<hex>             every manifest, index, config and layer, content-addressed

The tag ``<version>`` (``+`` written as ``.build-``) of repository
``component-descriptors/<component>`` points to the same layout a registry holds; this
module only finds the tag and reads blobs, :func:`function.ocm.layout.walk` (the walk every
storage shares) does the rest.

A CTF is often a *mirror* of the registry the cluster will pull from (an offline render, a
CI check before ``ocm transfer``): ``repository`` is that registry's address and becomes
``ComponentVersion.repository``, so localized references name the registry, never the path.

Every blob read here is size-capped before it is read and SHA-256 verified after, because a
CTF can come from anywhere (a CI artifact, a tarball from another team).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from function.errors import ComponentError
from function.ocm.descriptor import COMPONENT_NAME_RE
from function.ocm.layout import (
    MAX_MANIFEST_BYTES,
    REPO_PREFIX,
    SHA256_RE,
    LayoutError,
    decode_tag,
    encode_tag,
    is_manifest_media_type,
    parse_json,
    verify_digest,
    walk,
)
from function.ocm.model import ComponentVersion, Repository

INDEX_FILE = "artifact-index.json"
MAX_INDEX_BYTES = 16 * 1024 * 1024
MAX_BLOB_BYTES = 256 * 1024 * 1024


def read_capped(path: Path, max_bytes: int, where: str, what: str, place: str) -> bytes:
    """A local file's bytes, refusing past ``max_bytes`` (checked before and while reading)."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ComponentError(
                where, f"{what} is {size} bytes, more than the {max_bytes} byte limit"
            )
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise ComponentError(where, f"{what} not found {place}") from None
    except OSError as e:
        raise ComponentError(where, f"cannot read {what} ({type(e).__name__})") from None
    if len(data) > max_bytes:
        raise ComponentError(where, f"{what} is more than the {max_bytes} byte limit")
    return data


def load_json(data: bytes, what: str, where: str) -> dict[str, Any]:
    try:
        return parse_json(data, what)
    except LayoutError as e:
        raise ComponentError(where, str(e)) from None


@dataclass(eq=False, repr=False)
class LocalSource:
    """What every component source in local files (this CTF, a component directory, a
    descriptor file: :mod:`function.ocm.directory`) is given: where it is, the registry it
    stands for (``repository``, module docstring) and the cap on one blob it reads.
    """

    path: Path
    repository: Repository | None = None
    _: KW_ONLY
    max_blob_bytes: int = MAX_BLOB_BYTES

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, repository={self.repository!r})"


@dataclass(eq=False, repr=False)
class CtfSource(LocalSource):
    """:class:`~function.ocm.source.ComponentSource` over a CTF directory as the OCM CLI writes
    it.
    """

    _index: list[dict[str, Any]] | None = field(default=None, init=False)
    _reachable: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict, init=False)

    # -- storage

    @property
    def _where(self) -> str:
        return f"CTF {self.path}"

    def _artifacts(self) -> list[dict[str, Any]]:
        if self._index is None:
            index_path = self.path / INDEX_FILE
            try:
                size = index_path.stat().st_size
                if size > MAX_INDEX_BYTES:
                    raise ComponentError(
                        self._where, f"{INDEX_FILE} is larger than {MAX_INDEX_BYTES} bytes"
                    )
                data = index_path.read_bytes()
            except FileNotFoundError:
                if not self.path.exists():
                    raise ComponentError(self._where, f"{self.path} does not exist") from None
                if not self.path.is_dir():
                    raise ComponentError(
                        self._where, f"{self.path} is a file, not a CTF directory"
                    ) from None
                raise ComponentError(self._where, f"is not a CTF: {INDEX_FILE} not found") from None
            except OSError as e:
                raise ComponentError(
                    self._where, f"cannot read {INDEX_FILE} ({type(e).__name__})"
                ) from None
            doc = load_json(data, INDEX_FILE, self._where)
            artifacts = doc.get("artifacts")
            if artifacts is None:
                artifacts = []
            if not isinstance(artifacts, list) or not all(isinstance(a, dict) for a in artifacts):
                raise ComponentError(
                    self._where, f"{INDEX_FILE}: artifacts must be a list of objects"
                )
            self._index = artifacts
        return self._index

    def _read(self, digest: str, max_bytes: int, where: str) -> bytes:
        m = SHA256_RE.match(digest)
        if not m:
            raise ComponentError(where, f"digest {digest[:100]!r} is not a sha256:<64 hex> digest")
        blob_path = self.path / "blobs" / f"sha256.{m.group(1)}"
        data = read_capped(blob_path, max_bytes, where, f"blob {digest}", f"in {self._where}")
        verify_digest(data, digest, where)
        return data

    # -- ComponentSource

    def components(self) -> list[str]:
        """The component names the CTF holds (every ``component-descriptors/<name>`` repository)."""
        repos = {a.get("repository") for a in self._artifacts()}
        return sorted(
            r[len(REPO_PREFIX) :] for r in repos if isinstance(r, str) and r.startswith(REPO_PREFIX)
        )

    async def list_versions(self, component: str) -> list[str]:
        repo = REPO_PREFIX + component
        tags = {a.get("tag") for a in self._artifacts() if a.get("repository") == repo}
        return sorted(decode_tag(t) for t in tags if isinstance(t, str) and t)

    async def get(self, component: str, version: str) -> ComponentVersion:
        where = f"component {component}:{version}"
        if not COMPONENT_NAME_RE.match(component):
            raise ComponentError(where, "is not a valid OCM component name")
        repo, tag = REPO_PREFIX + component, encode_tag(version)
        hits = [a for a in self._artifacts() if a.get("repository") == repo and a.get("tag") == tag]
        if not hits:
            available = await self.list_versions(component)
            if not available:
                held = ", ".join(self.components()[:20]) or "none"
                raise ComponentError(
                    where, f"component not found in {self._where} (it holds: {held})"
                )
            shown = ", ".join(available[-10:])
            raise ComponentError(where, f"not found in {self._where} (versions there: {shown})")
        digests = {a.get("digest") for a in hits}
        if len(digests) != 1:
            raise ComponentError(
                where, f"{INDEX_FILE} lists tag {tag} with {len(digests)} different digests"
            )
        entry = hits[0]
        digest = entry.get("digest")
        if not isinstance(digest, str):
            raise ComponentError(where, f"{INDEX_FILE}: tag {tag} has no digest")

        async def read(d: str, cap: int, *, manifest: bool, what: str) -> bytes:  # noqa: ARG001
            try:
                return self._read(d, cap, where)
            except ComponentError as e:  # the same class: a DigestMismatch stays one
                raise type(e)(where, f"reading {what} in {self._where}: {e.message}") from None

        walked = await walk(
            read,
            digest,
            place=f"in {self._where}",
            name=component,
            version=version,
            repository=self.repository,
            stored_as=str(entry.get("mediaType") or ""),
        )
        self._reachable[(component, version)] = walked.reachable
        return walked.component

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:
        """Bytes of ``digest``, verified; manifests (by ``media_type``) get the smaller manifest
        cap.

        A CTF stores manifests and blobs alike under ``blobs/``. A fetched manifest's config
        and layers become readable too (a Helm chart child manifest → its chart layer).
        """
        where = f"component {cv.name}:{cv.version}"
        is_manifest = is_manifest_media_type(media_type)
        if not SHA256_RE.match(digest):
            raise ComponentError(where, f"digest {digest[:100]!r} is not a sha256:<64 hex> digest")
        reachable = self._reachable.get((cv.name, cv.version))
        if reachable is not None and digest not in reachable:
            raise ComponentError(
                where, f"blob {digest} is not part of this component version in {self._where}"
            )
        data = self._read(digest, MAX_MANIFEST_BYTES if is_manifest else self.max_blob_bytes, where)
        if is_manifest and reachable is not None:
            doc = load_json(data, f"manifest {digest}", where)
            more = set()
            for part in [
                doc.get("config"),
                *list(doc.get("layers") or []),
                *list(doc.get("manifests") or []),
            ]:
                if isinstance(part, Mapping) and isinstance(part.get("digest"), str):
                    more.add(part["digest"])
            self._reachable[(cv.name, cv.version)] = reachable | more
        return data
