"""OCM component versions in OCI registries (the ``oci`` kind of component source).

Public surface:

* :class:`OciSource` ``(repository, access=None, cache=None, client=None)`` — the
  :class:`~function.ocm.source.ComponentSource` implementation;
* :func:`open_registry` ``(repository, access=None, cache=None)`` — same, as a factory
  (``function.ocm.location.open_source`` uses it);
* :class:`RegistryAccess`, :class:`AllowedHost`, :class:`CredentialSet`,
  :class:`BasicCredential`, :func:`credentials_from_request_data` — allowlist, CA bundles,
  plain-HTTP marks, credentials from a Crossplane credential Secret;
* :func:`parse_www_authenticate` — pure ``WWW-Authenticate`` parsing;
* :class:`RegistryClient`, :class:`RegistryError` — the HTTP layer.
"""

from __future__ import annotations

from function.cache import Cache
from function.ocm.model import Repository
from function.ocm.oci.auth import Challenge, parse_www_authenticate
from function.ocm.oci.client import RegistryClient, RegistryError
from function.ocm.oci.config import (
    AllowedHost,
    BasicCredential,
    CredentialSet,
    RegistryAccess,
    credentials_from_request_data,
)
from function.ocm.oci.source import OciSource


def open_registry(
    repository: Repository, access: RegistryAccess | None = None, cache: Cache | None = None
) -> OciSource:
    """An :class:`OciSource` for ``repository`` (see its docstring for ``access``/``cache``)."""
    return OciSource(repository, access=access, cache=cache)


__all__ = [
    "AllowedHost",
    "BasicCredential",
    "Cache",
    "Challenge",
    "CredentialSet",
    "OciSource",
    "RegistryAccess",
    "RegistryClient",
    "RegistryError",
    "Repository",
    "credentials_from_request_data",
    "open_registry",
    "parse_www_authenticate",
]
