"""One process-wide cache for component storage reads, shared by concurrent requests.

Two kinds of entries:

* **immutable** (keyed by content digest: manifests and descriptors fetched by digest,
  blobs): kept until evicted, least recently used first, under a byte budget
  (``max_bytes``). A digest-keyed entry is never re-fetched while it is cached.
* **short-lived** (tag lists, tag -> digest resolutions): kept ``ttl`` seconds (default 60),
  at most ``max_ttl_entries`` of them.

Concurrent identical fetches are coalesced: the first caller fetches, the others await the
same result (or the same error; errors are never cached). All of it runs on the event loop
and does no blocking I/O itself; it is asyncio-safe (one event loop), not thread-safe.

:attr:`Cache.stats` counts hits, misses, coalesced waits, evictions and the registry
requests made on behalf of this cache (the OCI client increments ``registry_requests``),
for tests and metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_TTL = 60.0
DEFAULT_MAX_TTL_ENTRIES = 4096


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    coalesced: int = 0
    evictions: int = 0
    expirations: int = 0
    registry_requests: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


class Cache:
    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        ttl: float = DEFAULT_TTL,
        max_ttl_entries: int = DEFAULT_MAX_TTL_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.max_ttl_entries = max_ttl_entries
        self.stats = CacheStats()
        self._clock = clock
        self._immutable: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._ttl: OrderedDict[Hashable, tuple[Any, float]] = OrderedDict()
        self._inflight: dict[Hashable, asyncio.Future[Any]] = {}

    # -- public ---------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def count_request(self) -> None:
        """Called by a registry client for every HTTP request it sends."""
        self.stats.registry_requests += 1

    async def immutable(
        self,
        key: Hashable,
        fetch: Callable[[], Awaitable[T]],
        size: Callable[[T], int] | None = None,
    ) -> T:
        """The value under a content-addressed ``key``; ``fetch()`` only on a miss."""
        entry = self._immutable.get(key)
        if entry is not None:
            self._immutable.move_to_end(key)
            self.stats.hits += 1
            return entry[0]
        return await self._fetch(("i", key), fetch, lambda v: self._put_immutable(key, v, size))

    async def short_lived(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        """The value under a mutable ``key`` (tag list, tag resolution), re-fetched after ``ttl``."""
        entry = self._ttl.get(key)
        if entry is not None:
            if entry[1] > self._clock():
                self.stats.hits += 1
                return entry[0]
            del self._ttl[key]
            self.stats.expirations += 1
        return await self._fetch(("t", key), fetch, lambda v: self._put_ttl(key, v))

    def peek_immutable(self, key: Hashable) -> Any | None:
        entry = self._immutable.get(key)
        return None if entry is None else entry[0]

    def clear(self) -> None:
        self._immutable.clear()
        self._ttl.clear()
        self._bytes = 0

    # -- internals ------------------------------------------------------------------------

    async def _fetch(
        self, flight_key: Hashable, fetch: Callable[[], Awaitable[T]], store: Callable[[T], None]
    ) -> T:
        pending = self._inflight.get(flight_key)
        if pending is not None:
            self.stats.coalesced += 1
            return await asyncio.shield(pending)
        self.stats.misses += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[flight_key] = fut
        try:
            value = await fetch()
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: no "never retrieved" warning when nobody waited
            raise
        else:
            store(value)
            fut.set_result(value)
            return value
        finally:
            self._inflight.pop(flight_key, None)

    def _put_immutable(self, key: Hashable, value: Any, size: Callable[[Any], int] | None) -> None:
        n = size(value) if size else len(value)  # type: ignore[arg-type]
        if n > self.max_bytes:
            return  # larger than the whole budget: serve it, do not keep it
        old = self._immutable.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._immutable[key] = (value, n)
        self._bytes += n
        while self._bytes > self.max_bytes and self._immutable:
            _, (_, evicted) = self._immutable.popitem(last=False)
            self._bytes -= evicted
            self.stats.evictions += 1

    def _put_ttl(self, key: Hashable, value: Any) -> None:
        self._ttl.pop(key, None)
        self._ttl[key] = (value, self._clock() + self.ttl)
        while len(self._ttl) > self.max_ttl_entries:
            self._ttl.popitem(last=False)
            self.stats.evictions += 1


_default: Cache | None = None


def default_cache() -> Cache:
    """The process-wide cache every OCI source uses unless given its own."""
    global _default
    if _default is None:
        _default = Cache()
    return _default
