"""A thin, async OCI distribution client on httpx, built around the allowlist.

Why not a ready-made OCI library: see ``docs/oci-client.md``. In short, neither ``oras``
nor ``gardener-oci`` lets us re-check the allowlist on every redirect hop and on the token
realm, pin a CA bundle per host, stream with a hard size cap, or keep response bodies out
of error messages and logs; this module does exactly those things and no more.

Rules enforced for every request (including redirect hops and token-realm GETs):

* the URL's host must be on the allowlist (:class:`~function.ocm.oci.config.RegistryAccess`),
  checked *before* a connection is opened; ``http://`` only for hosts marked plain-HTTP;
* redirects are followed by hand, at most ``max_redirects`` hops, each target re-checked;
  ``https`` -> ``http`` downgrades are refused; credentials are dropped when the host changes;
* bodies are streamed and the request aborted once ``max_bytes`` is passed; a
  ``Content-Length`` above the cap is refused before reading; sha256 digests are verified;
* failures raise :class:`RegistryError` whose message never contains a credential or a
  response body; ``transient`` marks what a retry may fix (connect error, timeout, 5xx, 429).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from function.ocm.oci.auth import TokenCache, basic_header, parse_www_authenticate
from function.ocm.oci.config import AllowedHost, RegistryAccess, normalize_host

_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
USER_AGENT = "function-sack8s"


class RegistryError(Exception):
    """One failed registry operation. ``str()`` is safe to show: no body, no credential."""

    def __init__(
        self,
        what: str,
        *,
        transient: bool = False,
        status: int | None = None,
        tampered: bool = False,
    ) -> None:
        super().__init__(what)
        self.what = what
        self.transient = transient
        self.status = status
        self.tampered = tampered  # content that does not hash to its digest


@dataclass(frozen=True)
class Fetched:
    content: bytes
    content_type: str | None
    digest: str  # sha256 of content, verified against the requested or advertised digest
    url: str


def _is_tls_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ssl.SSLError):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    text = str(exc)
    return "CERTIFICATE_VERIFY_FAILED" in text or ("SSL" in text and "certificate" in text.lower())


class RegistryClient:
    """HTTP for one :class:`RegistryAccess`; shareable by many sources on one event loop.

    Hooks (so the client needs no metrics or cache dependency): ``on_request()`` is called
    once per HTTP request actually sent (cache statistics); ``on_get(seconds, ok)`` once per
    :meth:`get`, when it ends (registry latency: auth round trips and redirects included).
    ``transport`` is for tests only (an ``httpx.AsyncBaseTransport``).
    """

    def __init__(
        self,
        access: RegistryAccess,
        on_request: Callable[[], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        on_get: Callable[[float, bool], None] | None = None,
    ) -> None:
        self.access = access
        self._on_request = on_request or (lambda: None)
        self._on_get = on_get or (lambda _seconds, _ok: None)
        self._transport = transport
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._tokens = TokenCache()
        self._basic_hosts: set[str] = set()
        self._bearer_hosts: dict[str, Mapping[str, str]] = {}
        self._token_locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for c in clients.values():
            await c.aclose()

    # -- allowlist ---------------------------------------------------------------------------

    def check_url(self, url: str, *, previous: str | None = None) -> AllowedHost:
        """The allowlist entry for ``url``'s host, or :class:`RegistryError`. Opens no
        connection.
        """
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = normalize_host(parts.netloc) if parts.netloc else ""
        if scheme not in ("http", "https") or not host:
            raise RegistryError(
                f"refused URL with scheme {scheme or '(none)'!r}: only http(s) to allowed hosts"
            )
        entry = self.access.allowed(host)
        if entry is None:
            if previous is not None:
                raise RegistryError(
                    f"refused redirect to host {host}: not in the registry allowlist"
                )
            raise RegistryError(f"host {host} is not in the registry allowlist")
        if (
            previous is not None
            and urlsplit(previous).scheme.lower() == "https"
            and scheme == "http"
        ):
            raise RegistryError(f"refused redirect from https to plain http (host {host})")
        if scheme == "http" and not entry.plain_http:
            raise RegistryError(f"refused plain http to {host}: host is not marked plain-HTTP")
        return entry

    def _client(self, entry: AllowedHost) -> httpx.AsyncClient:
        c = self._clients.get(entry.host)
        if c is None:
            if entry.ca_bundle:
                verify: ssl.SSLContext | bool = ssl.create_default_context(cadata=entry.ca_bundle)
            else:
                verify = ssl.create_default_context()
            t = self.access.timeout
            c = httpx.AsyncClient(
                verify=verify,
                timeout=httpx.Timeout(t, connect=t, read=t, write=t, pool=t),
                follow_redirects=False,
                trust_env=False,  # no proxy or netrc from the environment: the allowlist decides
                transport=self._transport,
                headers={"User-Agent": USER_AGENT},
            )
            self._clients[entry.host] = c
        return c

    # -- requests ----------------------------------------------------------------------------

    async def get(
        self,
        url: str,
        *,
        repo: str,
        max_bytes: int,
        accept: str | None = None,
        expected_digest: str | None = None,
        want_link: bool = False,
    ) -> tuple[Fetched, str | None]:
        """GET ``url`` (a registry API URL for repository ``repo``), authenticated, capped,
        verified.

        Returns the body and, with ``want_link``, the absolute URL of the ``Link: rel=next`` page.
        """
        deadline = self.access.timeout * 6
        started = time.perf_counter()
        ok = False
        try:
            got = await asyncio.wait_for(
                self._get(url, repo, max_bytes, accept, expected_digest, want_link), deadline
            )
            ok = True
            return got
        except TimeoutError:
            raise RegistryError(f"timed out after {deadline:g}s", transient=True) from None
        finally:
            self._on_get(time.perf_counter() - started, ok)

    async def _get(self, url, repo, max_bytes, accept, expected_digest, want_link):
        origin = normalize_host(urlsplit(url).netloc)
        scope = f"repository:{repo}:pull"
        for attempt in (1, 2):
            headers = {"Accept-Encoding": "identity"}
            if accept:
                headers["Accept"] = accept
            auth = self._auth_header(origin, scope)
            if auth:
                headers["Authorization"] = auth
            status, resp_headers, body, final_url = await self._follow(url, headers, max_bytes)
            if status == 401 and auth and auth.startswith("Bearer "):
                self._tokens.drop(origin, scope)  # expired or revoked: fetch a new one once
            if (
                status == 401
                and attempt == 1
                and await self._authenticate(origin, scope, resp_headers.get("www-authenticate"))
            ):
                continue
            break
        if status == 401:
            raise RegistryError("unauthorized (HTTP 401): missing or wrong credentials", status=401)
        if status == 403:
            raise RegistryError("access denied (HTTP 403)", status=403)
        if status == 404:
            raise RegistryError("not found (HTTP 404)", status=404)
        if status == 429 or status >= 500:
            raise RegistryError(f"registry error (HTTP {status})", transient=True, status=status)
        if status != 200:
            raise RegistryError(f"unexpected HTTP {status}", status=status)
        if body is None:  # a 200 always carries a body; this keeps the type checker honest
            raise RegistryError("response without a body")
        actual = "sha256:" + hashlib.sha256(body).hexdigest()
        if expected_digest is not None:
            if actual != expected_digest:
                raise RegistryError(
                    f"digest mismatch: expected {expected_digest}, got {actual}", tampered=True
                )
        else:
            advertised = resp_headers.get("docker-content-digest")
            if advertised and advertised.startswith("sha256:") and advertised != actual:
                raise RegistryError(
                    f"digest mismatch: registry says {advertised}, content is {actual}",
                    tampered=True,
                )
        link = None
        if want_link and (raw := resp_headers.get("link")):
            m = _LINK_NEXT.search(raw)
            if m:
                link = urljoin(final_url, m.group(1))
        return Fetched(body, resp_headers.get("content-type"), actual, final_url), link

    async def _follow(self, url: str, headers: dict[str, str], max_bytes: int):
        """Send GET, following redirects by hand. Returns (status, headers, body-or-None, url)."""
        previous: str | None = None
        origin_host = normalize_host(urlsplit(url).netloc)
        for _hop in range(self.access.max_redirects + 1):
            entry = self.check_url(url, previous=previous)
            if entry.host != origin_host:
                headers = {k: v for k, v in headers.items() if k != "Authorization"}
            client = self._client(entry)
            self._on_request()
            try:
                async with client.stream("GET", url, headers=headers) as resp:
                    status = resp.status_code
                    rh = {k.lower(): v for k, v in resp.headers.items()}
                    if status in (301, 302, 303, 307, 308):
                        location = resp.headers.get("location")
                        if not location:
                            raise RegistryError(f"redirect (HTTP {status}) without Location")
                        previous, url = url, urljoin(url, location)
                        continue
                    if status != 200:
                        return status, rh, None, url
                    body = await self._read_capped(resp, max_bytes)
                    return status, rh, body, url
            except RegistryError:
                raise
            except httpx.TimeoutException:
                raise RegistryError(
                    f"timed out (no answer within {self.access.timeout:g}s)", transient=True
                ) from None
            except httpx.ConnectError as exc:
                if _is_tls_error(exc):
                    raise RegistryError(
                        f"TLS certificate of {entry.host} not trusted (configure a CA bundle for "
                        "this host)"
                    ) from None
                raise RegistryError(f"cannot connect to {entry.host}", transient=True) from None
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if _is_tls_error(exc):
                    raise RegistryError(f"TLS handshake with {entry.host} failed") from None
                raise RegistryError(
                    "connection broken before the response was complete", transient=True
                ) from None
            except httpx.HTTPError:
                raise RegistryError("HTTP transport error", transient=True) from None
        raise RegistryError(f"too many redirects (more than {self.access.max_redirects})")

    @staticmethod
    async def _read_capped(resp: httpx.Response, max_bytes: int) -> bytes:
        declared = resp.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise RegistryError(
                f"response of {int(declared)} bytes exceeds the {max_bytes} byte limit"
            )
        chunks: list[bytes] = []
        total = 0
        async for chunk in resp.aiter_bytes():
            total += len(chunk)
            if total > max_bytes:
                raise RegistryError(f"response exceeds the {max_bytes} byte limit")
            chunks.append(chunk)
        return b"".join(chunks)

    # -- auth --------------------------------------------------------------------------------

    def _auth_header(self, host: str, scope: str) -> str | None:
        if host in self._bearer_hosts:
            tok = self._tokens.get(host, scope)
            return f"Bearer {tok}" if tok else None
        if host in self._basic_hosts:
            cred = self.access.credentials.for_host(host)
            return basic_header(cred) if cred else None
        return None

    async def _authenticate(self, host: str, scope: str, www_authenticate: str | None) -> bool:
        """React to a 401; True when a retry makes sense."""
        challenges = parse_www_authenticate(www_authenticate)
        bearer = next((c for c in challenges if c.scheme == "bearer"), None)
        cred = self.access.credentials.for_host(host)
        if bearer is not None and bearer.realm:
            lock = self._token_locks.setdefault((host, scope), asyncio.Lock())
            async with lock:
                if self._tokens.get(host, scope):
                    return True
                token, expires_in = await self._fetch_token(
                    host, bearer.realm, bearer.params, scope
                )
                self._tokens.put(host, scope, token, expires_in)
                self._bearer_hosts[host] = bearer.params
            return True
        if any(c.scheme == "basic" for c in challenges) or not challenges:
            if cred is None or host in self._basic_hosts:
                return False
            self._basic_hosts.add(host)
            return True
        return False

    async def _fetch_token(self, host: str, realm: str, params: Mapping[str, str], scope: str):
        query = {"scope": params.get("scope") or scope}
        if params.get("service"):
            query["service"] = params["service"]
        url = realm + ("&" if "?" in realm else "?") + urlencode(query)
        # the realm is a URL like any other: allowlisted (and plain HTTP only where marked) or
        # refused before connecting. The registry's credentials go to it, as docker does: an
        # allowlisted realm is trusted as much as the registry that named it.
        self.check_url(url)
        headers = {"Accept": "application/json"}
        cred = self.access.credentials.for_host(host)
        if cred is not None:
            headers["Authorization"] = basic_header(cred)
        status, _, body, _ = await self._follow(url, headers, self.access.max_manifest_bytes)
        if status in (401, 403):
            raise RegistryError(
                f"token service refused the credentials (HTTP {status})", status=status
            )
        if status != 200 or body is None:
            raise RegistryError(
                f"token service answered HTTP {status}", transient=status >= 500, status=status
            )

        try:
            doc = json.loads(body)
        except ValueError:
            raise RegistryError("token service answer is not JSON") from None
        token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError("token service answer has no token")
        expires = doc.get("expires_in")
        return token, expires if isinstance(expires, int | float) else None
