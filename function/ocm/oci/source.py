""":class:`OciSource`: OCM component versions stored in an OCI registry, behind the source seam.

Reads exactly what the OCM CLI v0.9.x writes (FACTS.md §3–§5, packaging.md §1, §4):

``GET /v2/REPO/manifests/<tag>`` (``+`` -> ``.build-``) with every manifest/index type in
``Accept`` resolves the tag; from there :func:`function.ocm.layout.walk` (the walk every
storage shares) reads the layout through ``/manifests/`` and ``/blobs/`` by digest; the
result records the *descriptor manifest* digest and its layers.

Everything fetched by digest is cached for good (:class:`function.cache.Cache`), tag
lists and tag resolutions for the cache's TTL. Every failure is one
:class:`~function.errors.ComponentError` (or :class:`~function.errors.SourceUnavailable` when
transient) naming component, version, registry and what failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Self

from function.cache import Cache
from function.errors import ComponentError, DigestMismatch, SourceUnavailable
from function.ocm.layout import (
    ACCEPT_MANIFESTS,
    REPO_PREFIX,
    LayoutError,
    decode_tag,
    encode_tag,
    is_manifest_media_type,
    is_sha256,
    parse_json,
    walk,
)
from function.ocm.model import ComponentVersion, Repository
from function.ocm.oci.client import Fetched, RegistryClient, RegistryError
from function.ocm.oci.config import AllowedHost, RegistryAccess, normalize_host

#: Tag-list pages followed at most (1000 tags a page).
MAX_TAG_PAGES = 100


class OciSource:
    """A :class:`~function.ocm.source.ComponentSource` for one OCM repository in an OCI registry.

    ``OciSource(repository, access=None, cache=None, client=None, on_get=None)``

    * ``repository``: ``Repository(host, base, plain_http)`` as parsed from
      ``oci::http://host:port/base`` (``function.ocm.location``).
    * ``access``: allowlist, credentials and limits (:class:`RegistryAccess`). ``None`` means
      "this repository's own host only, anonymous, default limits" (what
      ``location.open_source`` gets). The repository's host must be on the allowlist, and
      ``plain_http`` repositories need an allowlist entry marked plain-HTTP; otherwise every
      call fails before any connection.
    * ``cache``: a shared :class:`Cache` (the edge owns one per process); default: a cache of
      this source's own.
    * ``client``: a shared :class:`RegistryClient` (it holds connection pools and tokens);
      by default the source makes its own. Close it with :meth:`aclose` (or ``async with``).
    * ``on_get``: the client's per-GET hook (registry latency metrics), for the client it makes.
    """

    def __init__(
        self,
        repository: Repository,
        access: RegistryAccess | None = None,
        cache: Cache | None = None,
        client: RegistryClient | None = None,
        on_get: Callable[[float, bool], None] | None = None,
    ) -> None:
        if access is None:
            access = RegistryAccess.build(
                [AllowedHost(repository.host, plain_http=repository.plain_http)]
            )
        self.repository = repository
        self.access = access
        self.cache = cache if cache is not None else Cache()
        self._own_client = client is None
        self.client = client or RegistryClient(
            access, on_request=self.cache.count_request, on_get=on_get
        )
        self.host = normalize_host(repository.host)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_client:
            await self.client.aclose()

    # -- naming ------------------------------------------------------------------------------

    def repo_path(self, component: str) -> str:
        """``base/component-descriptors/<name>``: the OCI repository name (no host)."""
        base = self.repository.base.strip("/")
        return "/".join(([base] if base else []) + [REPO_PREFIX + component])

    def _url(self, component: str, tail: str) -> str:
        scheme = "http" if self.repository.plain_http else "https"
        return f"{scheme}://{self.host}/v2/{self.repo_path(component)}/{tail}"

    def _fail(self, component: str, version: str | None, op: str, err: Exception) -> ComponentError:
        where = f"component {component}" + (f":{version}" if version else "")
        what = err.what if isinstance(err, RegistryError) else str(err)
        msg = f"{op} at registry {self.host} (repository {self.repo_path(component)}): {what}"
        if isinstance(err, RegistryError) and err.transient:
            return SourceUnavailable(where, msg)
        if isinstance(err, RegistryError) and err.tampered:
            return DigestMismatch(where, msg)
        return ComponentError(where, msg)

    async def _fetch(
        self, component: str, version: str | None, op: str, call: Callable[[], Awaitable[Any]]
    ) -> Any:
        try:
            return await call()
        except (RegistryError, LayoutError) as err:
            raise self._fail(component, version, op, err) from None

    # -- the seam ----------------------------------------------------------------------------

    async def list_versions(self, component: str) -> list[str]:
        repo = self.repo_path(component)

        async def fetch() -> tuple[str, ...]:
            tags: list[str] = []
            url: str | None = self._url(component, "tags/list?n=1000")
            for _ in range(MAX_TAG_PAGES):
                if url is None:
                    break
                got, url = await self.client.get(
                    url, repo=repo, max_bytes=self.access.max_manifest_bytes, want_link=True
                )
                doc = parse_json(got.content, "tag list")
                page = doc.get("tags") or []
                if not isinstance(page, list) or not all(isinstance(t, str) for t in page):
                    raise LayoutError("tag list has no list of tags")
                tags.extend(page)
            else:
                if url is not None:
                    raise LayoutError(f"tag list has more than {MAX_TAG_PAGES} pages")
            return tuple(tags)

        try:
            tags = await self.cache.short_lived(("tags", self.host, repo), fetch)
        except RegistryError as err:
            if err.status == 404:
                raise ComponentError(
                    f"component {component}",
                    f"listing versions at registry {self.host} (repository {repo}): no such "
                    "repository (HTTP 404)",
                ) from None
            raise self._fail(component, None, "listing versions", err) from None
        except LayoutError as err:
            raise self._fail(component, None, "listing versions", err) from None
        return [decode_tag(t) for t in tags]

    async def get(self, component: str, version: str) -> ComponentVersion:
        repo = self.repo_path(component)
        tag = encode_tag(version)

        async def resolve_tag() -> str:
            got, _ = await self.client.get(
                self._url(component, f"manifests/{tag}"),
                repo=repo,
                max_bytes=self.access.max_manifest_bytes,
                accept=ACCEPT_MANIFESTS,
            )
            # the document is content-addressed now: keep it with the digest-keyed entries
            await self.cache.immutable(("manifest", self.host, repo, got.digest), _value(got))
            return got.digest

        try:
            top_digest = await self.cache.short_lived(("tag", self.host, repo, tag), resolve_tag)
        except RegistryError as err:
            if err.status == 404:
                raise ComponentError(
                    f"component {component}:{version}",
                    f"version not found at registry {self.host} (repository {repo}, tag {tag}): "
                    "HTTP 404",
                ) from None
            raise self._fail(component, version, f"resolving tag {tag}", err) from None

        async def build() -> ComponentVersion:
            return await self._build(component, version, repo, top_digest)

        return await self.cache.immutable(
            ("cv", self.host, repo, top_digest, version), build, size=lambda cv: _cv_size(cv)
        )

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:
        component, version = cv.name, cv.version
        if cv.repository is not None and normalize_host(cv.repository.host) != self.host:
            raise ComponentError(
                f"component {component}:{version}",
                f"blob {digest} belongs to registry {cv.repository.host}, not {self.host}",
            )
        if not is_sha256(digest):
            raise ComponentError(
                f"component {component}:{version}",
                f"blob reference {digest[:80]!r} is not a sha256 digest",
            )
        as_manifest = is_manifest_media_type(media_type)
        return await self._by_digest(
            component,
            version,
            self.repo_path(component),
            digest,
            manifest=as_manifest,
            max_bytes=self.access.max_blob_bytes,
            op=f"fetching {'manifest' if as_manifest else 'blob'} {digest}",
        )

    # -- internals ---------------------------------------------------------------------------

    async def _by_digest(
        self,
        component: str,
        version: str,
        repo: str,
        digest: str,
        *,
        manifest: bool,
        max_bytes: int,
        op: str,
    ) -> bytes:
        tail = f"manifests/{digest}" if manifest else f"blobs/{digest}"

        async def fetch() -> bytes:
            got, _ = await self.client.get(
                self._url(component, tail),
                repo=repo,
                max_bytes=max_bytes,
                accept=ACCEPT_MANIFESTS if manifest else None,
                expected_digest=digest,
            )
            return got.content

        key = ("manifest" if manifest else "blob", self.host, repo, digest)
        return await self._fetch(component, version, op, lambda: self.cache.immutable(key, fetch))

    async def _build(
        self, component: str, version: str, repo: str, top_digest: str
    ) -> ComponentVersion:
        async def read(digest: str, cap: int, *, manifest: bool, what: str) -> bytes:
            return await self._by_digest(
                component,
                version,
                repo,
                digest,
                manifest=manifest,
                max_bytes=cap,
                op=f"fetching {what}",
            )

        walked = await walk(
            read,
            top_digest,
            place=f"at registry {self.host} (repository {repo})",
            name=component,
            version=version,
            repository=self.repository,
            max_manifest_bytes=self.access.max_manifest_bytes,
        )
        return walked.component


def _value(got: Fetched) -> Callable[[], Awaitable[bytes]]:
    async def value() -> bytes:
        return got.content

    return value


def _cv_size(cv: ComponentVersion) -> int:
    return 4096 + 512 * len(cv.descriptor.resources) + 128 * len(cv.layers)
