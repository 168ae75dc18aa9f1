"""The component data the pure core works on, whatever source it came from.

A component source (CTF, directory, OCI registry) turns storage into these immutable
values; the composition core and the ConfigData engine only ever see them. Keeping them
plain frozen dataclasses keeps the core free of I/O and makes it cheap to cache by digest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Resource types with a meaning to us (spellings as upstream uses them).
TYPE_HELM_CHART = "helmChart"
TYPE_KUSTOMIZE = "kustomize.ocm.fluxcd.io"
TYPE_CONFIGDATA = "configdata.ocm.software"
TYPE_OCI_IMAGE = "ociImage"


@dataclass(frozen=True)
class Digest:
    hash_algorithm: str
    normalisation_algorithm: str
    value: str

    @property
    def oci(self) -> str | None:
        """The digest as an OCI ``sha256:<hex>`` string, when the algorithm is SHA-256."""
        if self.hash_algorithm.replace("-", "").lower() == "sha256" and self.value:
            return f"sha256:{self.value}"
        return None


@dataclass(frozen=True)
class Resource:
    name: str
    version: str
    type: str
    relation: str
    access: Mapping[str, Any]
    extra_identity: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    digest: Digest | None = None
    labels: tuple[Mapping[str, Any], ...] = ()

    @property
    def identity(self) -> dict[str, str]:
        """OCM identity: name plus extraIdentity (version is not part of it for selection here)."""
        return {"name": self.name, **dict(self.extra_identity)}

    def describe(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.extra_identity.items()))
        return f"resource {self.name}" + (f" [{extra}]" if extra else "")


@dataclass(frozen=True)
class Descriptor:
    """A parsed component descriptor (schema v2 or ocm.software/v3alpha1, normalised)."""

    name: str
    version: str
    provider: str
    resources: tuple[Resource, ...]
    raw: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False)


# Alike by design (duplicates): plain frozen records (as the spiff syntax tree's), no behaviour.
@dataclass(frozen=True)
class Layer:
    media_type: str
    digest: str
    size: int


@dataclass(frozen=True)
class Repository:
    """Where a component lives *as a cluster sees it*: this is what Flux and kubelet pull from.

    ``host``/``base`` form ``REPO = host/base/component-descriptors/<name>``. For a mirror
    (a local CTF standing in for a registry during offline renders) this is still the
    registry's address, never the mirror's path.
    """

    host: str
    base: str = ""
    plain_http: bool = False

    def component_repo(self, component: str) -> str:
        parts = [self.host] + ([self.base.strip("/")] if self.base.strip("/") else [])
        return "/".join([*parts, "component-descriptors", component])

    @property
    def url(self) -> str:
        scheme = "http" if self.plain_http else "https"
        return f"{scheme}://{self.host}" + (
            f"/{self.base.strip('/')}" if self.base.strip("/") else ""
        )


@dataclass(frozen=True)
class ComponentVersion:
    """One resolved component version: descriptor plus where its storage lives.

    ``descriptor_digest`` is the digest of the *descriptor manifest* (never the index): Flux
    sources that read layers of the descriptor manifest are pinned to it. ``layers`` are the
    descriptor manifest's layers, needed to check that a Kustomize layer's media type is unique.
    """

    descriptor: Descriptor
    repository: Repository | None  # None: local storage (CTF, directory) with no registry address
    descriptor_digest: str
    layers: tuple[Layer, ...] = ()

    # Read through to the descriptor, as configdata's Change reads its substitution (by design).
    @property
    def name(self) -> str:
        return self.descriptor.name

    @property
    def version(self) -> str:
        return self.descriptor.version
