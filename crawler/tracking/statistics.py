"""A crawl's statistics as one JSON document, as Scrapy's stats dump and Crawlee's final
statistics are: pages by outcome (and by HTTP status, where the records were seen),
bytes, retries, deferrals, items kept and dropped, the busiest hosts, and fetch-time
percentiles.

Two sources give the same document: the records a crawl here or ``--wait`` counted
(:class:`Tally`, ``--stats FILE``), and a workers' crawl's figures in the store
(:func:`read`, ``crawler status --json``: the figures the dashboard shows, without the
status codes, which the store does not keep).  Times are the fetch's alone
(``fetch_ms``), their percentiles a bucket's bound (:data:`figures.TIME_BOUNDS_MS`), as
the dashboard reads them; None past the last bound.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crawler.frontier import counters
from crawler.items import counting as item_counts
from crawler.outcomes import DEFERRED, ENDINGS, RETRYING, fetched
from crawler.records import Record
from crawler.stores.client import StoreClient
from crawler.tracking import figures

#: The hosts a document lists, the busiest (most pages) first.
BUSIEST = 20
#: Hosts a :class:`Tally` counts at most (as the store lists them: :data:`figures.MAX_HOSTS`).
MAX_HOSTS = figures.MAX_HOSTS
#: The version of the document's shape.
VERSION = 1


def _empty_times() -> list[int]:
    return [0] * (len(figures.TIME_BOUNDS_MS) + 1)


class Tally:
    """What the records of a crawl add up to, beyond the counts by outcome that
    :class:`~crawler.tracking.progress.Progress` keeps: by HTTP status, bytes, fetch
    times, and per host.  Not locked: its caller holds its own lock."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        #: The crawl's figures, and each host's (:data:`MAX_HOSTS` hosts at most), by
        #: name as the store keeps them (:func:`figures.host_counts`).
        self.whole: Counter[str] = Counter()
        self.hosts: dict[str, Counter[str]] = {}

    def add(self, record: Record, outcome: str) -> None:
        """Count ``record``, which ended its attempt with ``outcome``."""
        status = record.get("status")
        if status:
            self.statuses[int(status)] += 1
        added = figures.host_counts(record, outcome)
        if not added:
            return
        self.whole.update(added)
        name = figures.host_of(record["url"])
        host = self.hosts.get(name)
        if host is None and len(self.hosts) < MAX_HOSTS:
            host = self.hosts[name] = Counter()
        if host is not None:
            host.update(added)


def document(
    crawl_id: str | None,
    counts: Mapping[str, int],
    *,
    discovered: int,
    items: int,
    dropped: int,
    tally: Tally | None,
    hosts: list[dict[str, Any]],
    times: list[int],
    elapsed_s: float | None,
) -> dict[str, Any]:
    """The statistics document: ``counts`` by outcome, ``hosts`` as
    :func:`figures.read` gives them (``times`` each), ``times`` the crawl's histogram."""
    busiest = sorted(hosts, key=lambda host: (-host["pages"], host["host"]))[:BUSIEST]
    return {
        "version": VERSION,
        "crawl_id": crawl_id,
        "elapsed_s": None if elapsed_s is None else round(elapsed_s, 3),
        "pages": fetched(counts),
        "discovered": discovered,
        "outcomes": {name: int(counts.get(name, 0)) for name in ENDINGS},
        "retried": int(counts.get(RETRYING, 0)),
        "deferred": int(counts.get(DEFERRED, 0)),
        "status_codes": None
        if tally is None
        else {str(code): n for code, n in sorted(tally.statuses.items())},
        "bytes": sum(host["bytes"] for host in hosts) if tally is None else tally.whole["bytes"],
        **{
            name: sum(host[name] for host in hosts) if tally is None else tally.whole[name]
            for name in (figures.RENDERED, figures.BROWSER_REQUESTS)
        },
        "items": items,
        "items_dropped": dropped,
        "fetch_ms": _percentiles(times),
        "hosts": len(hosts),
        "busiest_hosts": [
            {
                "host": host["host"],
                "pages": host["pages"],
                "errors": host["errors"],
                "bytes": host["bytes"],
                **{f"{k}_ms": v for k, v in _percentiles(host["times"]).items()},
            }
            for host in busiest
        ],
    }


def _percentiles(times: list[int]) -> dict[str, int | None]:
    return {
        "median": figures.percentile(times, 0.5),
        "p90": figures.percentile(times, 0.9),
        "p95": figures.percentile(times, 0.95),
        "p99": figures.percentile(times, 0.99),
    }


def of_tally(
    crawl_id: str | None,
    counts: Mapping[str, int],
    tally: Tally,
    *,
    discovered: int,
    items: int,
    dropped: int,
    elapsed_s: float,
) -> dict[str, Any]:
    """The document of the records counted here (``--stats``)."""
    hosts = [_host(name, host) for name, host in tally.hosts.items()]
    return document(
        crawl_id, counts, discovered=discovered, items=items, dropped=dropped, tally=tally,
        hosts=hosts, times=_times(tally.whole), elapsed_s=elapsed_s,
    )  # fmt: skip


#: The figures a host's counts in a :class:`Tally` are read as.
HOST_FIGURES = (
    figures.PAGES, figures.ERRORS, figures.BYTES, figures.RENDERED, figures.BROWSER_REQUESTS,
)  # fmt: skip


def _times(counted: Counter[str]) -> list[int]:
    """The histogram of a :class:`Tally`'s counts (``t0``, ``t1``...)."""
    return [counted[f"t{i}"] for i in range(len(figures.TIME_BOUNDS_MS) + 1)]


def _host(name: str, counted: Counter[str]) -> dict[str, Any]:
    """A host's figures from a :class:`Tally`, as :func:`figures.read` gives them."""
    return {
        "host": name,
        **{figure: counted[figure] for figure in HOST_FIGURES},
        "times": _times(counted),
    }


def write(path: Path, document: dict[str, Any]) -> None:
    """``--stats FILE``: the document, written whole (a file replaced at once; ``-``:
    standard output); OSError when it cannot be."""
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def read(client: StoreClient, crawl_id: str) -> dict[str, Any] | None:
    """The document of a crawl's figures in the store (``crawler status --json``); None
    for a crawl the store does not know."""
    counted = counters.read(client, crawl_id)
    if counted is None:
        return None
    hosts = figures.read(client, crawl_id, limit=MAX_HOSTS, with_times=True)
    times = _empty_times()
    for host in hosts:
        times = [a + b for a, b in zip(times, host["times"], strict=True)]
    items, dropped = item_counts.read(client, crawl_id), item_counts.read_dropped(client, crawl_id)
    return document(
        crawl_id, counted, discovered=counted[counters.DISCOVERED], items=items,
        dropped=dropped, tally=None, hosts=hosts, times=times, elapsed_s=None,
    )  # fmt: skip
