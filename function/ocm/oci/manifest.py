"""OCI media types and finding an OCM component's descriptor in what a registry returns.

Layout written by the OCM CLI v0.9.x (FACTS.md §3): the component tag points to an OCI
*index*; the child whose ``artifactType`` is :data:`ARTIFACT_TYPE_DESCRIPTOR` is the
*descriptor manifest*; its config (:data:`MT_COMPONENT_CONFIG`) names the
``componentDescriptorLayer``. Older writers tag the descriptor manifest directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


class ManifestError(ValueError):
    """The registry's document does not have the shape the OCM layout needs (message is safe to show)."""


def is_manifest_media_type(media_type: str | None) -> bool:
    """True when a registry stores this media type as a manifest (served from ``/manifests/``)."""
    mt = (media_type or "").split(";", 1)[0].strip().lower()
    return mt in MANIFEST_TYPES or mt in INDEX_TYPES


def encode_tag(version: str) -> str:
    """OCM version -> OCI tag: ``+`` is not allowed in tags and becomes ``.build-``."""
    return version.replace("+", ".build-")


def decode_tag(tag: str) -> str:
    return tag.replace(".build-", "+")


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor (``mediaType``, ``digest``, ``size``, optional ``artifactType``)."""

    media_type: str
    digest: str
    size: int
    artifact_type: str | None = None


def parse_json_document(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ManifestError(f"{what} is not valid JSON") from None
    if not isinstance(doc, dict):
        raise ManifestError(f"{what} is not a JSON object")
    return doc


def _descriptor(entry: Any, what: str) -> Descriptor:
    if not isinstance(entry, Mapping):
        raise ManifestError(f"{what} is not an object")
    mt, digest, size = entry.get("mediaType"), entry.get("digest"), entry.get("size")
    if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) != 71:
        raise ManifestError(f"{what} has no sha256 digest")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ManifestError(f"{what} has no valid size")
    at = entry.get("artifactType")
    return Descriptor(
        mt if isinstance(mt, str) else "", digest, size, at if isinstance(at, str) else None
    )


def document_media_type(doc: Mapping[str, Any], content_type: str | None) -> str:
    """The media type of a fetched manifest document: its own ``mediaType`` field, else Content-Type."""
    mt = doc.get("mediaType")
    if isinstance(mt, str) and mt:
        return mt
    ct = (content_type or "").split(";", 1)[0].strip()
    if ct in MANIFEST_TYPES or ct in INDEX_TYPES:
        return ct
    # untyped schemaVersion 2 documents: an index has "manifests", a manifest has "layers"
    return MT_OCI_INDEX if "manifests" in doc else MT_OCI_MANIFEST


def find_descriptor_manifest(index: Mapping[str, Any]) -> Descriptor:
    """The index child whose ``artifactType`` is the OCM descriptor type (by type, never by position)."""
    children = index.get("manifests")
    if not isinstance(children, list):
        raise ManifestError("index has no manifests list")
    found = [
        _descriptor(c, f"index manifests[{i}]")
        for i, c in enumerate(children)
        if isinstance(c, Mapping) and c.get("artifactType") == ARTIFACT_TYPE_DESCRIPTOR
    ]
    if not found:
        raise ManifestError(f"index has no child with artifactType {ARTIFACT_TYPE_DESCRIPTOR}")
    if len(found) > 1:
        raise ManifestError(
            f"index has {len(found)} children with artifactType {ARTIFACT_TYPE_DESCRIPTOR}"
        )
    return found[0]


def manifest_config_and_layers(
    manifest: Mapping[str, Any],
) -> tuple[Descriptor, tuple[Descriptor, ...]]:
    config = _descriptor(manifest.get("config"), "manifest config")
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise ManifestError("manifest has no layers list")
    return config, tuple(_descriptor(l, f"manifest layers[{i}]") for i, l in enumerate(layers))


def component_descriptor_layer(
    config: Mapping[str, Any], layers: tuple[Descriptor, ...]
) -> Descriptor:
    """The layer the component config's ``componentDescriptorLayer`` names (it must be a layer)."""
    ref = _descriptor(
        config.get("componentDescriptorLayer"), "component config componentDescriptorLayer"
    )
    for layer in layers:
        if layer.digest == ref.digest:
            return Descriptor(ref.media_type or layer.media_type, ref.digest, ref.size)
    raise ManifestError("componentDescriptorLayer is not a layer of the descriptor manifest")
