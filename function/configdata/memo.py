"""Process-wide memo tables for the ConfigData engine's pure steps.

Crossplane calls the function on every reconcile of every claim, and the ConfigData of a
component version, its deployable's files and (per claim) its values do not change between
reconciles. Parsing them (pure-Python YAML), checking a JSON Schema and planning/applying
every rule again each time was most of a warm ``RunFunction``. So the pure results are
memoised here, **keyed by content** (a SHA-256 of the bytes, or a canonical JSON of the
values), never by name or time: new content is a new key, so an entry can never be stale;
old entries just age out (least recently used first, under an entry and a byte budget).

What callers get back must not be mutated (parsed models, the Flux mutation), or is a fresh
copy (parsed round-trip YAML files, which the engine edits in place). Exceptions are never
cached: invalid input is re-checked, and reported, on every call.

Everything here is guarded by one lock, so the tables are also safe from threads (the gRPC
server runs the handler on one event loop, the CLI in one thread).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Iterable, Mapping


def digest(data: bytes | str) -> bytes:
    """SHA-256 of ``data`` (text as UTF-8): the content key."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).digest()


def files_digest(files: Mapping[str, bytes | str]) -> bytes:
    """One content key for a set of named files (name and length framed, order independent)."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        n = name.encode("utf-8")
        h.update(len(n).to_bytes(4, "big") + n + len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.digest()


class IdentityDigests:
    """Content digests remembered per *object* (``is``), for inputs that are the same object on
    every warm request (the cached component's file maps and ConfigData bytes): hashing them
    again would cost more than the rest of the key. Holds a strong reference, so an id is never
    reused while its entry lives; bounded by entries and by the bytes it keeps alive, oldest
    dropped first."""

    def __init__(self, max_entries: int = 256, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: OrderedDict[int, tuple[Any, bytes, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, obj: Any, compute: Any) -> bytes:
        with self._lock:
            hit = self._data.get(id(obj))
            if hit is not None and hit[0] is obj:
                self._data.move_to_end(id(obj))
                return hit[1]
        d = compute(obj)
        n = len(obj) if isinstance(obj, (bytes, str)) else sum(len(v) for v in obj.values())
        if n > self.max_bytes:
            return d
        with self._lock:
            old = self._data.pop(id(obj), None)
            if old is not None:
                self._bytes -= old[2]
            self._data[id(obj)] = (obj, d, n)
            self._bytes += n
            while self._data and (len(self._data) > self.max_entries or self._bytes > self.max_bytes):
                _, (_, _, m) = self._data.popitem(last=False)
                self._bytes -= m
        return d

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


@dataclass
class MemoStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class Memo:
    """A bounded LRU map: at most ``max_entries`` entries and about ``max_bytes`` bytes."""

    def __init__(self, name: str, max_entries: int, max_bytes: int) -> None:
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.stats = MemoStats()
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                self.stats.misses += 1
                return None
            self._data.move_to_end(key)
            self.stats.hits += 1
            return entry[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, nbytes)
            self._bytes += nbytes
            while self._data and (len(self._data) > self.max_entries or self._bytes > self.max_bytes):
                _, (_, n) = self._data.popitem(last=False)
                self._bytes -= n
                self.stats.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


MB = 1024 * 1024
# Budgets (estimated bytes; together at most ~136 MB, in practice far less: a component's
# parsed files and mutations are tens to hundreds of kB). Entries are evicted LRU first.
#: Parsed ConfigData models, by (content digest, name).
CONFIGDATA = Memo("configdata", 1024, 16 * MB)
#: Compiled JSON Schema validators, by canonical schema JSON.
VALIDATORS = Memo("validators", 1024, 8 * MB)
#: Parsed round-trip YAML files (pickled, copied out on every hit), by (content digest, name).
YAML_FILES = Memo("yaml-files", 8192, 32 * MB)
#: Plain safe-loaded YAML streams (pickled, copied out on every hit), by (content digest, byte cap).
YAML_DOCS = Memo("yaml-docs", 8192, 16 * MB)
#: Flux mutations (the whole ConfigData result for one claim), by content of every input.
MUTATIONS = Memo("mutations", 8192, 64 * MB)

ALL: tuple[Memo, ...] = (CONFIGDATA, VALIDATORS, YAML_FILES, YAML_DOCS, MUTATIONS)
#: Digests of immutable inputs (``bytes``, ``MappingProxyType`` of bytes) by identity.
DIGESTS = IdentityDigests()


def clear_all() -> None:
    for m in ALL:
        m.clear()
    DIGESTS.clear()


def stats() -> dict[str, dict[str, int]]:
    return {
        m.name: {"entries": len(m), "bytes": m.size_bytes, "hits": m.stats.hits, "misses": m.stats.misses, "evictions": m.stats.evictions}
        for m in ALL
    }


def approx_size(value: Any, _depth: int = 0) -> int:
    """A cheap size estimate of plain data (for the byte budgets; not exact)."""
    if isinstance(value, (str, bytes)):
        return 50 + len(value)
    if isinstance(value, Mapping):
        return 100 + sum(approx_size(k, _depth + 1) + approx_size(v, _depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return 60 + sum(approx_size(v, _depth + 1) for v in value)
    return 32


def iter_sizes(values: Iterable[Any]) -> int:
    return sum(approx_size(v) for v in values)
