"""The floor under any Python crawler of a site of light pages: what a bare crawl loop
costs with no dedup store, no broker, no politeness and no records, next to wget.

    python benchmarks/python_floor.py                          # the PostgreSQL docs
    python benchmarks/python_floor.py --site python-docs --requests 500

On a real site of Debian's documentation packages (installed with apt-get when
missing, if it can be), served by nginx on 127.0.0.1, it measures in one run:

- ``wget -r -l inf`` from ``index.html``: the reference (C, one connection);
- a bare crawl loop in one Python process: urllib3's GET, selectolax (Lexbor) for the
  links, ada to resolve them, a set for dedup, on 1 and on 16 threads: the least a
  Python crawler of these pages can spend, and what the GIL costs its threads;
- one page fetched again and again on one thread by ``http.client``, urllib3,
  ``requests`` and the crawler's own ``fetch``: CPU per request of each layer.

Prints pages/s and CPU ms per page (this process's CPU; nginx's is apart).
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import http.client

import ada_url
import requests
import urllib3
from selectolax.lexbor import LexborHTMLParser

from benchmarks.measuring import free_port, serve
from benchmarks.measuring.real_sites import SITES
from crawler.environment import limits_from_environment
from crawler.fetching import fetch, new_session


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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--site", choices=list(SITES), default="postgresql-docs")
    parser.add_argument("--requests", type=int, default=2000, help="GETs per layer")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    arguments = parser.parse_args()
    site = SITES[arguments.site]
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
            costs = layers(f"http://127.0.0.1:{port}/{page.name}", arguments.requests)
    if arguments.json:
        figures = {
            "site": arguments.site, "server": server,
            "wget": {"pages": wget_pages, "pages_per_s": wget_pages / wget_seconds},
            "bare": {
                str(threads): {"pages": pages, "pages_per_s": pages / seconds,
                               "cpu_ms_per_page": 1000 * cpu / pages}
                for threads, (pages, seconds, cpu) in crawls.items()
            },
            "cpu_us_per_get": costs,
        }  # fmt: skip
        arguments.json.write_text(json.dumps(figures, indent=2))
    print(f"site: {arguments.site} ({directory}), served by {server}")
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
