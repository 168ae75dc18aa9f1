"""The image path of a request, in one place: parse an access's image reference, localize it
(packaging contract §2) and answer the allowlist question.

``/work/shared/reference/packaging.md`` §2 is the contract. :func:`image_table` resolves
every resource's reference once per request; the caller (the core, or the CLI) builds it once,
narrows it to the allowlist (:func:`allowlisted`) and passes it on as data: status images,
the pull secret's hosts and every value a ConfigData localization rule writes come from that
one table. A localized reference is always digest-pinned when a digest is known, because a
mutable tag would let the registry change what runs.

Pure: no I/O, only the descriptor and the repository address.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from function.cache import Memos
from function.errors import ComponentError, PolicyViolation, SackError
from function.ocm.access import (
    LOCAL_BLOB,
    OCI_ARTIFACT,
    OCI_BLOB,
    access_kind,
    component_repository,
    local_reference,
    resource_where,
)
from function.ocm.imageref import BadReference, ImageRef, parse_reference
from function.ocm.layout import DIGEST_RE, SHA256_RE, is_manifest_media_type
from function.ocm.model import ComponentVersion, Resource
from function.ocm.source import resource_key

#: ``resource.digest`` normalisations whose value is the OCI manifest digest of the artifact.
PINNING_NORMALISATIONS = ("genericblobdigest/v1", "ociartifactdigest/v1")

MAX_REFERENCE_LEN = 1024


def parse_image_reference(text: Any, where: str) -> ImageRef:
    """Parse an access's ``[http(s)://]host/path[:tag][@digest]`` with the one reference grammar
    (:mod:`function.ocm.imageref`); the scheme only says how to talk to the registry.
    """
    if not isinstance(text, str) or not text.strip():
        raise ComponentError(where, "access.imageReference: missing")
    ref = text.strip()
    scheme = ""
    low = ref.lower()
    for s in ("http://", "https://"):
        if low.startswith(s):
            scheme = s[:-3]
            ref = ref[len(s) :]
            break
    try:
        if len(ref) > MAX_REFERENCE_LEN:
            raise BadReference(where, f"longer than {MAX_REFERENCE_LEN} characters")
        parsed = parse_reference(ref, where=where)
    except BadReference:
        raise ComponentError(
            where, f"access.imageReference: {text[:200]!r} is not a valid OCI reference"
        ) from None
    return replace(parsed, scheme=scheme)


def _pin_digest(resource: Resource, where: str) -> str | None:
    """``resource.digest`` as ``sha256:<hex>`` when it is the artifact's manifest digest."""
    d = resource.digest
    if d is None:
        return None
    if d.normalisation_algorithm.lower() not in PINNING_NORMALISATIONS:
        return None
    oci = d.oci
    if oci is None:
        return None
    oci = oci.lower()
    if not SHA256_RE.match(oci):
        raise ComponentError(where, f"digest.value: {d.value[:80]!r} is not a SHA-256 hex digest")
    return oci


def pinned_digest(resource: Resource, where: str) -> str | None:
    """``resource.digest`` as ``sha256:<hex>`` when it is the artifact's manifest digest, else
    None (what pins a reference that names no digest).
    """
    return _pin_digest(resource, where)


def _check_consistent(ref: ImageRef, resource: Resource, where: str) -> None:
    """An ``ociArtifactDigest/v1`` digest *is* the manifest digest: it must agree with the
    reference.
    """
    d = resource.digest
    if ref.digest and d is not None and d.normalisation_algorithm.lower() == "ociartifactdigest/v1":
        pinned = _pin_digest(resource, where)
        if pinned and pinned != ref.digest:
            raise ComponentError(
                where,
                f"access.imageReference digest {ref.digest} differs from resource digest {pinned}",
            )


def localized_reference(
    cv: ComponentVersion, resource: Resource, *, allow_unpinned: bool = False
) -> str:
    """The image reference a cluster pulls for ``resource`` (packaging.md §2).

    Returns ``host/path:tag@sha256:D`` (tag kept when the access names one; the ConfigData
    engine derives ``image`` without it) or ``REPO@<localReference>`` for an image copied into
    the component as a localBlob. A reference with no digest at all is refused unless
    ``allow_unpinned`` (policy downgrades it to a Warning); then the tag reference is returned.
    """
    return _localized(cv, resource, resource.access, allow_unpinned=allow_unpinned, depth=0)[1]


@dataclass(frozen=True)
class LocalizedImage:
    """One resource's image reference, resolved once per request: the access's own reference
    as parsed (``original``; None for an image copied in as a localBlob), the localized
    reference (:func:`localized_reference`) and that reference parsed (``parsed``: the values
    ConfigData rules receive). ``error`` says why a resource has none; it is raised only where
    the reference is needed (an image in status, a localization rule naming the resource).
    """

    resource: Resource
    original: ImageRef | None = None
    reference: str = ""
    parsed: ImageRef | None = None
    error: SackError | None = None

    def require(self) -> ImageRef:
        """The parsed localized reference, or the error that prevented it."""
        if self.error is not None:
            raise self.error
        if self.parsed is None:
            raise ComponentError(self.resource.describe(), "has no localized image reference")
        return self.parsed


#: :func:`function.ocm.source.resource_key` -> the resource's :class:`LocalizedImage`.
ImageTable = Mapping[str, LocalizedImage]


def image_table(
    cv: ComponentVersion, *, allow_unpinned: bool = False, memos: Memos | None = None
) -> ImageTable:
    """Every resource's localized image reference, parsed once (the one place references are
    parsed for a request); the caller builds it once and passes it on as data: the core puts
    it in status and hands it to the ConfigData engine, the CLI does the same.

    ``memos``: the edge's memo tables (None: computed). The entry is keyed by content: the
    descriptor manifest digest, where the component lives and the unpinned policy; the
    descriptor itself is compared too (hand-made descriptors may share a digest string), so
    a warm reconcile of a large component does not parse every image reference again.
    """
    if memos is None or not cv.descriptor_digest:
        return _image_table(cv, allow_unpinned=allow_unpinned)
    repo = cv.repository
    where = None if repo is None else (repo.host, repo.base, repo.plain_http)
    key = (cv.descriptor_digest, where, allow_unpinned)
    hit = memos.tables["images"].get(key)
    if hit is not None and (hit[0] is cv.descriptor or hit[0] == cv.descriptor):
        remembered: ImageTable = hit[1]
        return remembered
    table = _image_table(cv, allow_unpinned=allow_unpinned)
    memos.tables["images"].put(key, (cv.descriptor, table), 200 + 600 * len(table))
    return table


def _image_table(cv: ComponentVersion, *, allow_unpinned: bool) -> ImageTable:
    table: dict[str, LocalizedImage] = {}
    for r in cv.descriptor.resources:
        try:
            original, text = _localized(cv, r, r.access, allow_unpinned=allow_unpinned, depth=0)
            parsed = parse_reference(text, where=f"{resource_where(cv, r)} (localized reference)")
            entry = LocalizedImage(r, original, text, parsed)
        except SackError as e:
            entry = LocalizedImage(r, error=e)
        table[resource_key(r)] = entry
    return MappingProxyType(table)


def _localized(
    cv: ComponentVersion,
    resource: Resource,
    access: Mapping[str, Any],
    *,
    allow_unpinned: bool,
    depth: int,
) -> tuple[ImageRef | None, str]:
    where = resource_where(cv, resource)
    raw, kind = access_kind(resource, access)
    if kind == OCI_ARTIFACT:
        ref = parse_image_reference(access.get("imageReference"), where)
        _check_consistent(ref, resource, where)
        digest = ref.digest or _pin_digest(resource, where)
        if digest:
            return ref, replace(ref, digest=digest).written()
        if allow_unpinned:
            return ref, ref.written()
        raise ComponentError(
            where,
            f"access {raw}: image reference "
            f"{ref.written_repository}{':' + ref.tag if ref.tag else ''} has no "
            "digest and the resource has no SHA-256 digest to pin it with; refusing a mutable tag",
        )
    if kind == OCI_BLOB and depth > 0:
        ref_text = access.get("ref")
        digest = access.get("digest")
        if (
            not isinstance(ref_text, str)
            or not isinstance(digest, str)
            or not DIGEST_RE.match(digest)
        ):
            raise ComponentError(where, f"access {raw}: needs ref and digest")
        ref = parse_image_reference(ref_text, where)
        return ref, f"{ref.written_repository}@{digest}"
    if kind == LOCAL_BLOB:
        global_access = access.get("globalAccess")
        if isinstance(global_access, Mapping) and global_access.get("type") and depth == 0:
            return _localized(
                cv, resource, global_access, allow_unpinned=allow_unpinned, depth=depth + 1
            )
        media_type = access.get("mediaType")
        if is_manifest_media_type(media_type):
            local_ref = local_reference(access, where)
            repo = component_repository(cv, where)
            return None, f"{repo.component_repo(cv.name)}@{local_ref}"
        raise ComponentError(
            where,
            f"access {raw} with mediaType {str(media_type)[:100]!r} is a plain blob, not an image: "
            "it has no image reference a cluster could pull",
        )
    raise ComponentError(
        where, f"access type {raw[:100]!r} has no image reference this function can localize"
    )


# --------------------------------------------------------------------------- the allowlist

#: Where a short name (``nginx:1.0``) is pulled from.
DOCKER_HUB = "docker.io"


def allowlisted(table: ImageTable, hosts: Collection[str], where: str) -> ImageTable:
    """The image table with every reference outside ``hosts`` (the policy's image registries,
    lower case) turned into its error.

    Errors in the table are raised where a reference is used (the core puts every image
    resource in status; a localization rule naming any resource reads it), so an image from a
    host ops did not allow is one Fatal naming the resource and the host, and no value built
    from it is ever written.
    """
    out = {}
    for key, original in table.items():
        entry = original
        if entry.error is None and entry.parsed is not None:
            written = entry.parsed.host.lower()
            host = written or DOCKER_HUB
            if host not in hosts:
                what = host if written else f"{DOCKER_HUB} (a Docker Hub short name)"
                entry = replace(
                    entry,
                    error=PolicyViolation(
                        f"{where} {entry.resource.describe()}",
                        f"image {entry.reference} comes from {what}, which is not an allowed image "
                        f"registry (imageRegistries: {', '.join(hosts) or 'none'})",
                    ),
                )
        out[key] = entry
    return MappingProxyType(out)
