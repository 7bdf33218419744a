"""The claim path at scale, without HTTP: does claiming a new URL cost more as a crawl grows?

    python benchmarks/claim_path.py --checkpoints 100000 1000000 10000000
    python benchmarks/claim_path.py --checkpoints 2000 5000 --window 500   # the smoke run

Drives what a worker does with the dedup store for each page, on a store of the
benchmark's own (a Memcached with ``-m 8192``, and a Redis with no persistence, as
``DEDUP_URL`` would use), one thread, synthetic URLs: the page's claim read
(:func:`crawler.frontier.claims.claim`), its ten links claimed and sent
(:func:`~crawler.frontier.claims.send_claimed`: one new URL, nine seen before, the
journal read and written), and its ending (:func:`~crawler.frontier.claims.finish` and
the counters).  Messages go to a broker that drops them: the store's cost alone.

The crawl is filled up to each checkpoint (``--checkpoints``, in URLs claimed) through
the same functions in big batches, then ``--window`` pages are measured: claims per
second (new URLs claimed a second by one thread), and the bytes the store received and
sent per new URL (Memcached's ``bytes_read`` and ``bytes_written``; Redis's
``total_net_input_bytes`` and ``total_net_output_bytes``).  A flat design shows the
same figures at every checkpoint.  Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import redis

from crawler.environment import Lifetimes
from crawler.frontier import claims, counters, journal
from crawler.frontier.digests import owner_token, url_digest
from crawler.stores.memcached import client_of
from crawler.stores.redis import RedisStorePool
from tests.support import MemcachedProcess, RedisClusterProcesses, RedisProcess

LIFETIMES = Lifetimes(claim=7 * 86400, grace=7 * 86400)
CRAWL = "claim-path"
#: Links a page has, of which one is new.
LINKS = 10
#: URLs claimed at once while filling a crawl up to a checkpoint.
FILL_BATCH = 100_000


class DroppingBroker:
    """Takes a page's messages and drops them: only the store is measured."""

    def enqueue_all(self, messages: list[Any], delays: Any = None) -> None:
        pass


ACTOR: Any = SimpleNamespace(queue_name="crawler", actor_name="crawl", broker=DroppingBroker())


def url(index: int) -> str:
    return f"http://site-{index % 997}.test/page/{index}.html"


@contextmanager
def memcached_store() -> Iterator[tuple[Any, Callable[[], tuple[int, int]]]]:
    server = MemcachedProcess(memory_mb=8192)
    client = client_of([server.servers])

    def traffic() -> tuple[int, int]:
        ((_, stats),) = client.get_stats()
        return int(stats["bytes_read"]), int(stats["bytes_written"])

    try:
        yield client, traffic
    finally:
        client.disconnect_all()
        server.stop()


@contextmanager
def redis_cluster_store() -> Iterator[tuple[Any, Callable[[], tuple[int, int]]]]:
    """A Redis Cluster of three primaries, as ``DEDUP_URL=redis+cluster://`` uses."""
    with tempfile.TemporaryDirectory() as directory:
        cluster = RedisClusterProcesses(Path(directory))
        client = RedisStorePool(cluster.url).client
        nodes = cluster.nodes()

        def traffic() -> tuple[int, int]:
            stats = [node.info("stats") for node in nodes]
            return (
                sum(int(s["total_net_input_bytes"]) for s in stats),
                sum(int(s["total_net_output_bytes"]) for s in stats),
            )

        try:
            yield client, traffic
        finally:
            for node in nodes:
                node.close()
            cluster.shut_down()


@contextmanager
def redis_store() -> Iterator[tuple[Any, Callable[[], tuple[int, int]]]]:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisProcess(Path(directory), appendfsync="no")
        client = RedisStorePool(server.url).client
        info = redis.Redis.from_url(server.url)

        def traffic() -> tuple[int, int]:
            stats = info.info("stats")
            return int(stats["total_net_input_bytes"]), int(stats["total_net_output_bytes"])

        try:
            yield client, traffic
        finally:
            info.close()
            server.shut_down()


STORES = {"memcached": memcached_store, "redis": redis_store, "redis-cluster": redis_cluster_store}


def page(client: Any, index: int, new: int, rng: random.Random) -> None:
    """Page ``index`` (its URL claimed before) ends, after sending its links: URL
    ``new`` and nine drawn from those claimed before it."""
    message_id = f"page-{index}"
    claims.claim(client, url(index), message_id, CRAWL, LIFETIMES)
    links = [url(new)] + [url(rng.randrange(new)) for _ in range(LINKS - 1)]
    claims.send_claimed(client, ACTOR, message_id, links, {}, CRAWL, LIFETIMES)
    first = claims.finish(client, url(index), message_id, CRAWL, LIFETIMES) == claims.FIRST
    counters.ended(client, CRAWL, message_id, "crawled", LIFETIMES, first)


def fill(client: Any, start: int, stop: int) -> None:
    """Claim URLs ``start`` to ``stop``: the claims, journal entries and count that
    :func:`~crawler.frontier.claims.send_claimed` writes for new links, written in
    big batches without its lookups (which are what is measured)."""
    for first in range(start, stop, FILL_BATCH):
        digests = {
            url_digest(url(i), CRAWL): i for i in range(first, min(first + FILL_BATCH, stop))
        }
        owners = {digest: owner_token(f"filler-{i}") for digest, i in digests.items()}
        client.add_multi(
            {claims.url_hash(url(i), CRAWL): owners[digest] for digest, i in digests.items()},
            time=LIFETIMES.claim,
        )
        now = journal.read_layout(client, CRAWL)
        claims.journal_and_count(client, CRAWL, now, owners, LIFETIMES.grace)


def measure(store: str, checkpoints: list[int], window: int) -> list[dict[str, float | int | str]]:
    figures: list[dict[str, float | int | str]] = []
    rng = random.Random(1)
    with STORES[store]() as (client, traffic):
        counters.start(client, CRAWL, 1, LIFETIMES.grace)
        claimed = 0
        for checkpoint in checkpoints:
            started = time.monotonic()
            fill(client, claimed, checkpoint)
            filled_in = time.monotonic() - started
            claimed = checkpoint
            received, sent = traffic()
            started = time.monotonic()
            for offset in range(window):
                page(client, claimed - window + offset, claimed + offset, rng)
            seconds = time.monotonic() - started
            received_after, sent_after = traffic()
            claimed += window
            figures.append(
                {
                    "store": store,
                    "urls": checkpoint,
                    "claims_per_s": round(window / seconds),
                    "bytes_to_store_per_new_url": round((received_after - received) / window),
                    "bytes_from_store_per_new_url": round((sent_after - sent) / window),
                    "fill_seconds": round(filled_in, 1),
                }
            )
            print(json.dumps(figures[-1]), flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--checkpoints", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000]
    )
    parser.add_argument("--window", type=int, default=5000, help="pages measured a checkpoint")
    parser.add_argument(
        "--stores",
        default="memcached,redis,redis-cluster",
        help="comma-separated: memcached, redis, redis-cluster",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    arguments = parser.parse_args()
    checkpoints = sorted(set(arguments.checkpoints))
    if checkpoints[0] < arguments.window:
        parser.error("each checkpoint must be at least --window URLs")
    figures = []
    for store in arguments.stores.split(","):
        figures += measure(store.strip(), checkpoints, arguments.window)
    if arguments.json:
        arguments.json.write_text(json.dumps(figures, indent=2))
    print(f"{'store':<10} {'URLs':>10} {'claims/s':>9} {'B to store':>10} {'B from store':>12}")
    for row in figures:
        print(
            f"{row['store']:<10} {row['urls']:>10} {row['claims_per_s']:>9} "
            f"{row['bytes_to_store_per_new_url']:>10} {row['bytes_from_store_per_new_url']:>12}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
