"""Plain-directory and single-descriptor component sources (for local development and the CLI).

A **component directory** is the simplest thing a service team can hand us without running
``ocm add``::

    component-descriptor.yaml      (or component-descriptor.json; exactly one of them)
    blobs/sha256.<hex>             localBlob content whose localReference is a digest (as in a CTF)
    blobs/<name>                   localBlob content whose localReference is not a digest

How a localBlob's content is found (``blob(cv, localReference, mediaType)``):

* ``localReference`` is ``sha256:<hex>`` → ``blobs/sha256.<hex>``, SHA-256 verified;
* otherwise it must be a relative file name (``chart.tgz``, ``manifests/app.tar.gz``:
  segments of ``[A-Za-z0-9._-]``, no ``..``) → ``blobs/<name>``; the resolved file must stay
  inside ``blobs/`` (symlinks out are refused). Storage has no digest for it: only the
  resource's declared digest verifies it (:mod:`function.ocm.digests`).

``descriptor_digest`` is the SHA-256 of the descriptor file bytes. It is **not** a registry
descriptor-manifest digest and ``layers`` is empty, so a Kustomize Flux source (pinned to the
descriptor manifest) cannot be derived from a directory; images and Helm charts can, when a
registry address is given (``repository``).

A **descriptor file** source (:class:`DescriptorFileSource`) is one descriptor and nothing
else: enough for ``sack8s localize`` to compute image references, with ``blob`` refusing.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from function.errors import ComponentError
from function.ocm.ctf import LocalSource, read_capped
from function.ocm.descriptor import (
    MAX_DESCRIPTOR_BYTES,
    MEDIA_TYPE_JSON,
    MEDIA_TYPE_YAML,
    parse_descriptor,
)
from function.ocm.layout import MAX_MANIFEST_BYTES, SHA256_RE, is_manifest_media_type, verify_digest
from function.ocm.model import ComponentVersion, Descriptor

DESCRIPTOR_FILES = ("component-descriptor.yaml", "component-descriptor.json")
_NAME = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


@dataclass(eq=False, repr=False)
class DescriptorFileSource(LocalSource):
    """One descriptor file; no resource content (``blob`` raises, so ``max_blob_bytes`` is
    unused).
    """

    _cached: tuple[Descriptor, str] | None = field(default=None, init=False)

    def _descriptor_path(self) -> Path:
        return self.path

    def _load(self) -> tuple[Descriptor, str]:
        if self._cached is None:
            p = self._descriptor_path()
            where = f"component descriptor {p}"
            try:
                size = p.stat().st_size
                if size > MAX_DESCRIPTOR_BYTES:
                    raise ComponentError(where, f"is larger than {MAX_DESCRIPTOR_BYTES} bytes")
                data = p.read_bytes()
            except FileNotFoundError:
                raise ComponentError(where, "not found") from None
            except OSError as e:
                raise ComponentError(where, f"cannot be read ({type(e).__name__})") from None
            media_type = MEDIA_TYPE_JSON if p.suffix.lower() == ".json" else MEDIA_TYPE_YAML
            descriptor = parse_descriptor(data, media_type, where)
            self._cached = (descriptor, "sha256:" + hashlib.sha256(data).hexdigest())
        return self._cached

    def components(self) -> list[str]:
        """The one component the descriptor describes."""
        return [self._load()[0].name]

    async def list_versions(self, component: str) -> list[str]:
        descriptor, _ = self._load()
        return [descriptor.version] if descriptor.name == component else []

    async def get(self, component: str, version: str) -> ComponentVersion:
        descriptor, digest = self._load()
        if descriptor.name != component or descriptor.version != version:
            raise ComponentError(
                f"component {component}:{version}",
                f"not found: {self._descriptor_path()} holds "
                f"{descriptor.name}:{descriptor.version}",
            )
        return ComponentVersion(
            descriptor=descriptor, repository=self.repository, descriptor_digest=digest
        )

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:  # noqa: ARG002
        raise ComponentError(
            f"component {cv.name}:{cv.version}",
            f"the source is a single descriptor file ({self.path}), which holds no resource "
            "content "
            f"(blob {digest[:80]}): use a CTF or a component directory",
        )


@dataclass(eq=False, repr=False)
class DirectorySource(DescriptorFileSource):
    """A component directory: one descriptor plus ``blobs/`` (layout in the module docstring)."""

    def _descriptor_path(self) -> Path:
        found = [self.path / f for f in DESCRIPTOR_FILES if (self.path / f).is_file()]
        if len(found) != 1:
            raise ComponentError(
                f"component directory {self.path}",
                f"must hold exactly one of {', '.join(DESCRIPTOR_FILES)}, found {len(found)}",
            )
        return found[0]

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:
        where = f"component {cv.name}:{cv.version}"
        cap = MAX_MANIFEST_BYTES if is_manifest_media_type(media_type) else self.max_blob_bytes
        blobs = self.path / "blobs"
        m = SHA256_RE.match(digest)
        if m:
            target = blobs / f"sha256.{m.group(1)}"
        elif (
            _NAME.match(digest)
            and ".." not in digest.split("/")
            and not digest.startswith("sha256:")
        ):
            target = blobs / digest
        else:
            raise ComponentError(
                where,
                f"localReference {digest[:100]!r} is neither a sha256 digest nor a relative file "
                "name",
            )
        try:
            real = target.resolve(strict=True)
        except FileNotFoundError:
            raise ComponentError(where, f"blob {digest[:100]} not found under {blobs}") from None
        except OSError as e:
            raise ComponentError(
                where, f"cannot read blob {digest[:100]} ({type(e).__name__})"
            ) from None
        if not real.is_relative_to(blobs.resolve()):
            raise ComponentError(where, f"blob {digest[:100]} resolves outside {blobs}")
        data = read_capped(real, cap, where, f"blob {digest[:100]}", f"under {blobs}")
        if m:
            verify_digest(data, digest, where)
        return data
