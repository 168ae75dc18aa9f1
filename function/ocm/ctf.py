"""A Common Transport Format (CTF) directory as a component source.

A CTF is what ``ocm add component-version --repository ctf::DIR`` writes (observed with the
OCM CLI v0.9.1, ``fixtures/ocm-cli-v0.9.1/ctf``)::

    artifact-index.json            {"schemaVersion":1,"artifacts":[{repository, tag?, digest, mediaType}]}
    blobs/sha256.<hex>             every manifest, index, config and layer, content-addressed

The tag ``<version>`` (``+`` written as ``.build-``) of repository
``component-descriptors/<component>`` points to an OCI image index whose child with
``artifactType: application/vnd.ocm.software.component-descriptor.v2`` is the descriptor
manifest (found by type, never by position), or, for older writers, directly to that
manifest. Its config names ``componentDescriptorLayer``.

A CTF is often a *mirror* of the registry the cluster will pull from (an offline render, a
CI check before ``ocm transfer``): ``repository`` is that registry's address and becomes
``ComponentVersion.repository``, so localized references name the registry, never the path.

Every blob read here is size-capped before it is read and SHA-256 verified after, because a
CTF can come from anywhere (a CI artifact, a tarball from another team).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from function.errors import ComponentError
from function.ocm.access import INDEX_MEDIA_TYPES, MANIFEST_MEDIA_TYPES
from function.ocm.descriptor import COMPONENT_NAME_RE, MEDIA_TYPE_JSON, parse_descriptor
from function.ocm.model import ComponentVersion, Layer, Repository

DESCRIPTOR_ARTIFACT_TYPE = "application/vnd.ocm.software.component-descriptor.v2"
COMPONENT_CONFIG_MEDIA_TYPE = "application/vnd.ocm.software.component.config.v1+json"
INDEX_FILE = "artifact-index.json"
REPO_PREFIX = "component-descriptors/"

MAX_INDEX_BYTES = 16 * 1024 * 1024
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_BLOB_BYTES = 256 * 1024 * 1024
MAX_INDEX_CHILDREN = 256

_SHA256 = re.compile(r"^sha256:([0-9a-f]{64})$")


def encode_tag(version: str) -> str:
    """OCI tags cannot hold ``+``: OCM writes ``.build-`` instead."""
    return version.replace("+", ".build-")


def decode_tag(tag: str) -> str:
    return tag.replace(".build-", "+")


def verify_digest(data: bytes, digest: str, where: str) -> None:
    """Refuse bytes whose SHA-256 differs from ``digest`` (``sha256:<hex>`` only)."""
    m = _SHA256.match(digest)
    if not m:
        raise ComponentError(where, f"digest {digest[:100]!r} is not a sha256:<64 hex> digest")
    actual = hashlib.sha256(data).hexdigest()
    if actual != m.group(1):
        raise ComponentError(where, f"blob {digest}: digest mismatch (content hashes to sha256:{actual})")



def read_capped(path: Path, max_bytes: int, where: str, what: str, place: str) -> bytes:
    """A local file's bytes, refusing past ``max_bytes`` (checked before and while reading)."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ComponentError(where, f"{what} is {size} bytes, more than the {max_bytes} byte limit")
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
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ComponentError(where, f"{what} is not valid JSON") from None
    if not isinstance(doc, dict):
        raise ComponentError(where, f"{what} must be a JSON object")
    return doc


def _bare(media_type: Any) -> str:
    return str(media_type or "").split(";", 1)[0].strip().lower()


def _descriptor_entry(entry: Any, what: str, where: str) -> tuple[str, str, int]:
    """``(mediaType, digest, size)`` of an OCI descriptor, validated."""
    if not isinstance(entry, Mapping):
        raise ComponentError(where, f"{what} is not an OCI descriptor")
    mt, digest, size = entry.get("mediaType"), entry.get("digest"), entry.get("size", 0)
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise ComponentError(where, f"{what}.digest is missing or not a sha256 digest")
    if not isinstance(mt, str):
        mt = ""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ComponentError(where, f"{what}.size is not a non-negative integer")
    return mt, digest, size


ReadFn = Callable[[str, int], bytes]


def resolve_component_version(
    read: ReadFn, top_digest: str, top_media_type: str, *, name: str, version: str, repository: Repository | None,
    where: str,
) -> tuple[ComponentVersion, frozenset[str]]:
    """Walk tag target → descriptor manifest → config → descriptor layer.

    ``read(digest, max_bytes)`` returns verified bytes. Returns the component version and
    every digest reachable from the tag (so ``blob`` can refuse digests of other components).
    """
    reachable: set[str] = {top_digest}
    top = load_json(read(top_digest, MAX_MANIFEST_BYTES), f"manifest {top_digest}", where)
    top_mt = _bare(top.get("mediaType") or top_media_type)
    if top_mt in INDEX_MEDIA_TYPES or "manifests" in top:
        children = top.get("manifests")
        if not isinstance(children, list) or len(children) > MAX_INDEX_CHILDREN:
            raise ComponentError(where, f"index {top_digest}: manifests must be a list of at most {MAX_INDEX_CHILDREN}")
        entries = [(_descriptor_entry(c, f"index {top_digest} manifests[{i}]", where), c) for i, c in enumerate(children)]
        for (mt, d, _), _c in entries:
            reachable.add(d)
        typed = [e for e in entries if isinstance(e[1], Mapping) and e[1].get("artifactType") == DESCRIPTOR_ARTIFACT_TYPE]
        if len(typed) > 1:
            raise ComponentError(where, f"index {top_digest} has {len(typed)} component descriptor manifests")
        if typed:
            manifest_digest = typed[0][0][1]
            manifest = load_json(read(manifest_digest, MAX_MANIFEST_BYTES), f"manifest {manifest_digest}", where)
        else:
            # No artifactType on the children (other writers): look for the OCM config inside.
            found: list[tuple[str, dict[str, Any]]] = []
            for (mt, d, _), _c in entries:
                if _bare(mt) not in MANIFEST_MEDIA_TYPES:
                    continue
                m = load_json(read(d, MAX_MANIFEST_BYTES), f"manifest {d}", where)
                cfg = m.get("config")
                if isinstance(cfg, Mapping) and _bare(cfg.get("mediaType")) == COMPONENT_CONFIG_MEDIA_TYPE:
                    found.append((d, m))
            if len(found) != 1:
                raise ComponentError(
                    where, f"index {top_digest} has {len(found)} component descriptor manifests (expected 1)"
                )
            manifest_digest, manifest = found[0]
    else:
        manifest_digest, manifest = top_digest, top
    reachable.add(manifest_digest)

    cfg_mt, cfg_digest, _ = _descriptor_entry(manifest.get("config"), f"manifest {manifest_digest} config", where)
    if _bare(cfg_mt) != COMPONENT_CONFIG_MEDIA_TYPE:
        raise ComponentError(
            where, f"manifest {manifest_digest} is not a component descriptor manifest (config mediaType {cfg_mt[:100]!r})"
        )
    raw_layers = manifest.get("layers")
    if not isinstance(raw_layers, list):
        raise ComponentError(where, f"manifest {manifest_digest}: layers must be a list")
    layers = tuple(
        Layer(media_type=mt, digest=d, size=s)
        for mt, d, s in (
            _descriptor_entry(entry, f"manifest {manifest_digest} layers[{i}]", where) for i, entry in enumerate(raw_layers)
        )
    )
    reachable.add(cfg_digest)
    reachable.update(layer.digest for layer in layers)
    config = load_json(read(cfg_digest, MAX_MANIFEST_BYTES), f"config {cfg_digest}", where)
    cd_mt, cd_digest, _ = _descriptor_entry(
        config.get("componentDescriptorLayer"), "config componentDescriptorLayer", where
    )
    if cd_digest not in {layer.digest for layer in layers}:
        raise ComponentError(where, f"componentDescriptorLayer {cd_digest} is not a layer of manifest {manifest_digest}")
    descriptor = parse_descriptor(read(cd_digest, MAX_MANIFEST_BYTES), cd_mt or MEDIA_TYPE_JSON, where)
    if descriptor.name != name or descriptor.version != version:
        raise ComponentError(
            where, f"the stored descriptor is {descriptor.name}:{descriptor.version}, not {name}:{version}"
        )
    cv = ComponentVersion(descriptor=descriptor, repository=repository, descriptor_digest=manifest_digest, layers=layers)
    return cv, frozenset(reachable)


class CtfSource:
    """:class:`~function.ocm.source.ComponentSource` over a CTF directory as the OCM CLI writes it."""

    def __init__(self, path: Path, repository: Repository | None = None, *, max_blob_bytes: int = MAX_BLOB_BYTES) -> None:
        self.path = Path(path)
        self.repository = repository
        self.max_blob_bytes = max_blob_bytes
        self._index: list[dict[str, Any]] | None = None
        self._reachable: dict[tuple[str, str], frozenset[str]] = {}

    def __repr__(self) -> str:
        return f"CtfSource({str(self.path)!r}, repository={self.repository!r})"

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
                    raise ComponentError(self._where, f"{INDEX_FILE} is larger than {MAX_INDEX_BYTES} bytes")
                data = index_path.read_bytes()
            except FileNotFoundError:
                if not self.path.exists():
                    raise ComponentError(self._where, f"{self.path} does not exist") from None
                if not self.path.is_dir():
                    raise ComponentError(self._where, f"{self.path} is a file, not a CTF directory") from None
                raise ComponentError(self._where, f"is not a CTF: {INDEX_FILE} not found") from None
            except OSError as e:
                raise ComponentError(self._where, f"cannot read {INDEX_FILE} ({type(e).__name__})") from None
            doc = load_json(data, INDEX_FILE, self._where)
            artifacts = doc.get("artifacts")
            if artifacts is None:
                artifacts = []
            if not isinstance(artifacts, list) or not all(isinstance(a, dict) for a in artifacts):
                raise ComponentError(self._where, f"{INDEX_FILE}: artifacts must be a list of objects")
            self._index = artifacts
        return self._index

    def _read(self, digest: str, max_bytes: int, where: str) -> bytes:
        m = _SHA256.match(digest)
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
        return sorted(r[len(REPO_PREFIX):] for r in repos if isinstance(r, str) and r.startswith(REPO_PREFIX))

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
                raise ComponentError(where, f"component not found in {self._where} (it holds: {held})")
            shown = ", ".join(available[-10:])
            raise ComponentError(where, f"not found in {self._where} (versions there: {shown})")
        digests = {a.get("digest") for a in hits}
        if len(digests) != 1:
            raise ComponentError(where, f"{INDEX_FILE} lists tag {tag} with {len(digests)} different digests")
        entry = hits[0]
        digest = entry.get("digest")
        if not isinstance(digest, str):
            raise ComponentError(where, f"{INDEX_FILE}: tag {tag} has no digest")
        cv, reachable = resolve_component_version(
            lambda d, cap: self._read(d, cap, where),
            digest,
            str(entry.get("mediaType") or ""),
            name=component,
            version=version,
            repository=self.repository,
            where=where,
        )
        self._reachable[(component, version)] = reachable
        return cv

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:
        """Bytes of ``digest``, verified; manifests (by ``media_type``) get the smaller manifest cap.

        A CTF stores manifests and blobs alike under ``blobs/``. A fetched manifest's config
        and layers become readable too (a Helm chart child manifest → its chart layer).
        """
        where = f"component {cv.name}:{cv.version}"
        is_manifest = _bare(media_type) in MANIFEST_MEDIA_TYPES | INDEX_MEDIA_TYPES
        if not _SHA256.match(digest):
            raise ComponentError(where, f"digest {digest[:100]!r} is not a sha256:<64 hex> digest")
        reachable = self._reachable.get((cv.name, cv.version))
        if reachable is not None and digest not in reachable:
            raise ComponentError(where, f"blob {digest} is not part of this component version in {self._where}")
        data = self._read(digest, MAX_MANIFEST_BYTES if is_manifest else self.max_blob_bytes, where)
        if is_manifest and reachable is not None:
            doc = load_json(data, f"manifest {digest}", where)
            more = set()
            for part in [doc.get("config")] + list(doc.get("layers") or []) + list(doc.get("manifests") or []):
                if isinstance(part, Mapping) and isinstance(part.get("digest"), str):
                    more.add(part["digest"])
            self._reachable[(cv.name, cv.version)] = reachable | more
        return data
