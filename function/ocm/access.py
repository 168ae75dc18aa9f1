"""From a resource's OCM access to what a cluster pulls: the packaging contract, §2 and §3.

``/work/shared/reference/packaging.md`` is the contract; this module is its executable form.
Two questions are answered here and nowhere else:

* :func:`localized_reference`: which image reference the ConfigData ``image``/``registry``/
  ``repository``/``tag`` rules receive for an image resource (§2). Always digest-pinned when a
  digest is known, because a mutable tag would let the registry change what runs.
* :func:`flux_source`: which Flux ``OCIRepository`` (url, ``ref.digest``, ``layerSelector``)
  serves a deployable (§3). Always ``ref.digest``, never ``ref.tag``: by tag, source-controller
  resolves the component index to the descriptor manifest (observed), and a Helm chart is then
  "not found".

Everything here is pure: no I/O, only the descriptor, the repository address and (for the gzip
check) the first bytes of a blob that the caller already fetched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from function.cache import active_memos
from function.errors import ComponentError, SackError
from function.ocm.imageref import BadReference, ImageRef, parse_reference
from function.ocm.layout import (
    DIGEST_RE,
    FLUX_CONTENT_LAYER,
    HELM_CHART_LAYER,
    MANIFEST_TYPES,
    SHA256_RE,
    TAR_GZIP,
    TAR_PLAIN,
    bare,
    is_manifest_media_type,
)
from function.ocm.model import ComponentVersion, Repository, Resource
from function.ocm.source import resource_key

# Normalised access kinds.
OCI_ARTIFACT = "ociArtifact"
LOCAL_BLOB = "localBlob"
OCI_BLOB = "ociBlob"  # OCIImageLayer / ociBlob: one layer blob in a repository ({ref, digest})

_ACCESS_ALIASES = {
    "ociartifact": OCI_ARTIFACT,
    "ociimage": OCI_ARTIFACT,
    "ociregistry": OCI_ARTIFACT,
    "localblob": LOCAL_BLOB,
    "ociimagelayer": OCI_BLOB,
    "ociblob": OCI_BLOB,
}

GZIP_MAGIC = b"\x1f\x8b"

#: ``resource.digest`` normalisations whose value is the OCI manifest digest of the artifact.
PINNING_NORMALISATIONS = ("genericblobdigest/v1", "ociartifactdigest/v1")

MAX_REFERENCE_LEN = 1024

Flavour = Literal["helm", "kustomize"]


def normalize_access_type(access_type: str) -> str:
    """``ociArtifact``, ``ociArtifact/v1``, ``OCIImage/v1``, ``ociRegistry``, ``ociImage`` →
    ``ociArtifact``;
    ``localBlob``, ``LocalBlob/v1`` → ``localBlob``; ``OCIImageLayer``/``ociBlob`` → ``ociBlob``.

    Case-insensitive, version suffix ``/v1`` stripped. Unknown types come back as given (minus
    ``/v1``) so error messages can still name them.
    """
    base = access_type.strip()
    if base.lower().endswith("/v1"):
        base = base[:-3]
    return _ACCESS_ALIASES.get(base.lower(), base)


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


def _where(cv: ComponentVersion, resource: Resource) -> str:
    return f"component {cv.name}:{cv.version} {resource.describe()}"


def _access_type(resource: Resource, access: Mapping[str, Any] | None = None) -> tuple[str, str]:
    acc = resource.access if access is None else access
    raw = acc.get("type")
    raw = raw if isinstance(raw, str) else ""
    return raw, normalize_access_type(raw)


def _require_repository(cv: ComponentVersion, where: str) -> Repository:
    if cv.repository is None:
        raise ComponentError(
            where,
            "the component was read from local storage with no registry address, so the cluster "
            "has nowhere "
            "to pull this localBlob from: read the component from (or map it to) a registry, "
            "e.g. pass the "
            "registry the CTF will be transferred to",
        )
    return cv.repository


def _local_reference(access: Mapping[str, Any], where: str) -> str:
    ref = access.get("localReference")
    if not isinstance(ref, str) or not ref:
        raise ComponentError(where, "access.localReference: missing")
    if not DIGEST_RE.match(ref):
        raise ComponentError(where, f"access.localReference: {ref[:100]!r} is not an OCI digest")
    return ref


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


# --------------------------------------------------------------------------- §2 localized
# references


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


def image_table(cv: ComponentVersion, *, allow_unpinned: bool = False) -> ImageTable:
    """Every resource's localized image reference, parsed once (the one place references are
    parsed for a request); the core puts it in status and hands it to the ConfigData engine.

    Memoised per descriptor *object* (the storage cache hands warm requests the same one;
    hand-made descriptors may share a digest string, so the digest alone is no key) and where
    the component lives: a warm reconcile of a large component would otherwise parse every
    image reference again.
    """
    memos = active_memos()
    if memos is None:
        return _image_table(cv, allow_unpinned=allow_unpinned)
    repo = cv.repository
    where = None if repo is None else (repo.host, repo.base, repo.plain_http)
    key = (id(cv.descriptor), cv.descriptor_digest, where, allow_unpinned)
    hit = memos.tables["images"].get(key)
    if hit is not None and hit[0] is cv.descriptor:
        return hit[1]
    table = _image_table(cv, allow_unpinned=allow_unpinned)
    # the entry holds the descriptor, so its id is not reused while the entry lives
    memos.tables["images"].put(key, (cv.descriptor, table), 200 + 600 * len(table))
    return table


def _image_table(cv: ComponentVersion, *, allow_unpinned: bool) -> ImageTable:
    table: dict[str, LocalizedImage] = {}
    for r in cv.descriptor.resources:
        try:
            original, text = _localized(cv, r, r.access, allow_unpinned=allow_unpinned, depth=0)
            parsed = parse_reference(text, where=f"{_where(cv, r)} (localized reference)")
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
    where = _where(cv, resource)
    raw, kind = _access_type(resource, access)
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
            local_ref = _local_reference(access, where)
            repo = _require_repository(cv, where)
            return None, f"{repo.component_repo(cv.name)}@{local_ref}"
        raise ComponentError(
            where,
            f"access {raw} with mediaType {str(media_type)[:100]!r} is a plain blob, not an image: "
            "it has no image reference a cluster could pull",
        )
    raise ComponentError(
        where, f"access type {raw[:100]!r} has no image reference this function can localize"
    )


# --------------------------------------------------------------------------- §3 Flux sources


@dataclass(frozen=True)
class FluxSource:
    """What an ``OCIRepository`` needs: ``url``, ``ref.digest`` and the ``layerSelector``.

    ``plain_http_host`` is the registry host so the caller can decide on ``insecure`` from the
    policy (never from the component: ``insecure`` also disables TLS verification).
    """

    url: str
    digest: str
    layer_media_type: str
    layer_operation: Literal["copy", "extract"]
    plain_http_host: str


def flux_source(
    cv: ComponentVersion, resource: Resource, flavour: Flavour, *, blob_head: bytes | None = None
) -> FluxSource:
    """The Flux ``OCIRepository`` parameters for a deployable (packaging.md §3).

    ``blob_head`` is the first bytes of the resource's raw blob (``LoadedComponent.blob_heads``),
    used for the gzip magic check of a Kustomize ``application/x-tar+gzip`` localBlob; ``None``
    skips that check (only for callers that already extracted the blob as gzip).
    """
    if flavour not in ("helm", "kustomize"):
        raise ValueError(f"flavour must be 'helm' or 'kustomize', not {flavour!r}")
    where = _where(cv, resource)
    access = resource.access
    raw, kind = _access_type(resource)
    if kind == LOCAL_BLOB:
        global_access = access.get("globalAccess")
        if isinstance(global_access, Mapping) and global_access.get("type"):
            graw, gkind = _access_type(resource, global_access)
            if gkind == OCI_ARTIFACT:
                return _flux_from_reference(resource, global_access, flavour, where)
            # A global access that is not an artifact: fall through to the local copy.
    layer_mt = HELM_CHART_LAYER if flavour == "helm" else FLUX_CONTENT_LAYER
    if kind == OCI_ARTIFACT:
        return _flux_from_reference(resource, access, flavour, where)
    if kind == LOCAL_BLOB:
        media_type = bare(access.get("mediaType"))
        if media_type in MANIFEST_TYPES:
            local_ref = _local_reference(access, where)
            repo = _require_repository(cv, where)
            return FluxSource(
                url=f"oci://{repo.component_repo(cv.name)}",
                digest=local_ref,
                layer_media_type=layer_mt,
                layer_operation="copy" if flavour == "helm" else "extract",
                plain_http_host=repo.host,
            )
        if flavour == "kustomize" and media_type == TAR_GZIP:
            return _kustomize_tgz(cv, access, where, blob_head)
        if flavour == "kustomize" and media_type == TAR_PLAIN:
            raise ComponentError(
                where,
                "Kustomize content is a plain tar (application/x-tar), which Flux cannot extract "
                '("requires gzip-compressed body"): add `compress: true` to the `dir` input in the '
                "component constructor and rebuild the component version",
            )
        raise ComponentError(
            where,
            f"access {raw} with mediaType {str(access.get('mediaType'))[:100]!r} cannot serve as a "
            f"{'Helm chart' if flavour == 'helm' else 'Kustomize'} source for Flux",
        )
    raise ComponentError(
        where,
        f"access type {raw[:100]!r} cannot serve as a "
        f"{'Helm chart' if flavour == 'helm' else 'Kustomize'} "
        "source for Flux",
    )


def _flux_from_reference(
    resource: Resource, access: Mapping[str, Any], flavour: Flavour, where: str
) -> FluxSource:
    ref = parse_image_reference(access.get("imageReference"), where)
    _check_consistent(ref, resource, where)
    digest = ref.digest or _pin_digest(resource, where)
    if not digest:
        raise ComponentError(
            where,
            f"access imageReference {ref.written_repository} has no digest and the resource has "
            "no SHA-256 "
            "digest: a Flux source must be pinned by digest, never by tag",
        )
    if not ref.host:
        raise ComponentError(
            where, f"access imageReference {ref.written_repository} names no registry host"
        )
    return FluxSource(
        url=f"oci://{ref.written_repository}",
        digest=digest,
        layer_media_type=HELM_CHART_LAYER if flavour == "helm" else FLUX_CONTENT_LAYER,
        layer_operation="copy" if flavour == "helm" else "extract",
        plain_http_host=ref.host,
    )


def _kustomize_tgz(
    cv: ComponentVersion,
    access: Mapping[str, Any],
    where: str,
    blob_head: bytes | None,
) -> FluxSource:
    local_ref = _local_reference(access, where)
    repo = _require_repository(cv, where)
    if not cv.descriptor_digest or not DIGEST_RE.match(cv.descriptor_digest):
        raise ComponentError(
            where, "the descriptor manifest digest is unknown, so the Flux source cannot be pinned"
        )
    if not cv.layers:
        raise ComponentError(
            where,
            "the descriptor manifest's layers are unknown (a plain directory source?), so the "
            "uniqueness of the "
            f"{TAR_GZIP} layer Flux selects cannot be checked: read the component from a "
            "registry or a CTF",
        )
    same = [layer for layer in cv.layers if bare(layer.media_type) == TAR_GZIP]
    if len(same) != 1:
        raise ComponentError(
            where,
            f"the descriptor manifest has {len(same)} layers of media type {TAR_GZIP}; Flux "
            "selects layers by "
            "media type and would silently take the first, so exactly one Kustomize tar.gz per "
            "component "
            "version is supported",
        )
    if same[0].digest != local_ref:
        raise ComponentError(
            where,
            f"the descriptor manifest's {TAR_GZIP} layer is {same[0].digest}, not this resource's "
            f"localReference {local_ref}",
        )
    if blob_head is not None and not blob_head.startswith(GZIP_MAGIC):
        raise ComponentError(
            where,
            f"the blob declared {TAR_GZIP} does not start with the gzip magic bytes 1f 8b; Flux "
            "would fail "
            "to extract it",
        )
    return FluxSource(
        url=f"oci://{repo.component_repo(cv.name)}",
        digest=cv.descriptor_digest,
        layer_media_type=TAR_GZIP,
        layer_operation="extract",
        plain_http_host=repo.host,
    )
