"""Where a component comes from: SOURCE strings as the OCM CLI writes them.

The OCM CLI names a component version as ``[TYPE::]REPO//NAME[:VERSION]``:
``oci::http://127.0.0.1:5000/source//acme.org/sack8s/podinfo:6.2.0``,
``ghcr.io/org//acme.org/x:1.0`` (HTTPS), ``ctf::./dir//acme.org/x:1.0``. Service teams copy
those strings from their CI logs into claims and CLI calls, so we accept exactly that syntax
(plus ``oci://HOST/BASE//NAME:VERSION`` and bare local paths) rather than inventing our own.

An ``http://`` scheme means plain HTTP; that is recorded in :class:`Repository.plain_http`
and nowhere else. Parsing is pure except for bare local paths, whose kind (CTF, directory,
descriptor file) is found by looking at the path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from function.errors import ComponentError
from function.ocm.ctf import INDEX_FILE, CtfSource
from function.ocm.descriptor import COMPONENT_NAME_RE, VERSION_RE
from function.ocm.directory import DESCRIPTOR_FILES, DescriptorFileSource, DirectorySource
from function.ocm.model import Repository
from function.ocm.oci import open_registry
from function.ocm.source import ComponentSource

Kind = Literal["oci", "ctf", "dir", "descriptor"]

_TYPES = {
    "oci": "oci",
    "ociregistry": "oci",
    "ctf": "ctf",
    "commontransportformat": "ctf",
}
_HOST_RE = re.compile(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*"
    r"|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$"
)
_PATH_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$")
MAX_SOURCE_LEN = 2048
CTF_INDEX = INDEX_FILE


@dataclass(frozen=True)
class Location:
    """A parsed SOURCE: which kind of storage, where, and (optionally) which component version.

    ``repository`` is set for ``oci`` (the registry address); ``path`` for the local kinds.
    ``component``/``version`` are ``None`` when the string named only a repository or a
    version was left out (then the caller picks one, see :mod:`function.ocm.versions`).
    """

    kind: Kind
    repository: Repository | None = None
    path: Path | None = None
    component: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        return format_location(self)


def parse_location(text: str, *, plain_http: bool = False) -> Location:
    """Parse ``[TYPE::]REPO//NAME[:VERSION]``, ``oci://HOST/BASE//NAME:VERSION`` or a bare local
    path.

    ``plain_http`` applies to forms without an ``http(s)://`` scheme (``oci://…``, ``host/base``):
    the scheme, when spelled, always wins. Raises :class:`ComponentError` for anything else.
    """
    text = _check_text(text)
    typ, rest = _split_type(text)
    scheme, body = _split_scheme(rest)
    if "//" in body:
        repo_part, comp_part = body.split("//", 1)
        component, version = _split_component(comp_part, text)
    else:
        repo_part, component, version = body, None, None
    loc = _repository_location(typ, scheme, repo_part, text, plain_http=plain_http)
    return Location(
        kind=loc.kind,
        repository=loc.repository,
        path=loc.path,
        component=component,
        version=version,
    )


def parse_repository(text: str, *, plain_http: bool = False) -> Location:
    """Parse an OCM *repository* (no ``//NAME``): ``oci::http://127.0.0.1:5000/source``,
    ``ctf::./dir``.
    """
    text = _check_text(text)
    typ, rest = _split_type(text)
    scheme, body = _split_scheme(rest)
    if "//" in body:
        raise ComponentError(
            f"source {_show(text)}",
            "names a component (//NAME); a repository alone is expected here",
        )
    return _repository_location(typ, scheme, body, text, plain_http=plain_http)


def format_location(loc: Location) -> str:
    """The canonical SOURCE string for ``loc`` (``parse_location(format_location(x)) == x``)."""
    if loc.kind == "oci":
        if loc.repository is None:
            raise ComponentError("source", "an oci location needs a repository")
        head = f"oci::{loc.repository.url}"
    else:
        if loc.path is None:
            raise ComponentError("source", f"a {loc.kind} location needs a path")
        head = f"ctf::{loc.path}" if loc.kind == "ctf" else str(loc.path)
    if loc.component is None:
        return head
    return f"{head}//{loc.component}" + (f":{loc.version}" if loc.version else "")


# --------------------------------------------------------------------------- parsing helpers


_USERINFO = re.compile(r"[^/@\s]*@")


def _redact(text: str) -> str:
    """Never echo credentials someone put into a reference (``user:pass@host``)."""
    return _USERINFO.sub("<credentials>@", text)


def _show(text: str) -> str:
    return repr(_redact(text[:200]))


def _check_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ComponentError("source", "is empty")
    if len(text) > MAX_SOURCE_LEN:
        raise ComponentError("source", f"is longer than {MAX_SOURCE_LEN} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ComponentError("source", "contains control characters")
    return text.strip()


def _split_type(text: str) -> tuple[str | None, str]:
    if "::" in text:
        head, rest = text.split("::", 1)
        typ = _TYPES.get(head.strip().lower())
        if typ is None:
            raise ComponentError(
                f"source {_show(text)}",
                f"unknown repository type {head[:40]!r} (supported: oci, OCIRegistry, ctf, "
                "CommonTransportFormat)",
            )
        return typ, rest
    return None, text


def _split_scheme(rest: str) -> tuple[str | None, str]:
    low = rest.lower()
    for scheme in ("http://", "https://", "oci://"):
        if low.startswith(scheme):
            return scheme[:-3], rest[len(scheme) :]
    return None, rest


def _split_component(comp: str, text: str) -> tuple[str, str | None]:
    where = f"source {_show(text)}"
    if ":" in comp:
        name, version = comp.rsplit(":", 1)
        if not version:
            raise ComponentError(where, "has an empty version after ':'")
        if not VERSION_RE.match(version):
            raise ComponentError(where, f"version {version[:80]!r} is not a valid version")
    else:
        name, version = comp, None
    if not COMPONENT_NAME_RE.match(name) or len(name) > 255:
        raise ComponentError(
            where, f"{name[:80]!r} is not a valid OCM component name (like acme.org/group/name)"
        )
    return name, version


def _is_local(repo: str) -> bool:
    if repo.startswith(("/", "./", "../", "~")) or repo in (".", ".."):
        return True
    try:
        return Path(repo).exists()
    except (OSError, ValueError):
        return False


def _repository_location(
    typ: str | None, scheme: str | None, repo: str, text: str, *, plain_http: bool
) -> Location:
    where = f"source {_show(text)}"
    if not repo:
        raise ComponentError(where, "names no repository")
    if typ == "ctf":
        if scheme is not None:
            raise ComponentError(where, "a ctf repository is a local path, not a URL")
        return Location(kind="ctf", path=Path(repo))
    if typ is None and scheme is None and _is_local(repo):
        return Location(kind=_local_kind(Path(repo), where), path=Path(repo))
    # An OCI registry: host[:port][/base].
    if scheme == "http":
        plain = True
    elif scheme == "https":
        plain = False
    else:
        plain = plain_http
    host, _, base = repo.partition("/")
    base = base.strip("/") if base else ""
    if not _HOST_RE.match(host):
        if "@" in host:
            raise ComponentError(
                where,
                "credentials in a repository reference are not allowed; use pipeline credentials",
            )
        raise ComponentError(where, f"{_redact(host[:100])!r} is not a registry host[:port]")
    if base:
        for part in base.split("/"):
            if not _PATH_COMPONENT_RE.match(part):
                raise ComponentError(
                    where,
                    f"repository path segment {part[:60]!r} is not valid in an OCI repository name",
                )
    return Location(kind="oci", repository=Repository(host=host, base=base, plain_http=plain))


def _local_kind(path: Path, where: str) -> Kind:
    """A bare local path: a CTF (has ``artifact-index.json``), a directory, or a descriptor file."""
    try:
        if path.is_file():
            return "descriptor"
        if path.is_dir():
            if (path / CTF_INDEX).is_file():
                return "ctf"
            if any((path / f).is_file() for f in DESCRIPTOR_FILES):
                return "dir"
            raise ComponentError(
                where,
                f"directory {path} holds neither {CTF_INDEX} (a CTF) nor "
                f"{' or '.join(DESCRIPTOR_FILES)} (a component directory)",
            )
    except OSError as e:
        raise ComponentError(where, f"cannot read {path} ({type(e).__name__})") from None
    raise ComponentError(where, f"{path} does not exist")


# --------------------------------------------------------------------------- opening


def open_source(
    location: Location, *, registry_repository: Repository | None = None, **oci_options: object
) -> ComponentSource:
    """A :class:`ComponentSource` for ``location``.

    ``registry_repository`` is the registry a local CTF/directory stands in for (a mirror): it
    becomes ``ComponentVersion.repository`` so localized references point where the cluster
    pulls from. Without it, localBlob images and Flux sources cannot be derived (a clear error
    later, in :mod:`function.ocm.access`). For ``oci`` it is ignored, and ``oci_options``
    (``access``, ``cache``) are passed to ``function.ocm.oci.open_registry``.
    """
    if location.kind == "ctf":
        return CtfSource(_need_path(location), repository=registry_repository)
    if location.kind == "dir":
        return DirectorySource(_need_path(location), repository=registry_repository)
    if location.kind == "descriptor":
        return DescriptorFileSource(_need_path(location), repository=registry_repository)
    if location.kind == "oci":
        if location.repository is None:
            raise ComponentError("source", "an oci location needs a repository")
        return open_registry(location.repository, **oci_options)  # type: ignore[arg-type]
    raise ComponentError("source", f"unknown location kind {location.kind!r}")


def _need_path(location: Location) -> Path:
    if location.path is None:
        raise ComponentError("source", f"a {location.kind} location needs a path")
    return location.path
