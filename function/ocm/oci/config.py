"""Who may be talked to, how, and with which credentials.

Everything here is pure data: the policy says which registry hosts are allowed (and, per
host, whether it is plain HTTP and which CA bundle verifies it); the pipeline step's
``credentials`` (a Crossplane credential Secret) say which username/password goes to which
host. :func:`credentials_from_request_data` turns the Secret's ``data`` map into a
:class:`CredentialSet`; :class:`RegistryAccess` bundles allowlist, credentials and limits.

Nothing in here ever formats a secret into a string: :class:`BasicCredential`'s ``repr``
hides the password, and parse errors name the key, never the value.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from function.errors import InvalidPolicy

#: Default size cap for one blob or manifest fetched from a registry (bytes).
DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024
#: Manifests, indexes, tag lists and token responses are small documents.
DEFAULT_MAX_MANIFEST_BYTES = 4 * 1024 * 1024
#: Seconds for connect / read / write / pool, each.
DEFAULT_TIMEOUT = 10.0
#: Redirect hops followed for one request.
DEFAULT_MAX_REDIRECTS = 5


def normalize_host(value: str) -> str:
    """``https://Reg.Example:443/v1/`` -> ``reg.example:443``; ``host:port`` stays; lower case."""
    v = value.strip()
    if "://" in v:
        v = urlsplit(v).netloc
    else:
        v = v.split("/", 1)[0]
    v = v.rsplit("@", 1)[-1]  # never keep userinfo
    return v.lower()


@dataclass(frozen=True)
class BasicCredential:
    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:  # never print the password, even in a traceback
        return f"BasicCredential(username={self.username!r}, password=<hidden>)"


@dataclass(frozen=True)
class CredentialSet:
    """Credentials by registry host; ``default`` (a Secret with bare ``username``/``password``) fits
    any host.
    """

    by_host: Mapping[str, BasicCredential] = field(default_factory=dict)
    default: BasicCredential | None = None

    def for_host(self, host: str) -> BasicCredential | None:
        h = normalize_host(host)
        if h in self.by_host:
            return self.by_host[h]
        # docker config keys for the default port are often written without it
        bare = h.rsplit(":", 1)[0] if h.endswith(":443") else None
        if bare and bare in self.by_host:
            return self.by_host[bare]
        return self.default

    def merged(self, other: CredentialSet) -> CredentialSet:
        return CredentialSet({**self.by_host, **other.by_host}, other.default or self.default)

    def __bool__(self) -> bool:
        return bool(self.by_host) or self.default is not None


def _text(data: Mapping[str, bytes | str], key: str) -> str:
    v = data[key]
    return v.decode("utf-8") if isinstance(v, bytes | bytearray) else str(v)


def credentials_from_request_data(
    data: Mapping[str, bytes | str], *, where: str = "credentials"
) -> CredentialSet:
    """A credential Secret's ``data`` (``req.credentials[name].credential_data.data``) ->
    :class:`CredentialSet`.

    Accepted shapes, as Crossplane hands them over (values are the decoded Secret bytes):

    * ``.dockerconfigjson`` (``kubernetes.io/dockerconfigjson``) or ``.dockercfg``: per-host
      entries with ``auth`` (base64 ``user:password``) or ``username``/``password``;
    * ``username`` + ``password`` keys: one credential; with a ``registry`` (or ``host``)
      key it applies to that host only, else to every allowed host.

    Raises :class:`InvalidPolicy` naming the key at fault (never a value).
    """
    if ".dockerconfigjson" in data or ".dockercfg" in data:
        key = ".dockerconfigjson" if ".dockerconfigjson" in data else ".dockercfg"
        try:
            doc = json.loads(_text(data, key))
        except (ValueError, UnicodeDecodeError):
            raise InvalidPolicy(where, f"{key} is not valid JSON") from None
        if not isinstance(doc, dict):
            raise InvalidPolicy(where, f"{key} is not a JSON object")
        auths = doc.get("auths", doc) if key == ".dockerconfigjson" else doc
        if not isinstance(auths, dict):
            raise InvalidPolicy(where, f"{key}: auths is not an object")
        by_host: dict[str, BasicCredential] = {}
        for host, entry in auths.items():
            if not isinstance(entry, dict):
                raise InvalidPolicy(
                    where, f"{key}: entry for {normalize_host(host)} is not an object"
                )
            cred = _docker_entry(entry, f"{key} entry for {normalize_host(host)}", where)
            if cred is not None:
                by_host[normalize_host(host)] = cred
        return CredentialSet(by_host)
    if "username" in data or "password" in data:
        if "username" not in data or "password" not in data:
            raise InvalidPolicy(where, "a credential Secret needs both username and password keys")
        try:
            cred = BasicCredential(_text(data, "username"), _text(data, "password"))
        except UnicodeDecodeError:
            raise InvalidPolicy(where, "username/password are not UTF-8") from None
        host_key = "registry" if "registry" in data else "host" if "host" in data else None
        if host_key:
            return CredentialSet({normalize_host(_text(data, host_key)): cred})
        return CredentialSet(default=cred)
    raise InvalidPolicy(
        where, "credential Secret has neither .dockerconfigjson nor username/password keys"
    )


def _docker_entry(entry: Mapping[str, object], what: str, where: str) -> BasicCredential | None:
    user, pw = entry.get("username"), entry.get("password")
    if isinstance(user, str) and isinstance(pw, str) and user:
        return BasicCredential(user, pw)
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            decoded = base64.b64decode(auth, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise InvalidPolicy(where, f"{what}: auth is not base64 of user:password") from None
        if ":" not in decoded:
            raise InvalidPolicy(where, f"{what}: auth is not base64 of user:password")
        u, p = decoded.split(":", 1)
        return BasicCredential(u, p)
    return None  # identitytoken-only entries and empty entries carry nothing we use


@dataclass(frozen=True)
class AllowedHost:
    """One allowlist entry: a registry host (``host`` or ``host:port``) and how to talk to it.

    ``ca_bundle`` is PEM text (one or more certificates) that verifies this host's TLS
    certificate *in addition to* nothing else: when set, only this bundle is trusted for the
    host; when ``None`` the system trust store is used. ``plain_http`` allows ``http://``.
    """

    host: str
    plain_http: bool = False
    ca_bundle: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "host", normalize_host(self.host))


@dataclass(frozen=True)
class RegistryAccess:
    """Allowlist + credentials + limits for talking to registries.

    ``hosts``: the allowlist, by normalised host. A host not in it is refused before any
    connection, including redirect targets and token realms. Build it with :meth:`build`.
    """

    hosts: Mapping[str, AllowedHost] = field(default_factory=dict)
    credentials: CredentialSet = field(default_factory=CredentialSet)
    timeout: float = DEFAULT_TIMEOUT
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES
    max_manifest_bytes: int = DEFAULT_MAX_MANIFEST_BYTES
    max_redirects: int = DEFAULT_MAX_REDIRECTS

    @classmethod
    def build(
        cls,
        hosts: Iterable[AllowedHost | str],
        credentials: CredentialSet | None = None,
        **limits: float,
    ) -> RegistryAccess:
        entries: dict[str, AllowedHost] = {}
        for h in hosts:
            entry = h if isinstance(h, AllowedHost) else AllowedHost(h)
            entries[entry.host] = entry
        return cls(hosts=entries, credentials=credentials or CredentialSet(), **limits)  # type: ignore[arg-type]

    def allowed(self, host: str) -> AllowedHost | None:
        return self.hosts.get(normalize_host(host))
