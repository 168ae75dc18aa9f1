"""Fetching everything the pure core needs from a component, up front and through the seam.

``RunFunction`` resolves, selects and loads once per claim (``function.edge.sources``, through
:func:`resolve_version` and :func:`load_resources`); afterwards composition is pure
and synchronous. All I/O goes through the :class:`ComponentSource` methods (``list_versions``,
``get``, ``blob``), so the same code reads a registry, a CTF or a directory.

What is fetched:

* the version (:func:`resolve_version`, the one place a version is chosen): an exact version
  is used as is; a range is resolved against ``list_versions``
  (:func:`function.ocm.versions.choose`, sticky to the version resolved last time);
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

Every blob read for a resource is checked against the resource's declared digest
(:mod:`function.ocm.digests`) before anything is made of it, and the layer of an OCI
artifact against the digest its (checked) manifest names, so the chain from the descriptor to
the bytes never rests on the storage alone. ``verify=False`` (``--skip-digest-check``, tests
only) records the checks as skipped.

``contents``, ``blob_heads`` and ``digests`` are keyed by
:func:`function.ocm.source.resource_key`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType

from function.cache import Memos, memo
from function.errors import ComponentError, SackError
from function.ocm import digests
from function.ocm.access import CONTENT_LAYER, FLAVOUR_OF_TYPE, LOCAL_BLOB, normalize_access_type
from function.ocm.archive import extract_archive, helm_chart_files
from function.ocm.digests import DigestCheck
from function.ocm.layout import (
    MANIFEST_TYPES,
    TAR_GZIP,
    TAR_PLAIN,
    bare,
    verify_digest,
)
from function.ocm.model import (
    TYPE_CONFIGDATA,
    TYPE_KUSTOMIZE,
    ComponentVersion,
    Resource,
)
from function.ocm.select import find_by_type, find_resource
from function.ocm.source import ComponentSource, LoadedComponent, resource_key
from function.ocm.versions import choose, is_exact, parse_semver

HEAD_BYTES = 16
MAX_CONFIGDATA_BYTES = 1024 * 1024
DEPLOYABLE_TYPES = tuple(FLAVOUR_OF_TYPE)

#: ``(resource name, extraIdentity)``; an empty name picks the single resource of the expected type.
ResourceSelector = tuple[str, Mapping[str, str]]


def exact_version(constraint: str) -> str | None:
    """The one version an exact constraint names (``6.2.0``, ``v6.2.0``, ``=6.2.0``), else None.

    OCM tags carry no ``v``: ``v6.2.0`` names the tag ``6.2.0``, without listing the tags.
    """
    if not is_exact(constraint):
        return None
    c = constraint.strip().removeprefix("=").strip()
    return c.removeprefix("v") if c.startswith("v") and parse_semver(c[1:]) else c


async def resolve_version(
    source: ComponentSource,
    component: str,
    constraint: str,
    *,
    previous: str | None = None,
    where: str | None = None,
    memos: Memos | None = None,
) -> str:
    """The version a constraint resolves to: the one place a version is chosen.

    An exact constraint is used as is (no tag list read); a range is resolved against
    ``list_versions`` with :func:`function.ocm.versions.choose` (sticky: ``previous``, the
    version resolved last time, is kept while no newer match appears).
    """
    exact = exact_version(constraint)
    if exact is not None:
        return exact
    available = tuple(await source.list_versions(component))
    where = where or f"component {component}"
    # A pure function of the (TTL-cached) tag list, the range and the previous choice.
    return memo(
        "versions",
        (available, constraint, previous, where),
        lambda: choose(available, constraint, previous, where),
        lambda v: 200 + len(v) + sum(len(t) + 50 for t in available),
        memos,
    )


# Deliberately alike (duplicates): the keyword options resolve_version also takes.
async def load_component(
    source: ComponentSource,
    component: str,
    version_constraint: str,
    *,
    deployable: ResourceSelector | None = None,
    configdata: ResourceSelector | None = None,
    previous: str | None = None,
) -> LoadedComponent:
    """Resolve the version, read the descriptor and fetch the deployable and ConfigData content.

    ``deployable``/``configdata`` select resources by ``(name, extraIdentity)``; ``None`` skips
    that resource; an empty name takes the single resource of the type (``helmChart`` or
    ``kustomize.ocm.fluxcd.io`` for the deployable, ``configdata.ocm.software`` for ConfigData).
    """
    version = await resolve_version(source, component, version_constraint, previous=previous)
    cv = await source.get(component, version)
    cwhere = f"component {cv.name}:{cv.version}"
    dres = select(cv, deployable, DEPLOYABLE_TYPES, cwhere) if deployable is not None else None
    cres = select(cv, configdata, (TYPE_CONFIGDATA,), cwhere) if configdata is not None else None
    return await load_resources(source, cv, deployable=dres, configdata=cres)


async def load_resources(
    source: ComponentSource,
    cv: ComponentVersion,
    *,
    deployable: Resource | None,
    configdata: Resource | None,
    verify: bool = True,
) -> LoadedComponent:
    """The content of the selected resources of ``cv`` (see :class:`LoadedComponent`), every
    blob checked against its resource's digest (``verify``).
    """
    contents: dict[str, Mapping[str, bytes]] = {}
    heads: dict[str, bytes] = {}
    checks: dict[str, DigestCheck] = {}
    if deployable is not None:
        files, head, check = await _deployable(source, cv, deployable, verify=verify)
        contents[resource_key(deployable)] = MappingProxyType(files)
        heads[resource_key(deployable)] = head
        checks[resource_key(deployable)] = check
    if configdata is not None:
        data, check = await _file(source, cv, configdata, verify=verify)
        contents[resource_key(configdata)] = MappingProxyType({configdata.name: data})
        checks[resource_key(configdata)] = check
    return LoadedComponent(
        component=cv,
        contents=MappingProxyType(contents),
        blob_heads=MappingProxyType(heads),
        deployable=deployable,
        configdata=configdata,
        digests=MappingProxyType(checks),
    )


def select(
    cv: ComponentVersion, selector: ResourceSelector, types: tuple[str, ...], where: str
) -> Resource:
    """The resource a selector names; an empty name takes the single resource of ``types``."""
    name, extra = selector
    if name:
        return find_resource(cv.descriptor, name, extra, where=where)
    return find_by_type(cv.descriptor, *types, where=where)


def _local_blob(res: Resource, where: str) -> tuple[str, str]:
    """``(localReference, mediaType)`` of a localBlob resource, or a ComponentError."""
    raw = str(res.access.get("type", ""))
    if normalize_access_type(raw) != LOCAL_BLOB:
        raise ComponentError(
            where,
            f"access type {raw[:100]!r}: only localBlob content can be read from the component's "
            "storage",
        )
    ref, mt = res.access.get("localReference"), res.access.get("mediaType")
    if not isinstance(ref, str) or not ref:
        raise ComponentError(where, "access.localReference: missing")
    return ref, (mt if isinstance(mt, str) else "")


async def _blob(
    source: ComponentSource, cv: ComponentVersion, ref: str, mt: str, where: str
) -> bytes:
    """``source.blob``, its errors naming the resource (``where``) the blob belongs to: a
    hostile ``localReference`` is refused by the storage, which knows only the component.
    """
    try:
        return await source.blob(cv, ref, mt)
    except SackError as e:
        if e.where.startswith(where):
            raise
        raise type(e)(where, e.message, reason=e.reason) from None


async def read_blob(
    source: ComponentSource, cv: ComponentVersion, res: Resource
) -> tuple[bytes, str, str]:
    """The blob of a localBlob resource as stored (an OCI artifact's manifest), its media type
    and the place errors about it name; unchecked (:func:`read_checked` checks it).
    """
    where = f"component {cv.name}:{cv.version} {res.describe()}"
    ref, mt = _local_blob(res, where)
    return await _blob(source, cv, ref, mt, where), mt, where


async def read_checked(
    source: ComponentSource, cv: ComponentVersion, res: Resource, *, verify: bool = True
) -> tuple[bytes, str, DigestCheck]:
    """The blob of a localBlob resource, its media type, and its digest check (a mismatch
    raises).
    """
    data, mt, where = await read_blob(source, cv, res)
    check = digests.check(where, res, data, mt) if verify else digests.skipped(res)
    return data, mt, check


async def _manifest_layer(
    source: ComponentSource,
    cv: ComponentVersion,
    ref: str,
    data: bytes,
    layer_mt: str,
    where: str,
) -> bytes:
    """The single layer of media type ``layer_mt`` of the child manifest ``ref`` (``data``)."""
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ComponentError(where, f"manifest {ref} is not valid JSON") from None
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if not isinstance(layers, list):
        raise ComponentError(where, f"manifest {ref} has no layers")
    hits = [
        entry
        for entry in layers
        if isinstance(entry, dict) and bare(str(entry.get("mediaType", ""))) == layer_mt
    ]
    if len(hits) != 1:
        raise ComponentError(
            where, f"manifest {ref} has {len(hits)} layers of media type {layer_mt} (expected 1)"
        )
    digest = hits[0].get("digest")
    if not isinstance(digest, str):
        raise ComponentError(where, f"manifest {ref}: layer {layer_mt} has no digest")
    layer = await _blob(source, cv, digest, layer_mt, where)
    # The manifest is what the resource digest covers; it names the layer by digest.
    verify_digest(layer, digest, where)
    return layer


async def fetch_deployable(
    source: ComponentSource, cv: ComponentVersion, res: Resource, *, verify: bool = True
) -> tuple[dict[str, bytes], bytes]:
    """Files of a Helm chart or Kustomize resource, plus the first bytes of the blob Flux reads."""
    files, head, _ = await _deployable(source, cv, res, verify=verify)
    return files, head


async def _deployable(
    source: ComponentSource, cv: ComponentVersion, res: Resource, *, verify: bool
) -> tuple[dict[str, bytes], bytes, DigestCheck]:
    where = f"component {cv.name}:{cv.version} {res.describe()}"
    flavour = FLAVOUR_OF_TYPE.get(res.type)
    if flavour is None:
        raise ComponentError(
            where,
            f"resource type {res.type[:100]!r} is not a deployable (helmChart or {TYPE_KUSTOMIZE})",
        )
    ref, mt = _local_blob(res, where)
    media = bare(mt)
    if flavour == "helm" and media not in MANIFEST_TYPES:
        raise ComponentError(
            where,
            f"a Helm chart must be an OCI chart manifest (mediaType {mt[:100]!r} is not supported)",
        )
    if flavour == "kustomize" and media not in (*MANIFEST_TYPES, TAR_GZIP, TAR_PLAIN):
        raise ComponentError(
            where, f"Kustomize content with mediaType {mt[:100]!r} is not supported"
        )
    data, _, check = await read_checked(source, cv, res, verify=verify)
    if media in MANIFEST_TYPES:  # a Helm chart always is
        layer = await _manifest_layer(source, cv, ref, data, CONTENT_LAYER[flavour], where)
        files = (
            helm_chart_files(layer, where)
            if flavour == "helm"
            else extract_archive(layer, where, require_gzip=True)
        )
        return files, layer[:HEAD_BYTES], check
    return (
        extract_archive(data, where, require_gzip=media == TAR_GZIP),
        data[:HEAD_BYTES],
        check,
    )


async def fetch_file(
    source: ComponentSource,
    cv: ComponentVersion,
    res: Resource,
    *,
    max_bytes: int = MAX_CONFIGDATA_BYTES,
    verify: bool = True,
) -> bytes:
    """The verbatim bytes of a single-file localBlob resource (the ConfigData file)."""
    data, _ = await _file(source, cv, res, max_bytes=max_bytes, verify=verify)
    return data


async def _file(
    source: ComponentSource,
    cv: ComponentVersion,
    res: Resource,
    *,
    max_bytes: int = MAX_CONFIGDATA_BYTES,
    verify: bool,
) -> tuple[bytes, DigestCheck]:
    where = f"component {cv.name}:{cv.version} {res.describe()}"
    _, mt = _local_blob(res, where)
    if bare(mt) in MANIFEST_TYPES:
        raise ComponentError(where, f"mediaType {mt[:100]!r} is an OCI artifact, not a file")
    data, _, check = await read_checked(source, cv, res, verify=verify)
    if len(data) > max_bytes:
        raise ComponentError(where, f"is {len(data)} bytes, more than the {max_bytes} byte limit")
    return data, check
