"""Fetching everything the pure core needs from a component, up front and through the seam.

``RunFunction`` awaits :func:`load_component` once per claim; afterwards composition is pure
and synchronous. All I/O goes through the :class:`ComponentSource` methods (``list_versions``,
``get``, ``blob``), so the same code reads a registry, a CTF or a directory.

What is fetched:

* the version: an exact version is used as is; a range is resolved against
  ``list_versions`` (:func:`function.ocm.versions.pick_version`);
* the **deployable** (a Helm chart or a Kustomize directory): its files, extracted safely
  (:mod:`function.ocm.archive`), plus the first bytes of the raw blob Flux will read
  (``blob_heads``, for the gzip check of :func:`function.ocm.access.flux_source`):

  - Helm chart, ``localBlob`` with an OCI manifest media type: the child manifest, then its
    one ``application/vnd.cncf.helm.chart.content.v1.tar+gzip`` layer, chart top directory
    stripped (``values.yaml``, ``templates/…``);
  - Kustomize, ``localBlob`` ``application/x-tar+gzip`` (or plain ``application/x-tar``: the
    contents are readable, Flux's refusal is reported by ``flux_source``);
  - Kustomize, ``localBlob`` OCI manifest holding a Flux artifact layer
    (``application/vnd.cncf.flux.content.v1.tar+gzip``);

* the **ConfigData** file: its bytes under the resource name.

``contents`` and ``blob_heads`` are keyed by :func:`function.ocm.source.resource_key`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from function.errors import ComponentError, SourceUnavailable
from function.ocm.access import (
    FLUX_CONTENT_LAYER,
    HELM_CHART_LAYER,
    LOCAL_BLOB,
    MANIFEST_MEDIA_TYPES,
    TAR_GZIP,
    TAR_PLAIN,
    normalize_access_type,
)
from function.ocm.archive import extract_archive, helm_chart_files
from function.ocm.model import TYPE_CONFIGDATA, TYPE_HELM_CHART, TYPE_KUSTOMIZE, ComponentVersion, Resource
from function.ocm.select import find_by_type, find_resource
from function.ocm.source import ComponentSource, LoadedComponent, resource_key
from function.ocm.versions import is_exact, pick_version, satisfies

HEAD_BYTES = 16
MAX_CONFIGDATA_BYTES = 1024 * 1024
DEPLOYABLE_TYPES = (TYPE_HELM_CHART, TYPE_KUSTOMIZE)

#: ``(resource name, extraIdentity)``; an empty name picks the single resource of the expected type.
ResourceSelector = tuple[str, Mapping[str, str]]


@dataclass(frozen=True)
class LoadRequest:
    """What to load, as one value (handy for caching and logging); see :func:`load_component`."""

    component: str
    version_constraint: str
    deployable: ResourceSelector | None = None
    configdata: ResourceSelector | None = None
    observed_version: str | None = None


async def load_component(
    source: ComponentSource,
    component: str,
    version_constraint: str,
    *,
    deployable: ResourceSelector | None = None,
    configdata: ResourceSelector | None = None,
    observed_version: str | None = None,
) -> LoadedComponent:
    """Resolve the version, read the descriptor and fetch the deployable and ConfigData content.

    ``deployable``/``configdata`` select resources by ``(name, extraIdentity)``; ``None`` skips
    that resource; an empty name takes the single resource of the type (``helmChart`` or
    ``kustomize.ocm.fluxcd.io`` for the deployable, ``configdata.ocm.software`` for ConfigData).
    ``observed_version`` (read back from the XR status) is reused when it still satisfies the
    constraint, so a range does not move on every reconcile; the result then says
    ``resolved_from="observed"``.
    """
    where = f"component {component}"
    resolved_from = ""
    if observed_version and satisfies(observed_version, version_constraint, where=where):
        cv = await source.get(component, observed_version)
        resolved_from = "observed"
    elif is_exact(version_constraint):
        exact = version_constraint.strip().lstrip("=").strip()
        try:
            cv = await source.get(component, exact)
        except SourceUnavailable:
            raise
        except ComponentError:
            # Tags may or may not carry the "v": resolve the spelling against what exists.
            cv = await source.get(component, pick_version(await source.list_versions(component), exact, where=where))
    else:
        version = pick_version(await source.list_versions(component), version_constraint, where=where)
        cv = await source.get(component, version)
    return await _load(source, cv, deployable, configdata, resolved_from)


async def load_request(source: ComponentSource, request: LoadRequest) -> LoadedComponent:
    """:func:`load_component` for a :class:`LoadRequest`."""
    return await load_component(
        source,
        request.component,
        request.version_constraint,
        deployable=request.deployable,
        configdata=request.configdata,
        observed_version=request.observed_version,
    )


async def _load(
    source: ComponentSource,
    cv: ComponentVersion,
    deployable: ResourceSelector | None,
    configdata: ResourceSelector | None,
    resolved_from: str,
) -> LoadedComponent:
    contents: dict[str, Mapping[str, bytes]] = {}
    heads: dict[str, bytes] = {}
    cwhere = f"component {cv.name}:{cv.version}"
    if deployable is not None:
        res = _select(cv, deployable, DEPLOYABLE_TYPES, cwhere)
        files, head = await fetch_deployable(source, cv, res)
        contents[resource_key(res)] = MappingProxyType(files)
        heads[resource_key(res)] = head
    if configdata is not None:
        res = _select(cv, configdata, (TYPE_CONFIGDATA,), cwhere)
        data = await fetch_file(source, cv, res)
        contents[resource_key(res)] = MappingProxyType({res.name: data})
    return LoadedComponent(
        component=cv,
        contents=MappingProxyType(contents),
        blob_heads=MappingProxyType(heads),
        resolved_from=resolved_from,
    )


def _select(cv: ComponentVersion, selector: ResourceSelector, types: tuple[str, ...], where: str) -> Resource:
    name, extra = selector
    if name:
        return find_resource(cv.descriptor, name, extra, where=where)
    if len(types) == 1:
        return find_by_type(cv.descriptor, types[0], where=where)
    matches = [r for r in cv.descriptor.resources if r.type in types]
    if len(matches) != 1:
        found = ", ".join(r.describe() for r in matches) or "none"
        raise ComponentError(
            where, f"has {len(matches)} resources of type {' or '.join(types)} ({found}); name the one to deploy"
        )
    return matches[0]


def _local_blob(cv: ComponentVersion, res: Resource, where: str) -> tuple[str, str]:
    """``(localReference, mediaType)`` of a localBlob resource, or a ComponentError."""
    raw = str(res.access.get("type", ""))
    if normalize_access_type(raw) != LOCAL_BLOB:
        raise ComponentError(
            where, f"access type {raw[:100]!r}: only localBlob content can be read from the component's storage"
        )
    ref, mt = res.access.get("localReference"), res.access.get("mediaType")
    if not isinstance(ref, str) or not ref:
        raise ComponentError(where, "access.localReference: missing")
    return ref, (mt if isinstance(mt, str) else "")


def _bare(mt: str) -> str:
    return mt.split(";", 1)[0].strip().lower()


async def _manifest_layer(
    source: ComponentSource, cv: ComponentVersion, ref: str, mt: str, layer_mt: str, where: str
) -> bytes:
    """The single layer of media type ``layer_mt`` of the child manifest ``ref``."""
    data = await source.blob(cv, ref, mt)
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ComponentError(where, f"manifest {ref} is not valid JSON") from None
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if not isinstance(layers, list):
        raise ComponentError(where, f"manifest {ref} has no layers")
    hits = [entry for entry in layers if isinstance(entry, dict) and _bare(str(entry.get("mediaType", ""))) == layer_mt]
    if len(hits) != 1:
        raise ComponentError(where, f"manifest {ref} has {len(hits)} layers of media type {layer_mt} (expected 1)")
    digest = hits[0].get("digest")
    if not isinstance(digest, str):
        raise ComponentError(where, f"manifest {ref}: layer {layer_mt} has no digest")
    return await source.blob(cv, digest, layer_mt)


async def fetch_deployable(source: ComponentSource, cv: ComponentVersion, res: Resource) -> tuple[dict[str, bytes], bytes]:
    """Files of a Helm chart or Kustomize resource, plus the first bytes of the blob Flux reads."""
    where = f"component {cv.name}:{cv.version} {res.describe()}"
    if res.type not in DEPLOYABLE_TYPES:
        raise ComponentError(
            where, f"resource type {res.type[:100]!r} is not a deployable (helmChart or {TYPE_KUSTOMIZE})"
        )
    ref, mt = _local_blob(cv, res, where)
    media = _bare(mt)
    if res.type == TYPE_HELM_CHART:
        if media not in MANIFEST_MEDIA_TYPES:
            raise ComponentError(
                where, f"a Helm chart must be an OCI chart manifest (mediaType {mt[:100]!r} is not supported)"
            )
        layer = await _manifest_layer(source, cv, ref, mt, HELM_CHART_LAYER, where)
        return helm_chart_files(layer, where), layer[:HEAD_BYTES]
    if res.type == TYPE_KUSTOMIZE:
        if media in MANIFEST_MEDIA_TYPES:
            layer = await _manifest_layer(source, cv, ref, mt, FLUX_CONTENT_LAYER, where)
            return extract_archive(layer, where, require_gzip=True), layer[:HEAD_BYTES]
        if media in (TAR_GZIP, TAR_PLAIN):
            data = await source.blob(cv, ref, mt)
            return extract_archive(data, where, require_gzip=media == TAR_GZIP), data[:HEAD_BYTES]
        raise ComponentError(where, f"Kustomize content with mediaType {mt[:100]!r} is not supported")
    raise ComponentError(where, f"resource type {res.type[:100]!r} is not a deployable (helmChart or {TYPE_KUSTOMIZE})")


async def fetch_file(
    source: ComponentSource, cv: ComponentVersion, res: Resource, *, max_bytes: int = MAX_CONFIGDATA_BYTES
) -> bytes:
    """The verbatim bytes of a single-file localBlob resource (the ConfigData file)."""
    where = f"component {cv.name}:{cv.version} {res.describe()}"
    ref, mt = _local_blob(cv, res, where)
    if _bare(mt) in MANIFEST_MEDIA_TYPES:
        raise ComponentError(where, f"mediaType {mt[:100]!r} is an OCI artifact, not a file")
    data = await source.blob(cv, ref, mt)
    if len(data) > max_bytes:
        raise ComponentError(where, f"is {len(data)} bytes, more than the {max_bytes} byte limit")
    return data
