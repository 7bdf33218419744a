"""What a crawl keeps in Memcached, and what a Memcached too small for it does.

    python benchmarks/memory.py bytes --pages 5000 [--store redis]
    python benchmarks/memory.py evict --pages 40000 --memory 2

``bytes``: crawls a generated site (``--pages`` x 10 links, served on 127.0.0.1) with
``dramatiq crawler.example -p 2 -t 8`` on each broker and a Memcached of its own
(``-m 1024``: nothing is evicted), then reads Memcached's ``bytes`` (the size of every
item it holds, its own per-item header included) and ``curr_items``, and prints them
per crawled URL.  ``--store redis`` keeps the crawl's keys in a Redis of its own
(``DEDUP_URL``) instead, and reads its ``used_memory`` (before and after) and ``dbsize``.

``evict``: the same crawl with the workers on RabbitMQ against a Memcached started with
``-m --memory``; the seeder waits up to ``--limit`` seconds.  It prints when (and
whether) the crawl ended, the page requests the site served per distinct page, the most
requests any one page got, and Memcached's evictions.

Each prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from benchmarks.measuring.accounting import memcached_stats, redis_stats  # noqa: E402
from benchmarks.measuring.seeding import WaitingSeeder, generated_site  # noqa: E402
from benchmarks.measuring.workers import own_services  # noqa: E402
from tests.site_server import page_path  # noqa: E402
from tests.support import (  # noqa: E402
    FAST_FAILURES,
    MemcachedProcess,
    RedisProcess,
    clean_broker,
)
from tests.workers import WorkerProcesses, environment  # noqa: E402


def crawl(
    broker: str, pages: int, memory_mb: int, limit: float, store: str = "memcached"
) -> dict[str, Any]:
    with ExitStack() as stack:
        site = stack.enter_context(generated_site(pages))
        memcached = MemcachedProcess(memory_mb=memory_mb)
        stack.callback(memcached.stop)
        env = environment(
            **FAST_FAILURES,
            **stack.enter_context(clean_broker(broker)),
            MEMCACHED_SERVERS=memcached.servers,
        )
        redis_store = None
        if store == "redis":
            redis_store = RedisProcess(Path(tempfile.mkdtemp()))
            stack.callback(redis_store.shut_down)
            env["DEDUP_URL"] = redis_store.url
            empty = redis_stats(redis_store.url)["bytes"]
        workers = WorkerProcesses(env, processes=2, threads=8)
        stack.callback(workers.stop)
        seeder = WaitingSeeder(env, site.url(page_path(0)))
        seconds = seeder.finish(limit)
        ended: float | str = f"not after {limit:.0f} s" if seconds is None else seconds
        if redis_store is None:
            stats = memcached_stats(memcached.servers)
        else:
            stats = redis_stats(redis_store.url) | {"evictions": 0}
            stats["bytes"] -= empty
        counts = site.fetch_counts()
        return {
            "broker": broker,
            "store": store,
            "pages": pages,
            "memcached_mb": memory_mb,
            "ended_after_s": ended,
            "wait_exit": seeder.returncode,
            "distinct_pages": len(counts),
            "requests_per_page": round(sum(counts.values()) / max(len(counts), 1), 2),
            "most_requests": max(counts.values(), default=0),
            "memcached_items": stats["curr_items"],
            "memcached_bytes": stats["bytes"],
            "bytes_per_url": round(stats["bytes"] / max(len(counts), 1), 1),
            "items_per_url": round(stats["curr_items"] / max(len(counts), 1), 2),
            "evictions": stats["evictions"],
            "seeder_last_line": seeder.last_line(),
        }


def main() -> None:
    own_services()  # a RabbitMQ vhost and a Redis of its own: the user's are never purged
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measure", choices=["bytes", "evict"])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--memory", type=int, default=2, help="evict: Memcached's -m, MiB")
    parser.add_argument("--limit", type=float, default=300, help="seconds the seeder waits")
    parser.add_argument("--store", choices=["memcached", "redis"], default="memcached")
    arguments = parser.parse_args()
    if arguments.measure == "bytes":
        for broker in ("rabbitmq", "redis"):
            result = crawl(broker, arguments.pages, 1024, arguments.limit, arguments.store)
            print(json.dumps(result), flush=True)
    else:
        result = crawl("rabbitmq", arguments.pages, arguments.memory, arguments.limit)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
