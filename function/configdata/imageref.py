"""Image references parsed exactly as upstream's v1 controller did (go-containerregistry).

ocm-controller fed every localized reference through ``name.ParseReference`` with default
(weak) options and wrote ``Context().Registry.Name()``, ``Context().RepositoryStr()``,
``Name()`` and ``Identifier()`` into the manifests. A ConfigData written for upstream must
get the same strings here, including the quirks: the tag is dropped from ``Name()`` when a
digest is present, ``docker.io`` becomes ``index.docker.io``, single-segment Docker Hub
names gain ``library/``, a missing tag becomes ``latest``, and only a first segment that is ``localhost`` or holds ``.`` or ``:`` is a
registry (``localhost/x`` is on registry ``localhost``: ggcr v0.21.7, the version ocm-controller
v0.32.0 builds with, ``pkg/name/repository.go`` ``NewRepository``; older ggcr read it as a Docker
Hub repository).
The OCM library's own split-at-first-colon is *not* reproduced: it breaks on registry ports.
One deliberate deviation: ggcr wants repositories of at least 2 characters; we accept 1
(``localhost:5000/x:1``), where upstream would have failed the whole localization; and a
reference with a URL scheme is refused (ggcr would take ``http:`` for a registry).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from function.errors import SackError

DEFAULT_REGISTRY = "index.docker.io"
DEFAULT_TAG = "latest"
_REPO_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-./")
_TAG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_HEX64 = re.compile(r"[a-f0-9]{64}")


class BadReference(SackError):
    reason = "InvalidImageReference"


@dataclass(frozen=True)
class ImageRef:
    """One parsed reference; the properties are the values localization rules receive."""

    registry: str  # Context().Registry.Name()
    repository_raw: str  # repository as written (without the implicit library/)
    tag: str  # explicit or defaulted tag ("" when parsed as a digest reference)
    digest: str  # "sha256:<hex>" or ""

    @property
    def repository(self) -> str:
        """Context().RepositoryStr(): Docker Hub single names gain ``library/``."""
        if self.registry == DEFAULT_REGISTRY and "/" not in self.repository_raw:
            return "library/" + self.repository_raw
        return self.repository_raw

    @property
    def fully_qualified_repository(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def name(self) -> str:
        """Name(): ``reg/repo@digest`` when there is a digest (tag dropped), else ``reg/repo:tag``."""
        if self.digest:
            return f"{self.fully_qualified_repository}@{self.digest}"
        return f"{self.fully_qualified_repository}:{self.tag}"

    @property
    def identifier(self) -> str:
        """Identifier(): the digest when there is one, else the tag."""
        return self.digest or self.tag


def _check(kind: str, value: str, chars: frozenset[str], lo: int, hi: int, where: str, ref: str) -> None:
    if not lo <= len(value) <= hi:
        raise BadReference(where, f"image reference {ref!r}: {kind} {value!r} must be {lo} to {hi} characters")
    bad = sorted(set(value) - chars)
    if bad:
        raise BadReference(where, f"image reference {ref!r}: {kind} {value!r} has invalid characters {''.join(bad)!r}")


def _registry(name: str, where: str, ref: str) -> str:
    if name:
        try:
            host = urlsplit("//" + name).netloc
        except ValueError:
            host = ""
        if host != name or any(c in name for c in "@/?#") or any(c.isspace() for c in name):
            raise BadReference(where, f"image reference {ref!r}: registry {name!r} is not a valid host[:port]")
    else:
        name = DEFAULT_REGISTRY
    return DEFAULT_REGISTRY if name == "docker.io" else name


def _repository(base: str, where: str, ref: str) -> tuple[str, str]:
    if not base:
        raise BadReference(where, f"image reference {ref!r}: a repository name must be specified")
    registry, repo = "", base
    first, sep, rest = base.partition("/")
    if sep and (first == "localhost" or "." in first or ":" in first):
        registry, repo = first, rest
    _check("repository", repo, _REPO_CHARS, 1, 255, where, ref)
    return _registry(registry, where, ref), repo


def _tag(text: str, where: str, ref: str) -> tuple[str, str, str]:
    parts = text.split(":")
    base, tag = text, ""
    if len(parts) > 1 and "/" not in parts[-1]:
        base, tag = ":".join(parts[:-1]), parts[-1]
        if not tag:
            raise BadReference(where, f"image reference {ref!r}: no tag name after the colon")
        _check("tag", tag, _TAG_CHARS, 1, 128, where, ref)
    registry, repo = _repository(base, where, ref)
    return registry, repo, tag or DEFAULT_TAG


def parse_reference(text: str, *, where: str = "") -> ImageRef:
    """``name.ParseReference(text)`` with default options: a tag reference, else a digest reference."""
    if not isinstance(text, str):
        raise BadReference(where, f"image reference must be a string, got {type(text).__name__}")
    if "://" in text:  # ggcr would read "http:" as a registry; a scheme is never part of a reference
        raise BadReference(where, f"image reference {text[:200]!r} must not carry a URL scheme")
    try:
        registry, repo, tag = _tag(text, where, text)
        return ImageRef(registry, repo, tag, "")
    except BadReference as tag_error:
        parts = text.split("@")
        if len(parts) != 2:
            if "@" in text:
                raise BadReference(where, f"image reference {text!r}: more than one '@'") from None
            raise tag_error from None
    base, dig = parts
    if not dig.startswith("sha256:"):
        raise BadReference(where, f"image reference {text!r}: unsupported digest algorithm (only sha256)")
    if not _HEX64.fullmatch(dig[len("sha256:") :]):
        raise BadReference(where, f"image reference {text!r}: digest must be sha256 and 64 lowercase hex digits")
    try:
        registry, repo, _ = _tag(base, where, text)
    except BadReference:
        registry, repo = _repository(base, where, text)
    return ImageRef(registry, repo, "", dig)


def image_name(value: str) -> str:
    """The name part of an image string as written (no tag, no digest), as Kustomize ``images:`` match it."""
    name = value.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    if ":" in last:
        last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last
