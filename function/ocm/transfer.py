"""What ``ocm transfer component-version`` makes of a component version, without running it.

A service team wants to test its localization rules against the place the component will
live after ops transfer it into their registry (``sack8s localize --transfer-to``), long
before the transfer happens. The answer must be the descriptor the OCM CLI would write there,
so the image references the ConfigData rules receive are the ones the cluster will pull.

The mapping is the OCM CLI's (v0.9.1, observed: ``/work/shared/fixtures/ocm-cli-v0.9.1/
FACTS.md`` §4, and the transformation graph it prints with ``--dry-run``):

* every ``localBlob`` is copied into the target's component repository, in every mode
  (``REPO`` = ``<target>/component-descriptors/<name>``), with the same ``localReference``;
* an ``ociArtifact`` stays where it is without ``--copy-resources``;
* with ``--copy-resources`` (``--upload-as default`` or ``localBlob``) it becomes a
  ``LocalBlob/v1`` child manifest of the component index: ``localReference`` = the image's
  manifest digest, ``referenceName`` = its repository path and tag without the registry;
* with ``--copy-resources --upload-as ociArtifact`` it is pushed to
  ``<target>/<repository path>:<tag>`` (``ociArtifact/v1``, the digest dropped from the
  reference and kept only in ``resource.digest``);
* any other access type is left as it is (the CLI skips it);
* not simulated (not observed): a localBlob with a ``globalAccess``, reported where its
  reference is needed.

The descriptor digest is unknown after a copying transfer (the descriptor changes), so it is
left empty there; a transfer without ``--copy-resources`` writes the same bytes (observed:
by-ref is byte-identical to source). Pure: descriptor in, descriptor out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from function.errors import ComponentError, SackError
from function.ocm.access import (
    LOCAL_BLOB,
    OCI_ARTIFACT,
    normalize_access_type,
)
from function.ocm.images import parse_image_reference, pinned_digest
from function.ocm.layout import MT_OCI_MANIFEST
from function.ocm.model import ComponentVersion, Repository, Resource
from function.ocm.source import resource_key

UploadAs = Literal["default", "localBlob", "ociArtifact"]
UPLOAD_AS: tuple[UploadAs, ...] = ("default", "localBlob", "ociArtifact")

#: What the CLI writes for an image copied in as a localBlob (observed for a single-platform
#: image; a multi-platform one would be an index, pulled by the same ``REPO@digest``).
COPIED_IMAGE_MEDIA_TYPE = MT_OCI_MANIFEST


@dataclass(frozen=True)
class Transfer:
    """``ocm transfer component-version SOURCE TARGET [--copy-resources] [--upload-as X]``."""

    target: Repository
    copy_resources: bool = False
    upload_as: UploadAs = "default"

    def describe(self) -> str:
        flags = " --copy-resources" if self.copy_resources else ""
        if self.upload_as != "default":
            flags += f" --upload-as {self.upload_as}"
        return f"ocm transfer to {self.target.url}{flags}"


def transferred(
    cv: ComponentVersion, transfer: Transfer
) -> tuple[ComponentVersion, Mapping[str, SackError]]:
    """``cv`` as it reads after ``transfer`` (the resources' accesses rewritten, the repository
    the target), and, by :func:`function.ocm.source.resource_key`, the resources whose new
    access cannot be known offline (an image to be copied whose digest neither its reference
    nor its resource digest gives). The caller reports those only where the reference is
    needed, as the image table does.
    """
    problems: dict[str, SackError] = {}
    resources = []
    for r in cv.descriptor.resources:
        try:
            resources.append(_resource(cv, r, transfer))
        except SackError as e:
            problems[resource_key(r)] = e
            resources.append(r)
    changed = tuple(resources) != cv.descriptor.resources
    moved = replace(
        cv,
        descriptor=replace(cv.descriptor, resources=tuple(resources)),
        repository=transfer.target,
        descriptor_digest="" if changed or problems else cv.descriptor_digest,
    )
    return moved, MappingProxyType(problems)


def _resource(cv: ComponentVersion, resource: Resource, transfer: Transfer) -> Resource:
    access = resource.access
    raw = access.get("type")
    kind = normalize_access_type(raw if isinstance(raw, str) else "")
    if kind == LOCAL_BLOB:
        # the blob itself moves to the target's component repository, same localReference
        if not access.get("globalAccess"):
            return resource
        raise ComponentError(
            f"component {cv.name}:{cv.version} {resource.describe()}",
            "a localBlob with a globalAccess (an older writer's) is not simulated: what the OCM "
            "CLI writes for it after a transfer was not observed; localize the transferred "
            "component instead",
        )
    if kind != OCI_ARTIFACT or not transfer.copy_resources:
        return resource
    where = f"component {cv.name}:{cv.version} {resource.describe()} (after {transfer.describe()})"
    ref = parse_image_reference(access.get("imageReference"), where)
    name = f"{ref.path}:{ref.tag}" if ref.tag else ref.path
    if transfer.upload_as == "ociArtifact":
        new = {"type": "ociArtifact/v1", "imageReference": f"{transfer.target.url}/{name}"}
        return replace(resource, access=_frozen(new))
    digest = ref.digest or pinned_digest(resource, where)
    if not digest:
        raise ComponentError(
            where,
            f"the image {ref.written_repository} has no digest (neither in its reference nor "
            "as a SHA-256 resource digest), so where --copy-resources puts it cannot be known "
            "before the transfer: pin the image, or pass --upload-as ociArtifact",
        )
    new = {
        "type": "LocalBlob/v1",
        "localReference": digest,
        "mediaType": COPIED_IMAGE_MEDIA_TYPE,
        "referenceName": name,
    }
    return replace(resource, access=_frozen(new))


def _frozen(access: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(access))
