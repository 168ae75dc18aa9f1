"""From a resource's OCM access to what Flux fetches: the packaging contract, §3.

``/work/shared/reference/packaging.md`` is the contract; this module is its executable form
for deployables, and names the access kinds every reader shares (:func:`normalize_access_type`).
Image references (§2: parsing, localization, the allowlist) are :mod:`function.ocm.images`.

* :func:`flux_source`: which Flux ``OCIRepository`` (url, ``ref.digest``, ``layerSelector``)
  serves a deployable (§3). Always ``ref.digest``, never ``ref.tag``: by tag, source-controller
  resolves the component index to the descriptor manifest (observed), and a Helm chart is then
  "not found".

Everything here is pure: no I/O, only the descriptor, the repository address and (for the gzip
check) the first bytes of a blob that the caller already fetched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from function.errors import ComponentError
from function.ocm.layout import (
    DIGEST_RE,
    FLUX_CONTENT_LAYER,
    HELM_CHART_LAYER,
    MANIFEST_TYPES,
    TAR_GZIP,
    TAR_PLAIN,
    bare,
)
from function.ocm.model import (
    TYPE_HELM_CHART,
    TYPE_KUSTOMIZE,
    ComponentVersion,
    Repository,
    Resource,
)

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

Flavour = Literal["helm", "kustomize"]

#: The deployable resource types, and the Flux object (flavour) each deploys with.
FLAVOUR_OF_TYPE: Mapping[str, Flavour] = {TYPE_HELM_CHART: "helm", TYPE_KUSTOMIZE: "kustomize"}

#: The one layer of a deployable stored as an OCI manifest: what Flux selects and the function
#: reads (§3).
CONTENT_LAYER: Mapping[Flavour, str] = {"helm": HELM_CHART_LAYER, "kustomize": FLUX_CONTENT_LAYER}


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


def resource_where(cv: ComponentVersion, resource: Resource) -> str:
    """How errors name a resource of a component."""
    return f"component {cv.name}:{cv.version} {resource.describe()}"


def access_kind(resource: Resource, access: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """The access type as written and normalised (:func:`normalize_access_type`)."""
    acc = resource.access if access is None else access
    raw = acc.get("type")
    raw = raw if isinstance(raw, str) else ""
    return raw, normalize_access_type(raw)


def component_repository(cv: ComponentVersion, where: str) -> Repository:
    """The registry a localBlob is pulled from: the one the component was read from."""
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


def local_reference(access: Mapping[str, Any], where: str) -> str:
    """A localBlob access's ``localReference``: the blob's digest in the component's repository."""
    ref = access.get("localReference")
    if not isinstance(ref, str) or not ref:
        raise ComponentError(where, "access.localReference: missing")
    if not DIGEST_RE.match(ref):
        raise ComponentError(where, f"access.localReference: {ref[:100]!r} is not an OCI digest")
    return ref


# --------------------------------------------------------------------------- §3 Flux sources


@dataclass(frozen=True)
class FluxSource:
    """What an ``OCIRepository`` needs: ``url``, ``ref.digest`` and the ``layerSelector``.

    ``host`` is the registry the URL names and ``plain_http`` whether the component was
    addressed over plain HTTP there, so the caller can look the host up in the policy and
    decide on ``insecure`` and ``certSecretRef`` from the policy entry for that exact host
    (never from the component: ``insecure`` also disables TLS verification).
    """

    url: str
    digest: str
    layer_media_type: str
    layer_operation: Literal["copy", "extract"]
    host: str
    plain_http: bool = False


def flux_source(
    cv: ComponentVersion, resource: Resource, flavour: Flavour, *, blob_head: bytes | None = None
) -> FluxSource:
    """The Flux ``OCIRepository`` parameters for a deployable (packaging.md §3).

    Flux fetches exactly what the function read: the deployable's local blob in the
    component's own repository (``function.ocm.fetch`` reads nothing else). A ``globalAccess``
    is never followed -- it would point Flux at bytes the function never saw, on a host the
    component chose (``function.compose.fetchhosts`` refuses one off the allowlist) -- and a
    deployable stored elsewhere (an ``ociArtifact`` access) is refused.

    ``blob_head`` is the first bytes of the resource's raw blob (``LoadedComponent.blob_heads``),
    used for the gzip magic check of a Kustomize ``application/x-tar+gzip`` localBlob; ``None``
    skips that check (only for callers that already extracted the blob as gzip).
    """
    if flavour not in ("helm", "kustomize"):
        raise ValueError(f"flavour must be 'helm' or 'kustomize', not {flavour!r}")
    where = resource_where(cv, resource)
    access = resource.access
    raw, kind = access_kind(resource)
    what = "Helm chart" if flavour == "helm" else "Kustomize"
    layer_mt = CONTENT_LAYER[flavour]
    if kind == OCI_ARTIFACT:
        raise ComponentError(
            where,
            f"access {raw[:100]}: the {what} content is stored outside the component "
            f"(at {_named_host(access)}); the function reads a deployable only from the "
            "component's own storage, and Flux must deploy what the function read: add it to "
            "the component as a local blob (ocm transfer --copy-resources)",
        )
    if kind == LOCAL_BLOB:
        media_type = bare(access.get("mediaType"))
        if media_type in MANIFEST_TYPES:
            local_ref = local_reference(access, where)
            repo = component_repository(cv, where)
            return FluxSource(
                url=f"oci://{repo.component_repo(cv.name)}",
                digest=local_ref,
                layer_media_type=layer_mt,
                layer_operation="copy" if flavour == "helm" else "extract",
                host=repo.host,
                plain_http=repo.plain_http,
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
            f"{what} source for Flux",
        )
    raise ComponentError(
        where,
        f"access type {raw[:100]!r} cannot serve as a {what} source for Flux",
    )


def _named_host(access: Mapping[str, Any]) -> str:
    """The host an OCI access names, for messages (the reference's first segment)."""
    ref = access.get("imageReference")
    if not isinstance(ref, str):
        return "an unnamed location"
    body = ref.strip().split("://", 1)[-1]
    return repr(body.split("/", 1)[0][:100])


def _kustomize_tgz(
    cv: ComponentVersion,
    access: Mapping[str, Any],
    where: str,
    blob_head: bytes | None,
) -> FluxSource:
    local_ref = local_reference(access, where)
    repo = component_repository(cv, where)
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
        host=repo.host,
        plain_http=repo.plain_http,
    )
