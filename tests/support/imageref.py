"""Container image references by the distribution reference grammar, for the tests' assertions.

Written from the grammar in distribution/reference (``reference.go``), not taken from the
function (``function/configdata/imageref.py`` is what the tests check, so it cannot be the
judge). A reference is ``name [":" tag] ["@" digest]`` and nothing else: ``upstream/podinfo:
sha256:<hex>`` (a digest in the tag position) is refused, as a container runtime would. The
registry is the first path component only when it looks like a host (has a ``.``, a ``:`` or
an upper-case letter, or is ``localhost``: docker's rule); otherwise the runtime would pull
from Docker Hub, and ``domain`` is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*))"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)
NAME_MAX = 255
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}


@dataclass(frozen=True)
class ImageRef:
    domain: str | None  # None: no registry named (a runtime would use Docker Hub)
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}" if self.domain else self.path


def parse(text: str) -> ImageRef:
    """The parts of ``text``; ValueError when it is not a reference by the grammar."""
    m = _REFERENCE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a reference (name[:tag][@digest])")
    if len(m.group("name")) > NAME_MAX:
        raise ValueError(f"{text!r}: repository name longer than {NAME_MAX} characters")
    domain, path = m.group("domain"), m.group("path")
    looks_like_host = domain is not None and (
        "." in domain or ":" in domain or domain == "localhost" or domain.lower() != domain
    )
    if domain is not None and not looks_like_host:
        # "upstream/podinfo": the first component is a path component, not a registry.
        domain, path = None, f"{domain}/{path}"
    digest = m.group("digest")
    if digest is not None:  # go-digest: a registered algorithm, its length, lowercase hex
        algorithm, hexpart = digest.split(":", 1)
        size = _DIGEST_HEX.get(algorithm)
        if size is None or not re.fullmatch(rf"[0-9a-f]{{{size}}}", hexpart):
            raise ValueError(f"{text!r}: not a sha256/sha384/sha512 digest of lowercase hex")
    return ImageRef(domain, path, m.group("tag"), digest)
