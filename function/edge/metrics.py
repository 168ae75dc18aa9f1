"""Prometheus metrics for ``sack8s serve`` (opt-in: ``--metrics-address`` /
``SACK8S_METRICS_ADDRESS``).

Counters are always kept (they cost a dictionary update per request); they are only
*exposed* when the server is started with a metrics address. Everything lives in one
private :class:`prometheus_client.CollectorRegistry`, so no process or platform collector
leaks in and tests can read values without a server.

=========================================  =====================================================
``sack8s_requests_total{outcome}``          RunFunction calls: ``composed``, ``fatal``, ``waiting``
                                            (requirements not resolved yet)
``sack8s_request_duration_seconds``         RunFunction latency (histogram)
``sack8s_results_total{severity,reason}``   Results returned by severity (Fatal, Warning, Normal)
                                            and reason
``sack8s_registry_request_duration_seconds``
  ``{outcome}``                             one registry GET (auth round trips and redirects
                                            included), ``ok`` or ``error``
``sack8s_cache_*_total``                    the digest/TTL cache: hits, misses, coalesced,
                                            evictions, expirations, registry_requests
``sack8s_cache_bytes``                      bytes held by the digest-keyed cache
``sack8s_memo_*_total{table}``              each memo table: hits, misses, evictions, refused
                                            (kept out by a full table's doorkeeper)
``sack8s_memo_bytes{table}``                bytes held by each memo table
=========================================  =====================================================

Label values are bounded: severities are three, reasons come from the error classes
(``function/errors.py``) and the core's notes, never from user text.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

ENV_ADDRESS = "SACK8S_METRICS_ADDRESS"

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "sack8s_requests",
    "RunFunction requests by outcome (composed, fatal, waiting).",
    ["outcome"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "sack8s_request_duration_seconds",
    "RunFunction latency in seconds.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
RESULTS = Counter(
    "sack8s_results",
    "Results returned by RunFunction, by severity and reason.",
    ["severity", "reason"],
    registry=REGISTRY,
)
REGISTRY_LATENCY = Histogram(
    "sack8s_registry_request_duration_seconds",
    "Latency of one registry GET (authentication round trips and redirects included).",
    ["outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)

_OUTCOMES: dict[str, Any] = {}

_SEVERITY = {0: "Unspecified", 1: "Fatal", 2: "Warning", 3: "Normal"}


def severity_name(value: int) -> str:
    return _SEVERITY.get(int(value), "Unspecified")


def observe_request(outcome: str, seconds: float, results: Iterable[tuple[int, str]]) -> None:
    """Record one RunFunction call: its outcome, duration and every (severity, reason) result."""
    counter = _OUTCOMES.get(outcome)
    if counter is None:  # labels() takes a lock and builds a key: looked up once an outcome
        counter = _OUTCOMES[outcome] = REQUESTS.labels(outcome)
    counter.inc()
    DURATION.observe(seconds)
    for severity, reason in results:
        RESULTS.labels(severity_name(severity), reason or "Unspecified").inc()


# -- cache statistics ----------------------------------------------------------------------


class _StatsCollector(Collector):
    """Counters and a bytes gauge summed over every watched object of one kind.

    The component cache, the kept answers and the memos each count the same way (a few
    counters and the bytes they hold), so one collector reads all three; ``tables`` turns
    a watched object into ``{label value: snapshot}`` (one unlabelled table where
    ``label`` is None). Objects are held weakly: a dropped cache leaves the sums.
    """

    def __init__(
        self,
        prefix: str,
        what: str,
        fields: tuple[str, ...],
        bytes_help: str,
        tables: Callable[[Any], dict[str, dict[str, int]]],
        label: str | None = None,
    ) -> None:
        self._prefix, self._what, self._fields = prefix, what, fields
        self._bytes_help, self._tables, self._label = bytes_help, tables, label
        self._watched: weakref.WeakSet[Any] = weakref.WeakSet()

    def watch(self, obj: Any) -> None:
        self._watched.add(obj)

    def collect(self) -> Iterator[Metric]:
        sums: dict[str, dict[str, int]] = {} if self._label else {"": {}}
        for obj in list(self._watched):
            for table, snap in self._tables(obj).items():
                agg = sums.setdefault(table, {})
                for k, v in snap.items():
                    agg[k] = agg.get(k, 0) + v
        labels = [self._label] if self._label else []
        families: list[CounterMetricFamily | GaugeMetricFamily] = [
            CounterMetricFamily(
                f"{self._prefix}_{name}",
                f"{self._what}: {name.replace('_', ' ')}.",
                labels=labels,
            )
            for name in self._fields
        ]
        families.append(GaugeMetricFamily(f"{self._prefix}_bytes", self._bytes_help, labels=labels))
        for fam, name in zip(families, (*self._fields, "bytes"), strict=True):
            for table, agg in sorted(sums.items()):
                fam.add_metric([table] if self._label else [], float(agg.get(name, 0)))
            yield fam


_CACHES = _StatsCollector(
    "sack8s_cache",
    "Component cache",
    ("hits", "misses", "coalesced", "evictions", "expirations", "registry_requests"),
    "Bytes held by the digest-keyed component cache.",
    lambda c: {"": {**c.stats.snapshot(), "bytes": c.size_bytes}},
)
_RESPONSES = _StatsCollector(
    "sack8s_responses",
    "Answers kept for identical requests",
    ("reused", "stored", "stale", "refused", "evictions"),
    "Bytes held by the answers kept for identical requests.",
    lambda r: {"": r.snapshot()},
)
_MEMOS = _StatsCollector(
    "sack8s_memo",
    "Memos of pure steps",
    ("hits", "misses", "evictions", "refused"),
    "Bytes held by the memos.",
    lambda m: m.stats(),
    label="table",
)
for _collector in (_CACHES, _RESPONSES, _MEMOS):
    REGISTRY.register(_collector)


def watch_cache(cache: Any) -> None:
    """Expose ``cache.stats`` (function.cache.Cache) through the metrics endpoint."""
    _CACHES.watch(cache)


def watch_responses(responses: Any) -> None:
    """Expose ``responses.stats`` (function.cache.Responses) through the metrics endpoint."""
    _RESPONSES.watch(responses)


def watch_memos(memos: Any) -> None:
    """Expose ``memos.stats()`` (function.cache.Memos) per table through the metrics endpoint."""
    _MEMOS.watch(memos)


# -- registry latency ----------------------------------------------------------------------


def observe_registry_get(seconds: float, ok: bool) -> None:  # noqa: FBT001 - the on_get hook
    """The registry client's ``on_get`` hook: one registry GET ended (wired by the edge)."""
    with contextlib.suppress(Exception):  # metrics must never break a registry read
        REGISTRY_LATENCY.labels("ok" if ok else "error").observe(seconds)


# -- exposition ----------------------------------------------------------------------------


def exposition() -> bytes:
    """The current metrics in the Prometheus text format."""
    return generate_latest(REGISTRY)


def parse_address(address: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``:port`` (all interfaces)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"metrics address {address!r} must be HOST:PORT")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - ":PORT" means all interfaces, as documented
    return host, int(port)


def start_server(address: str) -> tuple[Any, Any]:
    """Serve ``/metrics`` on ``address`` in a daemon thread; returns (server, thread)."""
    host, port = parse_address(address)
    return start_http_server(port, addr=host, registry=REGISTRY)
