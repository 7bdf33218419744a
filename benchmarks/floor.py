"""The floor under a crawled page, in two modes: the least CPU a page can cost in this
design, and (``--python``) the least any Python crawler of a site spends.

    python benchmarks/floor.py                                     # the full run
    python benchmarks/floor.py --times 200 --noop-messages 8000   # the smoke run CI does
    python benchmarks/floor.py --python                           # the PostgreSQL docs
    python benchmarks/floor.py --python --site python-docs --requests 500

**This design's floor** (the default): each part of a page measured alone, against the
no-op ceiling: how many pages/s the machine could crawl if nothing but those parts ran.

A crawled page is at least: its message consumed and one link's message sent (both
measured on the no-op ceiling's own run: the CPU its workers and broker spend per
message at full pace, and its one sending process's), one GET (client and nginx), and
six Memcached operations that keep dedup and the crawl's counters exact (claim check,
the links' get_multi, the new link's add, the "ended once" add, the outcome's incr,
the done mark; memcached's own stats count 1 get, 10 keys in one get_multi and 3
adds or sets per page on RabbitMQ, 4 on Redis, and the crawl adds an incr for the
pages that found new links).  All but the consumed message are timed single-threaded.
None has logging, records or glue code, so the sum is below what any real page costs.

**Any Python crawler's floor** (``--python``): what a bare crawl loop costs with no
dedup store, no broker, no politeness and no records, next to wget.  On a real site of
Debian's documentation packages (``--site``, installed with apt-get when missing, if it
can be), served by nginx, it measures in one run:

- ``wget -r -l inf`` from ``index.html``: the reference (C, one connection);
- a bare crawl loop in one Python process: urllib3's GET, selectolax (Lexbor) for the
  links, ada to resolve them, a set for dedup, on 1 and on 16 threads: the least a
  Python crawler of these pages can spend, and what the GIL costs its threads;
- one page fetched again and again on one thread by ``http.client``, urllib3,
  ``requests`` and the crawler's own ``fetch`` (``--requests`` times): CPU per request
  of each layer.

It prints pages/s and CPU ms per page (this process's CPU; nginx's is apart), and
writes the figures as JSON with ``--json``.  Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import ada_url
import requests
import urllib3
from selectolax.lexbor import LexborHTMLParser

from crawler.environment import limits_from_environment
from crawler.fetching import fetch, new_session
from crawler.stores.memcached import client_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    children,
    cpu_seconds,
    free_port,
    noop_ceiling,
    serve,
    service_pids,
    write_site,
)
from benchmarks.measuring.real_sites import SITES
from benchmarks.measuring.workers import own_services

CORES = len(os.sched_getaffinity(0))
NGINX = shutil.which("nginx") is not None
#: Memcached operations per crawled page, by kind (see the module docstring).
MEMCACHED_OPS = {"get": 1, "get_multi": 1, "add": 2, "incr": 1, "set": 1}


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_ms_each(action: Callable[[], object], times: int, servers: list[int]) -> dict[str, float]:
    """CPU ms per call of ``action``: this process's, and the ``servers``' it made busy."""
    servers_before = sum(cpu_seconds(pid) for pid in servers)
    before = own_cpu()
    for _ in range(times):
        action()
    client = own_cpu() - before
    server = sum(cpu_seconds(pid) for pid in servers) - servers_before
    return {"client": 1000 * client / times, "server": 1000 * server / times}


def fetch_cost(times: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)
        port = free_port()
        (tmp / "site").mkdir()
        write_site(tmp / "site", f"http://127.0.0.1:{port}", 100, 10)
        with serve(tmp / "site", port) as server:
            # Python's server, the fallback, runs in this process: its CPU is the client's.
            nginx = (
                [int(p) for p in (tmp / "nginx.pid").read_text().split()]
                if server == "nginx"
                else []
            )
            pool = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1)
            count = iter(range(10**9))

            def get() -> bytes:
                return pool.request("GET", f"/page/{next(count) % 100}.html").data

            get()
            return cpu_ms_each(get, times, nginx + [c for p in nginx for c in children(p)])


def memcached_cost(times: int) -> dict[str, float]:
    own_services()  # a Memcached of the benchmark's own: none of its keys in the user's
    client = client_of(os.environ["MEMCACHED_SERVERS"].split(","))
    servers = service_pids()["memcached"]
    keys = [uuid.uuid4().hex for _ in range(10)]
    client.set("floor-counter", 0)
    ops: dict[str, Callable[[], object]] = {
        "get": lambda: client.get(keys[0]),
        "get_multi": lambda: client.get_multi(keys),
        "add": lambda: client.add(uuid.uuid4().hex, b"x", time=60),
        "incr": lambda: client.incr("floor-counter"),
        "set": lambda: client.set(keys[1], b"done", time=60),
    }
    total = {"client": 0.0, "server": 0.0}
    for name, per_page in MEMCACHED_OPS.items():
        cost = cpu_ms_each(ops[name], times, servers)
        for side in total:
            total[side] += per_page * cost[side]
    return total


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--times", type=int, default=5000, help="GETs and Memcached calls timed")
    parser.add_argument("--noop-messages", type=int, default=20000)
    parser.add_argument(
        "--python", action="store_true", help="any Python crawler's floor on a real site"
    )
    parser.add_argument(
        "--site", choices=list(SITES), default="postgresql-docs", help="with --python"
    )
    parser.add_argument("--requests", type=int, default=2000, help="with --python: GETs per layer")
    parser.add_argument("--json", type=Path, help="with --python: write the figures here too")
    args = parser.parse_args()
    if args.python:
        return python_floor(args.site, args.requests, args.json)
    return design_floor(args.times, args.noop_messages)


def design_floor(times: int, noop_messages: int) -> int:
    """This design's floor: each part of a page, on each broker, against the no-op's."""
    fetch = fetch_cost(times)
    memcached = memcached_cost(times)
    print(f"{CORES} cores; workers as in run.py: {DEFAULT_PROCESSES} processes")
    print(f"{'broker':9} {'part':28} {'client ms':>9} {'server ms':>9}")
    for broker in ("rabbitmq", "redis"):
        with tempfile.TemporaryDirectory() as directory:
            noop = noop_ceiling(
                broker,
                noop_messages,
                Path(directory),
                processes=DEFAULT_PROCESSES,
                threads=DEFAULT_THREADS,
            )
        ceiling = noop["messages_per_s"]
        parts = {
            "message consumed (no-op)": {
                "client": noop["workers_cpu_ms_per_message"],
                "server": noop["broker_cpu_ms_per_message"],
            },
            "one link's message sent": {
                "client": noop["sender_cpu_ms_per_message"],
                # a difference of two measures, which noise can make negative: at
                # least nothing
                "server": max(0.0, noop["broker_cpu_ms_per_sent_message"]),
            },
            f"GET of a 10-link page{'' if NGINX else ' (+server)'}": fetch,
            "6 Memcached operations": memcached,
        }
        for name, cost in parts.items():
            print(f"{broker:9} {name:28} {cost['client']:9.3f} {cost['server']:9.3f}")
        floor = sum(cost["client"] + cost["server"] for cost in parts.values())
        best = 1000 * CORES / floor
        print(
            f"{broker:9} floor {floor:.3f} CPU ms/page -> at most {best:.0f} pages/s = "
            f"{best / ceiling:.2f} of the no-op's {ceiling:.0f} messages/s (target 0.40)"
        )
    return 0


def bare_crawl(seed: str, threads: int) -> tuple[int, float, float]:
    """Crawl the seed's host with the least a Python crawler does: pages, seconds,
    CPU seconds of this process."""
    pool = urllib3.PoolManager(maxsize=threads)
    prefix = seed[: seed.index("/", len("http://")) + 1]
    seen, pending, lock, done = {seed}, [1], threading.Lock(), threading.Event()
    work: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    work.put(seed)
    fetched = [0]

    def worker() -> None:
        while (url := work.get()) is not None:
            response = pool.request("GET", url)
            found = []
            if response.headers.get("Content-Type", "").startswith("text/html"):
                for anchor in LexborHTMLParser(response.data).css("a[href]"):
                    href = anchor.attributes.get("href")
                    try:
                        link = ada_url.join_url(url, href or "").partition("#")[0]
                    except ValueError:
                        continue
                    if link.startswith(prefix):
                        found.append(link)
            with lock:
                fetched[0] += 1
                for link in found:
                    if link not in seen:
                        seen.add(link)
                        pending[0] += 1
                        work.put(link)
                pending[0] -= 1
                if not pending[0]:
                    done.set()

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    started, cpu = time.perf_counter(), time.process_time()
    for thread in workers:
        thread.start()
    done.wait()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    for _ in workers:
        work.put(None)
    for thread in workers:
        thread.join()
    return fetched[0], elapsed, cpu


def cpu_per_call(call: Callable[[], object], times: int) -> float:
    """CPU microseconds of one ``call``, over ``times`` of them after one to warm up."""
    call()
    cpu = time.process_time()
    for _ in range(times):
        call()
    return 1e6 * (time.process_time() - cpu) / times


def layers(url: str, times: int) -> dict[str, float]:
    """CPU microseconds of one GET of ``url`` through each layer, body read."""
    host, _, path = url.removeprefix("http://").partition("/")
    connection = http.client.HTTPConnection(host)

    def plain() -> None:
        connection.request("GET", "/" + path)
        connection.getresponse().read()

    pool, session = urllib3.PoolManager(), requests.Session()
    crawler_session, limits = new_session(), limits_from_environment()

    def crawler_fetch() -> None:
        with fetch(crawler_session, url, limits, "floor", via_public=False, keeper=None) as got:
            got.response.raw.read()

    return {
        "http.client": cpu_per_call(plain, times),
        "urllib3": cpu_per_call(lambda: pool.request("GET", url).data, times),
        "requests (a plain Session)": cpu_per_call(lambda: session.get(url).content, times),
        "the crawler's fetch": cpu_per_call(crawler_fetch, times),
    }


def python_floor(site_name: str, requests_per_layer: int, json_path: Path | None) -> int:
    """``--python``: any Python crawler's floor on a real site, next to wget."""
    site = SITES[site_name]
    directory = site.directory()
    if directory is None:
        print(f"skipped: no {site.package} here, and apt-get could not install it (not root?)")
        return 0
    html_files = sorted(directory.glob("*.html"))
    page = html_files[len(html_files) // 2]
    with tempfile.TemporaryDirectory() as work:
        port = free_port()
        seed = f"http://127.0.0.1:{port}/index.html"
        with serve(directory, port, state=Path(work)) as server:
            started = time.perf_counter()
            subprocess.run(
                ["wget", "-q", "-r", "-l", "inf", "-P", f"{work}/wget", seed], check=False
            )
            wget_seconds = time.perf_counter() - started
            wget_pages = len(list(Path(work, "wget").rglob("*.html")))
            crawls = {threads: bare_crawl(seed, threads) for threads in (1, 16)}
            costs = layers(f"http://127.0.0.1:{port}/{page.name}", requests_per_layer)
    if json_path:
        figures = {
            "site": site_name, "server": server,
            "wget": {"pages": wget_pages, "pages_per_s": wget_pages / wget_seconds},
            "bare": {
                str(threads): {"pages": pages, "pages_per_s": pages / seconds,
                               "cpu_ms_per_page": 1000 * cpu / pages}
                for threads, (pages, seconds, cpu) in crawls.items()
            },
            "cpu_us_per_get": costs,
        }  # fmt: skip
        json_path.write_text(json.dumps(figures, indent=2))
    print(f"site: {site_name} ({directory}), served by {server}")
    print(f"{'run':<34} {'pages':>6} {'pages/s':>8} {'CPU ms/page':>11} {'/wget':>6}")
    wget_rate = wget_pages / wget_seconds
    print(f"{'wget -r':<34} {wget_pages:>6} {wget_rate:>8.0f} {'':>11} {1:>6.2f}")
    for threads, (pages, seconds, cpu) in crawls.items():
        name = f"bare Python loop, {threads} thread(s)"
        print(
            f"{name:<34} {pages:>6} {pages / seconds:>8.0f} {1000 * cpu / pages:>11.2f} "
            f"{pages / seconds / wget_rate:>6.2f}"
        )
    print(f"one GET of {page.name}, CPU per request on one thread:")
    for layer, microseconds in costs.items():
        print(f"  {layer:<32} {microseconds:>6.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
