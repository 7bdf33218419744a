"""``crawler_*`` Prometheus metrics, served with Dramatiq's own on port 9191.

prometheus_client is imported on first use, not at import time: in a worker
process Dramatiq's Prometheus middleware must first point it at its
multi-process directory (after process boot), or these series would not be served.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_created: dict[str, Any] = {}
_pages_by_outcome: dict[str, Any] = {}


def _metrics() -> dict[str, Any]:
    """The metrics, created once, by whichever worker thread comes first."""
    if _created:  # filled in one step under the lock; afterwards only read
        return _created
    with _lock:
        if not _created:
            _created.update(_create_whole())
        return _created


def _create_whole() -> dict[str, Any]:
    """:func:`_create`, all or nothing: a thread interrupted half-way (Dramatiq's time
    limit raises inside it) unregisters what it made, so the next one can make it all
    again (else every later call fails with ``Duplicated timeseries``)."""
    import prometheus_client as prom

    before = set(prom.REGISTRY._collector_to_names)
    try:
        return _create()
    except BaseException:
        for collector in set(prom.REGISTRY._collector_to_names) - before:
            prom.REGISTRY.unregister(collector)
        raise


def _create() -> dict[str, Any]:
    import prometheus_client as prom

    return {
        "pages": prom.Counter("crawler_pages_total", "URLs ended, by outcome.", ["outcome"]),
        "fetch": prom.Histogram(
            "crawler_fetch_duration_seconds",
            "Time from request to the last byte of a page.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        ),
        "bytes": prom.Counter("crawler_response_bytes_total", "Body bytes read, decompressed."),
        "links": prom.Counter("crawler_links_found_total", "Links found on crawled pages."),
        "dropped": prom.Counter(
            "crawler_links_dropped_total", "Links dropped from crawled pages as malformed."
        ),
        "evictions": prom.Gauge(
            "crawler_memcached_evictions",
            "Items Memcached has evicted since it started: claims among them may be lost.",
            multiprocess_mode="max",
        ),
        "waits": prom.Counter(
            "crawler_rate_limit_waits_total",
            "Requests that found their host's rate spent: waited, or deferred.",
            ["result"],
        ),
    }


def page_ended(outcome: str, links: int) -> None:
    metrics = _metrics()
    pages = _pages_by_outcome.get(outcome)
    if pages is None:  # labels() hashes and locks on every call: each child is kept
        pages = _pages_by_outcome.setdefault(outcome, metrics["pages"].labels(outcome))
    pages.inc()
    if links:
        metrics["links"].inc(links)


def links_dropped(count: int) -> None:
    _metrics()["dropped"].inc(count)


def page_read(seconds: float, size: int) -> None:
    metrics = _metrics()
    metrics["fetch"].observe(seconds)
    metrics["bytes"].inc(size)


def rate_limited(result: str) -> None:
    _metrics()["waits"].labels(result).inc()


def memcached_evictions(count: int) -> None:
    _metrics()["evictions"].set(count)
