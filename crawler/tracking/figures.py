"""A crawl's figures beyond its counters, for the dashboard: what it is (:func:`describe`,
listed among the recent crawls), its latest failures, and per host its pages, errors,
bytes and how long its pages took, counted by workers as each message ends, in the
round trip that counts the crawl's own ending (:func:`crawler.frontier.counters.ended`).

Per host there are a few counters (pages, errors, bytes, and one per bucket of page
times: a histogram from which the median and the 95th percentile are read, to the
bucket's bound); the crawl's list of hosts grows by a line when a host's first counter
is made, up to :data:`MAX_HOSTS` hosts.  The time is the fetch's alone (``fetch_ms``:
from its request to its body read), not the message's on the worker (``elapsed_ms``,
which holds the wait for ``--max-rate`` or ``--max-per-host`` and the bookkeeping).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from crawler.frontier import counters
from crawler.outcomes import FAILED, RETRYING, fetched
from crawler.records import Record
from crawler.stores.client import StoreClient

#: Upper bounds of the page-time buckets, in milliseconds; the last bucket is above them.
TIME_BOUNDS_MS = (25, 50, 100, 200, 400, 800, 1600, 3200, 6400)
#: Hosts a crawl's list holds at most (a line each): past them, hosts are not listed.
MAX_HOSTS = 20_000
#: The figures kept per host.
PAGES, ERRORS, BYTES = "pages", "errors", "bytes"
#: Pages rendered in the browser, and the requests it made for them (``--render``).
RENDERED, BROWSER_REQUESTS = "rendered", "browser_requests"


def host_of(url: str) -> str:
    """A URL's host as the figures name it: ``host:port`` as the URL spells it (the
    politeness options' unit)."""
    return urlsplit(url).netloc.lower() or "?"


def _key(crawl_id: str, host: str, name: str) -> str:
    return counters.crawl_key(crawl_id, f"h:{host}:{name}")


def hosts_key(crawl_id: str) -> str:
    return counters.crawl_key(crawl_id, "hosts")


def bucket(elapsed_ms: float) -> int:
    return next(
        (i for i, bound in enumerate(TIME_BOUNDS_MS) if elapsed_ms <= bound), len(TIME_BOUNDS_MS)
    )


def host_counts(record: Record, outcome: str) -> dict[str, int]:
    """What one message's ending adds to its host's figures, by figure: ``pages``,
    ``bytes`` and its time's bucket (``t3``) for a page fetched, ``errors`` for an
    attempt that failed."""
    if fetched({outcome: 1}):
        added = {PAGES: 1}
        if record.get("bytes"):
            added[BYTES] = int(record["bytes"])
        took = record.get("fetch_ms")
        if took is not None:
            added[f"t{bucket(float(took))}"] = 1
        if record.get("rendered"):
            added[RENDERED] = 1
            if record.get("render_requests"):
                added[BROWSER_REQUESTS] = int(record["render_requests"])
        return added
    if outcome in (RETRYING, FAILED):
        return {ERRORS: 1}
    return {}


def increments(crawl_id: str, record: Record, outcome: str) -> dict[str, int]:
    """What one message's ending adds to its host's figures, by their keys."""
    host = host_of(record["url"])
    return {_key(crawl_id, host, name): n for name, n in host_counts(record, outcome).items()}


def note_new_host(
    client: StoreClient,
    crawl_id: str,
    record: Record,
    added: Mapping[str, int],
    values: Mapping[str, int],
    ttl: int,
) -> None:
    """List the record's host when its pages or errors counter was just made (its
    value is what this ending added)."""
    host = host_of(record["url"])
    for name in (PAGES, ERRORS):
        key = _key(crawl_id, host, name)
        if key in added and values.get(key) == added[key]:
            listed = counters.crawl_key(crawl_id, "hosts-listed")
            if counters.add_to(client, listed, 1, ttl) > MAX_HOSTS:
                return
            line = f"{host}\n".encode()
            hosts = hosts_key(crawl_id)
            if not client.append(hosts, line) and not client.add(hosts, line, time=ttl):
                client.append(hosts, line)
            return


def read(
    client: StoreClient, crawl_id: str, limit: int = 2000, *, with_times: bool = False
) -> list[dict[str, Any]]:
    """Each listed host's figures (the first ``limit`` hosts): pages, errors, bytes,
    and the median and 95th percentile page time in ms (a bucket's bound; None above
    the last, or with no page); ``with_times``, the histogram too (``times``)."""
    listed = client.get(hosts_key(crawl_id)) or b""
    hosts = list(dict.fromkeys(line for line in listed.decode().split("\n") if line))[:limit]
    names = [
        PAGES, ERRORS, BYTES, RENDERED, BROWSER_REQUESTS,
        *(f"t{i}" for i in range(len(TIME_BOUNDS_MS) + 1)),
    ]  # fmt: skip
    found = client.get_multi([_key(crawl_id, host, name) for host in hosts for name in names])
    figures = []
    for host in hosts:
        value = {name: int(found.get(_key(crawl_id, host, name)) or 0) for name in names}
        histogram = [value[f"t{i}"] for i in range(len(TIME_BOUNDS_MS) + 1)]
        figures.append(
            {
                "host": host,
                "pages": value[PAGES],
                "errors": value[ERRORS],
                "bytes": value[BYTES],
                "rendered": value[RENDERED],
                "browser_requests": value[BROWSER_REQUESTS],
                "median_ms": percentile(histogram, 0.5),
                "p95_ms": percentile(histogram, 0.95),
                **({"times": histogram} if with_times else {}),
            }
        )
    return figures


def percentile(histogram: list[int], share: float) -> int | None:
    """The bound of the bucket holding the ``share`` quantile of the pages' times."""
    total = sum(histogram)
    if not total:
        return None
    seen = 0
    for i, count in enumerate(histogram):
        seen += count
        if seen >= share * total:
            return TIME_BOUNDS_MS[i] if i < len(TIME_BOUNDS_MS) else None
    return None


#: Failures a crawl keeps for the dashboard: the latest ones, in a ring of slots.
FAILURES_KEPT = 20
#: The key listing recent crawls, one id a line (all crawls of the store).
RECENT = "crawler:recent-crawls"
#: Crawls :func:`recent` lists at most.
RECENT_LISTED = 50


def note_failure(client: StoreClient, crawl_id: str, record: Record, number: int, ttl: int) -> None:
    """Keep the ``number``-th failure of the crawl among its latest."""
    slot = counters.crawl_key(crawl_id, f"failure:{number % FAILURES_KEPT}")
    error = str(record.get("error") or "")
    kept = {"url": record["url"], "error": error, "number": number, "at": time.time()}
    client.set(slot, json.dumps(kept).encode(), time=ttl)


def failures(client: StoreClient, crawl_id: str) -> list[dict[str, Any]]:
    """The crawl's latest failures, the latest first."""
    slots = [counters.crawl_key(crawl_id, f"failure:{i}") for i in range(FAILURES_KEPT)]
    kept = [json.loads(value) for value in client.get_multi(slots).values()]
    return sorted(kept, key=lambda failure: -failure["number"])


def describe(client: StoreClient, crawl_id: str, about: Mapping[str, Any], ttl: int) -> None:
    """List a crawl among the recent ones, with what it is (``about``: its seeds,
    options, where it runs) and when it started."""
    client.set(
        counters.crawl_key(crawl_id, "about"),
        json.dumps({**about, "crawl_id": crawl_id, "started": time.time()}).encode(),
        time=ttl,
    )
    line = f"{crawl_id}\n".encode()
    if not client.append(RECENT, line) and not client.add(RECENT, line, time=ttl):
        client.append(RECENT, line)


def about(client: StoreClient, crawl_id: str) -> dict[str, Any] | None:
    value = client.get(counters.crawl_key(crawl_id, "about"))
    return None if value is None else dict(json.loads(value))


def recent(client: StoreClient) -> list[str]:
    """The ids of the crawls described lately, the latest first."""
    listed = (client.get(RECENT) or b"").decode().split("\n")
    return list(dict.fromkeys(reversed([line for line in listed if line])))[:RECENT_LISTED]
