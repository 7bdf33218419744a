"""Does the crawler slow down as its crawl grows?  A big generated site, crawled to the end.

    python benchmarks/scale.py                      # 200,000 pages, 2 brokers x 2 stores
    python benchmarks/scale.py --pages 2000 --broker redis --store memcached

Writes a site of ``--pages`` small pages (10 absolute links each, page i linking to i+1,
so every page is reached) and serves it on 127.0.0.1 (nginx when installed, else
Python's server).  For each broker (RabbitMQ, Redis) and dedup store (Memcached, or
Redis with ``DEDUP_URL``) it starts a store of its own (Memcached ``-m 2048``; Redis
with an append-only file, ``appendfsync everysec`` as the README advises), purges the
broker, starts ``dramatiq crawler.example -p 2 -t 8`` and seeds the crawl with
``--wait``.  Once a second it reads the crawl's counters from the store and the broker's
queue depth.  It reports:

- pages/s around 10%, 50% and 90% of the crawl (the pages ended between 5% and 15% of
  the site, over the seconds they took; and so on): a crawl that slows down as its
  frontier and its store fill shows falling figures;
- the whole crawl's pages/s, and how many pages the site served, and served twice
  (from its access log);
- peak resident memory of the largest worker process and of the seeder;
- the deepest the broker's queue got (messages waiting or delayed);
- the store's memory in use at the end, minus what it used empty, per crawled URL.

Prints one JSON line per run as it ends, then a Markdown table of them all.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from crawler.stores.memcached import client_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measuring.accounting import (  # noqa: E402
    children,
    memcached_stats,
    peak_rss_mib,
    redis_stats,
)
from benchmarks.measuring.generated_site import serve, served, write_site  # noqa: E402
from benchmarks.measuring.seeding import WaitingSeeder  # noqa: E402
from benchmarks.measuring.workers import own_services, start_workers  # noqa: E402
from crawler.frontier import counters  # noqa: E402
from crawler.outcomes import ENDINGS  # noqa: E402
from crawler.stores.redis import RedisStorePool  # noqa: E402
from tests.support import MemcachedProcess, RedisProcess, clean_broker, free_port  # noqa: E402
from tests.workers import environment, queued_messages  # noqa: E402

#: Where along the crawl pages/s is reported, and the window around each point.
POINTS, WINDOW = (0.1, 0.5, 0.9), 0.05


def rate_at(samples: list[tuple[float, int]], pages: int, point: float) -> float | None:
    """Pages ended per second while the crawl went from ``point - WINDOW`` to
    ``point + WINDOW`` of ``pages``; None when the samples do not span it."""
    low, high = (point - WINDOW) * pages, (point + WINDOW) * pages
    start = next(((t, n) for t, n in samples if n >= low), None)
    end = next(((t, n) for t, n in samples if n >= high), None)
    if start is None or end is None or end[0] <= start[0]:
        return None
    return round((end[1] - start[1]) / (end[0] - start[0]), 1)


class Sampler(threading.Thread):
    """Once a second: the crawl's ended pages (from its counters) and the queue depth."""

    def __init__(self, env: dict[str, str], store: Any, crawl_id: str) -> None:
        super().__init__(daemon=True)
        self.env, self.store, self.crawl_id = env, store, crawl_id
        self.samples: list[tuple[float, int]] = []
        self.deepest_queue = 0
        self.done = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(1.0):
            figures = counters.read(self.store, self.crawl_id) or {}
            ended = sum(figures.get(name, 0) for name in ENDINGS)
            self.samples.append((time.monotonic() - started, ended))
            self.deepest_queue = max(self.deepest_queue, queued_messages(self.env))


def store_bytes(store: str, address: str) -> int:
    stats = memcached_stats(address) if store == "memcached" else redis_stats(address)
    return stats["bytes"]


def crawl(
    broker: str, store: str, site_url: str, pages: int, limit: float, access_log: Path
) -> dict[str, Any]:
    access_log.write_text("")  # the server appends: this run's requests only
    with ExitStack() as stack:
        memcached = MemcachedProcess(memory_mb=2048)
        stack.callback(memcached.stop)
        env = environment(
            **stack.enter_context(clean_broker(broker)), MEMCACHED_SERVERS=memcached.servers
        )
        if store == "redis":
            server = RedisProcess(Path(tempfile.mkdtemp()), appendfsync="everysec")
            stack.callback(server.shut_down)
            env["DEDUP_URL"] = address = server.url
            client: Any = RedisStorePool(server.url).client
        else:
            address = memcached.servers
            client = client_of([address])
        empty = store_bytes(store, address)
        workers = start_workers(env, "crawler.example", processes=2, threads=8)
        stack.callback(workers.wait)
        stack.callback(workers.terminate)
        worker_pids = children(workers.pid)
        seeder = WaitingSeeder(env, site_url)
        stack.callback(seeder.kill)
        crawl_id = seeder.crawl_id()
        sampler = Sampler(env, client, crawl_id)
        sampler.start()
        seeder_rss = 0.0
        try:
            while seeder.running() and time.monotonic() - seeder.started < limit:
                seeder_rss = max(seeder_rss, peak_rss_mib(seeder.pid))
                time.sleep(1.0)
            seconds = seeder.finish(0)
            ended_after: float | str = f"not after {limit:.0f} s" if seconds is None else seconds
        finally:
            sampler.done.set()
            sampler.join()
        worker_rss = max(peak_rss_mib(pid) for pid in worker_pids)
        used = store_bytes(store, address) - empty
        figures = counters.read(client, crawl_id) or {}
        fetched = figures.get("crawled", 0)
        served_paths = served(access_log)
        elapsed = ended_after if isinstance(ended_after, float) else limit
        result: dict[str, Any] = {"broker": broker, "store": store, "pages": pages}
        result |= {
            f"pages_per_s_at_{round(p * 100)}%": rate_at(sampler.samples, pages, p) for p in POINTS
        }
        result |= {
            "pages_per_s_all": round(fetched / elapsed, 1),
            "ended_after_s": ended_after,
            "wait_exit": seeder.returncode,
            "pages_fetched": fetched,
            "pages_served": len(served_paths),
            "pages_served_twice": sum(n > 1 for n in served_paths.values()),
            "peak_worker_rss_mib": round(worker_rss, 1),
            "peak_seeder_rss_mib": round(seeder_rss, 1),
            "deepest_queue": sampler.deepest_queue,
            "store_mib": round(used / 2**20, 1),
            "store_bytes_per_url": round(used / max(fetched, 1), 1),
            "seeder_summary": (seeder.stdout.strip().splitlines() or [""])[-1][:160],
            "seeder_errors": seeder.stderr.strip()[-300:],
        }
        return result


def table(results: list[dict[str, Any]]) -> str:
    columns = [
        ("broker", "broker"), ("store", "store"),
        ("pages_per_s_at_10%", "p/s at 10%"), ("pages_per_s_at_50%", "at 50%"),
        ("pages_per_s_at_90%", "at 90%"), ("pages_per_s_all", "all"),
        ("ended_after_s", "time s"), ("pages_served", "pages served"),
        ("pages_served_twice", "served twice"), ("peak_worker_rss_mib", "worker RSS MiB"),
        ("deepest_queue", "deepest queue"), ("store_mib", "store MiB"),
        ("store_bytes_per_url", "store B/URL"),
    ]  # fmt: skip
    lines = ["| " + " | ".join(title for _, title in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    for result in results:
        lines.append("| " + " | ".join(str(result[key]) for key, _ in columns) + " |")
    return "\n".join(lines)


def main() -> int:
    own_services()  # a RabbitMQ vhost and a Redis of its own: the user's are never purged
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200_000)
    parser.add_argument(
        "--broker", nargs="+", choices=["rabbitmq", "redis"], default=["rabbitmq", "redis"]
    )
    parser.add_argument(
        "--store", nargs="+", choices=["memcached", "redis"], default=["memcached", "redis"]
    )
    parser.add_argument("--limit", type=float, default=3600, help="seconds a crawl may take")
    arguments = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as directory:
        Path(directory).chmod(0o755)  # nginx workers read the site as an unprivileged user
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        site = Path(directory) / "site"
        site.mkdir()
        write_site(site, base, arguments.pages, links=10)
        access_log = Path(directory) / "access.log"
        with serve(site, port, access_log) as server:
            print(f"site: {arguments.pages} pages x 10 links, served by {server}", flush=True)
            for broker in arguments.broker:
                for store in arguments.store:
                    result = crawl(
                        broker,
                        store,
                        f"{base}/page/0.html",
                        arguments.pages,
                        arguments.limit,
                        access_log,
                    )
                    results.append(result)
                    print(json.dumps(result), flush=True)
    print(table(results))
    complete = all(
        result["wait_exit"] == 0 and result["pages_served"] == arguments.pages for result in results
    )
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
