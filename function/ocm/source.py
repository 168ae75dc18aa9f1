"""The component-source seam: the only place the function touches component storage.

``RunFunction`` first awaits a source (CTF directory, plain directory, OCI registry) for
everything the claim needs, then hands the resulting :class:`LoadedComponent` to the pure,
synchronous core. Sources are async so a registry client never blocks the gRPC event loop;
file-backed sources simply do their (small, local) I/O inline.

Every source implements :class:`ComponentSource`. Errors are :class:`function.errors.ComponentError`
(or :class:`SourceUnavailable` for transient faults) naming the component, version and what failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from function.ocm.digests import DigestCheck
from function.ocm.model import ComponentVersion, Resource


@runtime_checkable
class ComponentSource(Protocol):
    """Reads component versions from one OCM repository."""

    async def list_versions(self, component: str) -> list[str]:
        """Every version stored for ``component`` (tags decoded: ``.build-`` back to ``+``)."""
        ...

    async def get(self, component: str, version: str) -> ComponentVersion:
        """The descriptor, descriptor-manifest digest and layers of one exact version."""
        ...

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:
        """Bytes stored under ``digest`` in the component's storage, digest-verified and
        size-capped.

        ``media_type`` decides where to look: OCI manifests and indexes are manifests (a
        registry serves them from ``/manifests/``), anything else is a blob.
        """
        ...


@dataclass(frozen=True)
class LoadedComponent:
    """Everything the pure core needs from a component, fetched up front.

    ``contents`` maps a resource's :func:`resource_key` to the *extracted content* the core
    reads: for the ConfigData resource the file bytes under its own name; for a deployable
    (Helm chart, Kustomize tar) the files inside it, keyed by path relative to the resource
    root (``values.yaml``, ``deployment.yaml``). ``blob_heads`` keeps the first bytes of a
    deployable's raw blob (for the gzip magic check of the packaging contract).
    ``deployable`` and ``configdata`` are the resources selected for the claim (selected once,
    before loading; the core reads them from here). ``digests`` says, per loaded resource, how
    its blob compared with the resource's declared digest (a mismatch never loads; whether a
    missing digest is acceptable is the policy's call, :func:`function.ocm.digests.enforce`).
    """

    component: ComponentVersion
    contents: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)
    blob_heads: Mapping[str, bytes] = field(default_factory=dict)
    deployable: Resource | None = None
    configdata: Resource | None = None
    digests: Mapping[str, DigestCheck] = field(default_factory=dict)


def resource_key(resource: Resource) -> str:
    """A stable key for one resource inside a component version (name plus extraIdentity)."""
    extra = ",".join(f"{k}={v}" for k, v in sorted(resource.extra_identity.items()))
    return resource.name + (f"[{extra}]" if extra else "")
