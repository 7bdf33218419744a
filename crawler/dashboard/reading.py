"""What the dashboard reads of a crawl, read-only: its counters and marks, what it is,
its hosts and latest failures (:mod:`crawler.tracking.figures`), the broker's queue
and workers, and the rates over time that it samples itself.

A crawl's elapsed time stops at its end: the end this process saw (``--local``'s, told
by :meth:`Reader.ended`), else the first time the reader found finished a crawl it had
seen running; a crawl that ended before the reader first read it has no elapsed time
(its end is not stored)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, cast

import dramatiq
import pika
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.stub import StubBroker

from crawler.brokers import QUEUE, broker_errors
from crawler.environment import uses_redis
from crawler.frontier import counters, politeness
from crawler.items import counting as item_counts
from crawler.outcomes import (
    ANSWERED,
    CANCELLED,
    CRAWLED,
    DISALLOWED,
    DUPLICATE,
    DUPLICATE_CONTENT,
    FAILED,
    NOT_HTML,
    OVER_BUDGET,
    RETRYING,
    SITEMAP,
    UNCHANGED,
    fetched,
)
from crawler.stores import StorePool, store_errors
from crawler.stores.client import StoreClient
from crawler.tracking import figures

#: The outcomes the dashboard shows, in its bar's order.
OUTCOMES = (
    CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED, SITEMAP, DUPLICATE, DISALLOWED,
    OVER_BUDGET, CANCELLED, ANSWERED, FAILED,
)  # fmt: skip
#: Samples of a crawl kept for its chart (one a second at most: some 30 minutes).
SAMPLES = 1800
#: Seconds the frontier must not have grown for a time left to be estimated.
STEADY = 30.0
#: What the page of a crawl that ended says when it stays served (``--local --dashboard``).
STAYS = "crawl finished; this page stays until you stop the command"


@dataclass
class Series:
    """A crawl's samples: time, pages fetched, errors (failed attempts), discovered."""

    samples: deque[tuple[float, int, int, int]] = field(
        default_factory=lambda: deque(maxlen=SAMPLES)
    )

    def add(self, now: float, pages: int, errors: int, discovered: int) -> None:
        if not self.samples or now - self.samples[-1][0] >= 0.5:
            self.samples.append((now, pages, errors, discovered))

    def rates(self) -> dict[str, list[float]]:
        """Pages and errors per second between samples, for the chart (seconds since
        the first sample on the x axis)."""
        points = list(self.samples)
        chart: dict[str, list[float]] = {"t": [], "pages_per_s": [], "errors_per_s": []}
        for (t0, p0, e0, _), (t1, p1, e1, _) in itertools.pairwise(points):
            span = max(t1 - t0, 1e-6)
            chart["t"].append(round(t1 - points[0][0], 2))
            chart["pages_per_s"].append(round((p1 - p0) / span, 2))
            chart["errors_per_s"].append(round((e1 - e0) / span, 2))
        return chart

    def time_left(self, outstanding: int) -> str:
        """An estimate of the time left, or why there is none."""
        if outstanding <= 0:
            return "finished"
        now = self.samples[-1][0] if self.samples else time.time()
        window = [s for s in self.samples if s[0] >= now - STEADY]
        if len(window) < 2 or window[-1][0] - window[0][0] < STEADY / 2:
            return "unknown (measuring)"
        if window[-1][3] > window[0][3]:
            return "unknown (the frontier still grows)"
        done = window[-1][1] - window[0][1]
        if done <= 0:
            return "unknown (nothing ended lately)"
        seconds = outstanding * (window[-1][0] - window[0][0]) / done
        return f"about {_duration(seconds)}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Reader:
    """Reads crawls for the dashboard, and keeps each one's samples.

    Parameters:
      pool(StorePool): The dedup store where the crawls' figures are.
      actor(dramatiq.Actor): The ``crawl`` actor, whose broker has the queue and the
        workers (RabbitMQ's read through a connection of the reader's own; ``--local``'s
        in-process one once the crawl runs).
    """

    def __init__(self, pool: StorePool, actor: dramatiq.Actor[Any, Any]) -> None:
        self.pool = pool
        self.actor = actor
        self._series: dict[str, Series] = {}
        self._lock = threading.Lock()
        self._connection: Any = None
        self._seen_running: set[str] = set()
        #: When each crawl ended, as this process saw it (``time.time()``).
        self._ended: dict[str, float] = {}
        #: The crawls whose page stays served after their end, until the command stops.
        self._staying: set[str] = set()

    def ended(self, crawl_id: str, *, stays: bool = False) -> None:
        """The crawl ``crawl_id`` ended now, in this process (``--local``); with
        ``stays``, its page stays served until the command is stopped, and says so."""
        with self._lock:
            self._ended.setdefault(crawl_id, time.time())
            if stays:
                self._staying.add(crawl_id)

    def crawls(self) -> list[dict[str, Any]]:
        """The recent crawls, the latest first, each with its main figures."""
        with self.pool.reserve() as client:
            ids = figures.recent(client)
            listed = []
            for crawl_id in ids:
                about = figures.about(client, crawl_id) or {"crawl_id": crawl_id}
                counted = counters.read(client, crawl_id) or {}
                listed.append({**about, "figures": _summary(counted)})
        return listed

    def crawl(self, crawl_id: str) -> dict[str, Any] | None:
        """Everything the crawl's page shows; None for a crawl the store does not know."""
        with self.pool.reserve() as client:
            counted = counters.read(client, crawl_id)
            if counted is None:
                return None
            about = figures.about(client, crawl_id) or {"crawl_id": crawl_id}
            hosts = figures.read(client, crawl_id)
            failed = figures.failures(client, crawl_id)
            items = item_counts.read(client, crawl_id)
            dropped = item_counts.read_dropped(client, crawl_id)
            slots = _slots(client, crawl_id, about, hosts)
        now = time.time()
        pages = fetched(counted)
        errors = counted[RETRYING] + counted[FAILED]
        with self._lock:
            series = self._series.setdefault(crawl_id, Series())
            series.add(now, pages, errors, counted[counters.DISCOVERED])
            chart = series.rates()
            left = series.time_left(counted[counters.OUTSTANDING])
            end = self._end(crawl_id, counted[counters.OUTSTANDING] <= 0, now)
            staying = crawl_id in self._staying
        for host in hosts:
            host["slots_in_use"] = slots.get(host["host"])
        options = about.get("options") or {}
        local = about.get("where") == "local"  # no broker to replay its failures from
        started = about.get("started")
        elapsed = None if started is None or end is None else round(end - started, 1)
        return {
            "crawl_id": crawl_id,
            "about": about,
            "state": counters.state(counted),
            "done": sum(counted[name] for name in OUTCOMES),
            "discovered": counted[counters.DISCOVERED],
            "outstanding": counted[counters.OUTSTANDING],
            "pages": pages,
            "items": items,
            "items_dropped": dropped,
            "errors": errors,
            "retried": counted[RETRYING],
            "elapsed_s": elapsed,
            "time_left": left,
            "outcomes": {name: counted[name] for name in OUTCOMES},
            "hosts": hosts,
            "limits": {
                "max_rate": options.get("max_rate"),
                "max_per_host": options.get("max_per_host"),
                "render": bool(options.get("render")),
            },
            "failures": failed,
            "dead_letters": counted[FAILED],
            "replay": None if local else f"crawler replay {crawl_id}",
            "note": STAYS if staying else None,
            "queue": self.queue(),
            "chart": chart,
        }

    def _end(self, crawl_id: str, finished: bool, now: float) -> float | None:
        """Until when the crawl's time counts: now while it runs; its end once it
        finished, when known (None when not)."""
        if not finished:
            self._seen_running.add(crawl_id)
            if crawl_id not in self._staying:  # replayed, say: running again
                self._ended.pop(crawl_id, None)
            return now
        if crawl_id in self._seen_running:
            self._ended.setdefault(crawl_id, now)  # within a poll of its end
        return self._ended.get(crawl_id)

    def queue(self) -> dict[str, Any]:
        """Messages queued (of every crawl on the queue) and live workers, where the
        broker tells it; ``None`` figures when it does not answer."""
        broker = self.actor.broker
        if isinstance(broker, StubBroker):  # --local: this process's queues and threads
            queues = broker.queues
            depth = sum(queues[name].qsize() for name in queues if name.startswith(QUEUE))
            return {"broker": "local", "queued": depth, "workers": 1}
        try:
            if uses_redis():
                return self._redis_queue()
            return self._rabbitmq_queue()
        except (*broker_errors(), *store_errors()):
            self._connection = None
            return {
                "broker": "Redis" if uses_redis() else "RabbitMQ",
                "queued": None,
                "workers": None,
            }

    def _rabbitmq_queue(self) -> dict[str, Any]:
        if self._connection is None or not self._connection.is_open:
            broker = cast(RabbitmqBroker, self.actor.broker)  # neither --local nor on Redis
            self._connection = pika.BlockingConnection(broker.parameters)
        channel = self._connection.channel()
        try:
            ready = channel.queue_declare(QUEUE, passive=True).method
            delayed = channel.queue_declare(f"{QUEUE}.DQ", passive=True).method
        finally:
            channel.close()
        return {
            "broker": "RabbitMQ",
            "queued": ready.message_count + delayed.message_count,
            "workers": ready.consumer_count,  # a consumer a worker process
        }

    def _redis_queue(self) -> dict[str, Any]:
        broker: Any = self.actor.broker
        client, namespace = broker.client, broker.namespace
        queued = sum(
            int(client.hlen(f"{namespace}:{name}.msgs")) for name in (QUEUE, f"{QUEUE}.DQ")
        )
        since = time.time() * 1000 - broker.heartbeat_timeout
        workers = int(client.zcount(f"{namespace}:__heartbeats__", since, "+inf"))
        return {"broker": "Redis", "queued": queued, "workers": workers}


def _summary(counted: dict[str, int]) -> dict[str, Any]:
    if not counted:
        return {"state": "unknown"}
    return {
        "state": counters.state(counted),
        "pages": fetched(counted),
        "discovered": counted[counters.DISCOVERED],
        "outstanding": counted[counters.OUTSTANDING],
        "failed": counted[FAILED],
    }


def _slots(
    client: StoreClient, crawl_id: str, about: dict[str, Any], hosts: list[dict[str, Any]]
) -> dict[str, int]:
    """Fetches in flight per host, for a crawl with ``--max-per-host`` (its slots taken)."""
    places = (about.get("options") or {}).get("max_per_host")
    if not places:
        return {}
    names = {
        key: host["host"]
        for host in hosts[:200]
        for key in politeness.slot_keys(crawl_id, host["host"], int(places))
    }
    taken: dict[str, int] = {}
    for key in client.get_multi(list(names)):
        taken[names[key]] = taken.get(names[key], 0) + 1
    return {host["host"]: taken.get(host["host"], 0) for host in hosts[:200]}
