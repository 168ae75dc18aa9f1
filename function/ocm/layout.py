"""The OCM layout in OCI storage: its vocabulary, and the one walk from a tag to a descriptor.

Layout written by the OCM CLI v0.9.x (``fixtures/ocm-cli-v0.9.1/FACTS.md`` §3) into a registry
and into a CTF alike: the component tag (``<version>``, ``+`` written as ``.build-``) of
repository ``component-descriptors/<component>`` points to an OCI *index*; the child whose
``artifactType`` is :data:`ARTIFACT_TYPE_DESCRIPTOR` is the *descriptor manifest*; its config
(:data:`MT_COMPONENT_CONFIG`) names the ``componentDescriptorLayer``. Older writers tag the
descriptor manifest directly (``reference/ocm.md``: spec §6.1; the index form is §6.2).

:func:`walk` reads that layout over any storage with ``read(digest, cap)``: the registry
(:mod:`function.ocm.oci.source`) and the CTF (:mod:`function.ocm.ctf`) keep only storage.
Where their two walks used to disagree, one rule holds for both:

* **the descriptor manifest of an index is found by ``artifactType``**, never by position and
  never by opening every child: every OCM writer that writes an index sets it (FACTS.md §3);
* **the legacy Gardener config type is read** (:data:`MT_COMPONENT_CONFIG_LEGACY`: ``ocm.md``
  says legacy ``vnd.gardener.cloud.cnudie`` types are read-only, and ``gardener-ocm`` writes
  it), and so is a manifest that carries the descriptor ``artifactType`` itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from function.errors import ComponentError, DigestMismatch
from function.ocm.descriptor import MAX_DESCRIPTOR_BYTES, parse_descriptor
from function.ocm.model import ComponentVersion, Layer, Repository

# --------------------------------------------------------------------------- vocabulary

MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_COMPONENT_CONFIG = "application/vnd.ocm.software.component.config.v1+json"
#: What Gardener's Python bindings (``gardener-ocm``) and older OCM writers use for the config.
MT_COMPONENT_CONFIG_LEGACY = "application/vnd.gardener.cloud.cnudie.component.config.v1+json"
COMPONENT_CONFIG_TYPES = frozenset({MT_COMPONENT_CONFIG, MT_COMPONENT_CONFIG_LEGACY})
ARTIFACT_TYPE_DESCRIPTOR = "application/vnd.ocm.software.component-descriptor.v2"

MANIFEST_TYPES = frozenset({MT_OCI_MANIFEST, MT_DOCKER_MANIFEST})
INDEX_TYPES = frozenset({MT_OCI_INDEX, MT_DOCKER_LIST})
#: Sent on every manifest GET: distribution 2.8 answers 404 for an index unless its type is listed.
ACCEPT_MANIFESTS = f"{MT_OCI_INDEX}, {MT_OCI_MANIFEST}, {MT_DOCKER_LIST}, {MT_DOCKER_MANIFEST}"

# Layer media types of the deployables (packaging.md §3).
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
FLUX_CONTENT_LAYER = "application/vnd.cncf.flux.content.v1.tar+gzip"
TAR_GZIP = "application/x-tar+gzip"
TAR_PLAIN = "application/x-tar"

#: ``sha256:<64 hex>``, the only digest storage is addressed by (group 1: the hex).
SHA256_RE = re.compile(r"^sha256:([0-9a-f]{64})$")
#: Any OCI digest (``algorithm:encoded``), as an access may spell it.
DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")

REPO_PREFIX = "component-descriptors/"
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_INDEX_CHILDREN = 256


class LayoutError(ValueError):
    """A document does not have the shape the OCM layout needs (the message is safe to show)."""


def bare(media_type: Any) -> str:
    """A media type without parameters, lower case (``a/b; x=y`` -> ``a/b``)."""
    return str(media_type or "").split(";", 1)[0].strip().lower()


def is_manifest_media_type(media_type: str | None) -> bool:
    """True when storage keeps this media type as a manifest (a registry serves it from
    ``/manifests/``).
    """
    mt = bare(media_type)
    return mt in MANIFEST_TYPES or mt in INDEX_TYPES


def is_sha256(digest: Any) -> bool:
    return isinstance(digest, str) and SHA256_RE.match(digest) is not None


def encode_tag(version: str) -> str:
    """OCM version -> OCI tag: ``+`` is not allowed in tags and becomes ``.build-``."""
    return version.replace("+", ".build-")


def decode_tag(tag: str) -> str:
    return tag.replace(".build-", "+")


def verify_digest(data: bytes, digest: str, where: str) -> None:
    """Refuse bytes whose SHA-256 differs from ``digest`` (``sha256:<hex>`` only)."""
    m = SHA256_RE.match(digest)
    if not m:
        raise ComponentError(where, f"digest {digest[:100]!r} is not a sha256:<64 hex> digest")
    actual = hashlib.sha256(data).hexdigest()
    if actual != m.group(1):
        raise DigestMismatch(
            where, f"blob {digest}: digest mismatch (content hashes to sha256:{actual})"
        )


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor (``mediaType``, ``digest``, ``size``, optional
    ``artifactType``).
    """

    media_type: str
    digest: str
    size: int
    artifact_type: str | None = None


def parse_json(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise LayoutError(f"{what} is not valid JSON") from None
    if not isinstance(doc, dict):
        raise LayoutError(f"{what} is not a JSON object")
    return doc


def descriptor(entry: Any, what: str) -> Descriptor:
    if not isinstance(entry, Mapping):
        raise LayoutError(f"{what} is not an OCI descriptor")
    mt, digest, size = entry.get("mediaType"), entry.get("digest"), entry.get("size")
    if not is_sha256(digest):
        raise LayoutError(f"{what} has no sha256 digest")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise LayoutError(f"{what} has no valid size")
    at = entry.get("artifactType")
    return Descriptor(
        mt if isinstance(mt, str) else "", digest, size, at if isinstance(at, str) else None
    )


def document_media_type(doc: Mapping[str, Any], stored_as: str | None) -> str:
    """A manifest document's media type: its own ``mediaType``, else what storage says it is,
    else its shape (an index has ``manifests``, a manifest has ``layers``).
    """
    mt = bare(doc.get("mediaType"))
    if mt:
        return mt
    stored = bare(stored_as)
    if stored in MANIFEST_TYPES or stored in INDEX_TYPES:
        return stored
    return MT_OCI_INDEX if "manifests" in doc else MT_OCI_MANIFEST


def index_children(index: Mapping[str, Any]) -> tuple[Descriptor, ...]:
    children = index.get("manifests")
    if not isinstance(children, list) or len(children) > MAX_INDEX_CHILDREN:
        raise LayoutError(f"has no list of at most {MAX_INDEX_CHILDREN} manifests")
    return tuple(descriptor(c, f"manifests[{i}]") for i, c in enumerate(children))


def find_descriptor_manifest(index: Mapping[str, Any]) -> Descriptor:
    """The index child whose ``artifactType`` is the OCM descriptor type (by type, never by
    position).
    """
    found = [c for c in index_children(index) if c.artifact_type == ARTIFACT_TYPE_DESCRIPTOR]
    if not found:
        raise LayoutError(f"has no child with artifactType {ARTIFACT_TYPE_DESCRIPTOR}")
    if len(found) > 1:
        raise LayoutError(f"has {len(found)} children with artifactType {ARTIFACT_TYPE_DESCRIPTOR}")
    return found[0]


def manifest_config_and_layers(
    manifest: Mapping[str, Any],
) -> tuple[Descriptor, tuple[Descriptor, ...]]:
    config = descriptor(manifest.get("config"), "config")
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise LayoutError("has no layers list")
    return config, tuple(descriptor(x, f"layers[{i}]") for i, x in enumerate(layers))


def component_descriptor_layer(
    config: Mapping[str, Any], layers: tuple[Descriptor, ...]
) -> Descriptor:
    """The layer the component config's ``componentDescriptorLayer`` names (it must be a layer)."""
    ref = descriptor(config.get("componentDescriptorLayer"), "componentDescriptorLayer")
    for layer in layers:
        if layer.digest == ref.digest:
            return Descriptor(ref.media_type or layer.media_type, ref.digest, ref.size)
    raise LayoutError(
        f"componentDescriptorLayer {ref.digest} is not a layer of the descriptor manifest"
    )


# --------------------------------------------------------------------------- the walk


class Read(Protocol):
    """How the walk reads storage: the verified bytes under ``digest``, refused past ``cap``.

    ``manifest`` says whether a registry serves it from ``/manifests/`` (a CTF does not
    care); ``what`` names it in errors (``component config sha256:…``).
    """

    def __call__(self, digest: str, cap: int, *, manifest: bool, what: str) -> Awaitable[bytes]: ...


@dataclass(frozen=True)
class Walked:
    """The component version, and every digest reachable from its tag (a CTF refuses others)."""

    component: ComponentVersion
    reachable: frozenset[str]


async def walk(
    read: Read,
    top_digest: str,
    *,
    place: str,
    name: str,
    version: str,
    repository: Repository | None,
    max_manifest_bytes: int = MAX_MANIFEST_BYTES,
    stored_as: str = "",
) -> Walked:
    """Tag target -> descriptor manifest -> config -> descriptor layer, the same for every storage.

    ``place`` names the storage in errors (``at registry H (repository R)``, ``in CTF P``);
    ``max_manifest_bytes`` caps manifests and configs; ``stored_as`` is the tag target's media
    type as storage lists it (a CTF's index entry).
    """
    where = f"component {name}:{version}"

    def fail(subject: str, problem: str) -> ComponentError:
        return ComponentError(where, f"{subject} {place}: {problem}")

    def shape(subject: str, call: Any) -> Any:
        try:
            return call()
        except LayoutError as e:
            raise fail(subject, str(e)) from None

    cap = max_manifest_bytes
    reachable: set[str] = {top_digest}
    top = await read(top_digest, cap, manifest=True, what=f"manifest {top_digest}")
    top_doc = shape(f"manifest {top_digest}", lambda: parse_json(top, "the document"))
    mt = document_media_type(top_doc, stored_as)
    if mt in INDEX_TYPES:
        children = shape(f"index {top_digest}", lambda: index_children(top_doc))
        reachable.update(c.digest for c in children)
        child = shape(f"index {top_digest}", lambda: find_descriptor_manifest(top_doc))
        if child.media_type and bare(child.media_type) not in MANIFEST_TYPES:
            raise fail(
                f"descriptor manifest {child.digest}", f"has media type {child.media_type[:100]!r}"
            )
        dm_digest = child.digest
        dm = await read(dm_digest, cap, manifest=True, what=f"descriptor manifest {dm_digest}")
        dm_doc = shape(f"descriptor manifest {dm_digest}", lambda: parse_json(dm, "the document"))
    elif mt in MANIFEST_TYPES:
        dm_digest, dm_doc = top_digest, top_doc
    else:
        raise fail(
            f"tag target {top_digest}", f"has media type {mt[:100]!r}, not a manifest or index"
        )

    config, layers = shape(
        f"descriptor manifest {dm_digest}", lambda: manifest_config_and_layers(dm_doc)
    )
    if (
        bare(config.media_type) not in COMPONENT_CONFIG_TYPES
        and dm_doc.get("artifactType") != ARTIFACT_TYPE_DESCRIPTOR
    ):
        raise fail(
            f"manifest {dm_digest}",
            "is not an OCM component descriptor manifest (config media type "
            f"{config.media_type[:100]!r})",
        )
    reachable.add(config.digest)
    reachable.update(x.digest for x in layers)
    cfg = await read(config.digest, cap, manifest=False, what=f"component config {config.digest}")
    cfg_doc = shape(f"component config {config.digest}", lambda: parse_json(cfg, "the document"))
    layer = shape(
        f"component config {config.digest}", lambda: component_descriptor_layer(cfg_doc, layers)
    )
    raw = await read(
        layer.digest,
        MAX_DESCRIPTOR_BYTES,
        manifest=False,
        what=f"component descriptor {layer.digest}",
    )
    parsed = parse_descriptor(raw, layer.media_type or None, where)
    if parsed.name != name or parsed.version != version:
        raise fail(
            f"component descriptor {layer.digest}",
            f"the stored descriptor is {parsed.name}:{parsed.version}, not {name}:{version}",
        )
    cv = ComponentVersion(
        descriptor=parsed,
        repository=repository,
        descriptor_digest=dm_digest,
        layers=tuple(Layer(x.media_type, x.digest, x.size) for x in layers),
    )
    return Walked(cv, frozenset(reachable))
