"""Image references: the one grammar, parsed exactly as upstream's v1 controller did
(go-containerregistry).

Both sides of an image reference use this parser: the packaging contract
(:mod:`function.ocm.access`, reading ``access.imageReference`` as written, with an optional
``http(s)://`` scheme) and the ConfigData ``image``/``registry``/``repository``/``tag`` rules
(the go-containerregistry view below). One parse gives both: what was written
(:attr:`ImageRef.host`, ``path``, ``tag``, ``digest``) and what upstream computed from it
(:attr:`ImageRef.registry`, ``repository``, ``name``, ``identifier``).

ocm-controller fed every localized reference through ``name.ParseReference`` with default
(weak) options and wrote ``Context().Registry.Name()``, ``Context().RepositoryStr()``,
``Name()`` and ``Identifier()`` into the manifests. A ConfigData written for upstream must
get the same strings here, including the quirks: the tag is dropped from ``Name()`` when a
digest is present, ``docker.io`` becomes ``index.docker.io``, single-segment Docker Hub
names gain ``library/``, a missing tag becomes ``latest``, and only a first segment that is
``localhost`` or holds ``.`` or ``:`` is a registry (``localhost/x`` is on registry
``localhost``: ggcr v0.21.7, the version ocm-controller v0.32.0 builds with,
``pkg/name/repository.go`` ``NewRepository``; older ggcr read it as a Docker Hub repository).
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
    """One parsed reference: the fields as written; the properties are go-containerregistry's
    values, the ones localization rules receive.
    """

    host: str  # the registry as written ("" when the reference names none: Docker Hub)
    path: str  # the repository as written (without the implicit library/)
    tag: str  # the tag as written ("" when none)
    digest: str  # "sha256:<hex>" or ""
    scheme: str = (
        ""  # "http"/"https" when an OCM access spelled one (never in a localized reference)
    )

    @property
    def registry(self) -> str:
        """Context().Registry.Name(): Docker Hub is ``index.docker.io``."""
        return DEFAULT_REGISTRY if self.host in ("", "docker.io") else self.host

    @property
    def repository(self) -> str:
        """Context().RepositoryStr(): Docker Hub single names gain ``library/``."""
        if self.registry == DEFAULT_REGISTRY and "/" not in self.path:
            return "library/" + self.path
        return self.path

    @property
    def fully_qualified_repository(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def name(self) -> str:
        """Name(): ``reg/repo@digest`` when there is a digest (tag dropped), else
        ``reg/repo:tag``.
        """
        if self.digest:
            return f"{self.fully_qualified_repository}@{self.digest}"
        return f"{self.fully_qualified_repository}:{self.tag or DEFAULT_TAG}"

    @property
    def identifier(self) -> str:
        """Identifier(): the digest when there is one, else the tag (``latest`` when none)."""
        return self.digest or self.tag or DEFAULT_TAG

    @property
    def written_repository(self) -> str:
        """``host/path`` as written: the repository a cluster pulls from (no tag, no digest)."""
        return f"{self.host}/{self.path}" if self.host else self.path

    def written(self) -> str:
        """The reference as written, without the scheme: ``host/path[:tag][@digest]``."""
        return (
            self.written_repository
            + (f":{self.tag}" if self.tag else "")
            + (f"@{self.digest}" if self.digest else "")
        )


def _check(
    kind: str, value: str, chars: frozenset[str], lo: int, hi: int, where: str, ref: str
) -> None:
    if not lo <= len(value) <= hi:
        raise BadReference(
            where, f"image reference {ref!r}: {kind} {value!r} must be {lo} to {hi} characters"
        )
    bad = sorted(set(value) - chars)
    if bad:
        raise BadReference(
            where,
            f"image reference {ref!r}: {kind} {value!r} has invalid characters {''.join(bad)!r}",
        )


def _registry(name: str, where: str, ref: str) -> str:
    """The registry as written, checked ("" for none)."""
    if name:
        try:
            host = urlsplit("//" + name).netloc
        except ValueError:
            host = ""
        if host != name or any(c in name for c in "@/?#") or any(c.isspace() for c in name):
            raise BadReference(
                where, f"image reference {ref!r}: registry {name!r} is not a valid host[:port]"
            )
    return name


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
    return registry, repo, tag


def parse_reference(text: str, *, where: str = "") -> ImageRef:
    """``name.ParseReference(text)`` with default options: a tag reference, else a digest
    reference.
    """
    if not isinstance(text, str):
        raise BadReference(where, f"image reference must be a string, got {type(text).__name__}")
    if (
        "://" in text
    ):  # ggcr would read "http:" as a registry; a scheme is never part of a reference
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
        raise BadReference(
            where, f"image reference {text!r}: unsupported digest algorithm (only sha256)"
        )
    if not _HEX64.fullmatch(dig[len("sha256:") :]):
        raise BadReference(
            where, f"image reference {text!r}: digest must be sha256 and 64 lowercase hex digits"
        )
    try:
        registry, repo, tag = _tag(base, where, text)
    except BadReference:
        (registry, repo), tag = _repository(base, where, text), ""
    return ImageRef(registry, repo, tag, dig)


def image_name(value: str) -> str:
    """The name part of an image string as written (no tag, no digest), as Kustomize ``images:``
    match it.
    """
    name = value.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    if ":" in last:
        last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last
