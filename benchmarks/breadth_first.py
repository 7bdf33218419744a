"""The order in which a crawl fetches shallow and deep pages, with and without
``--breadth-first``, on RabbitMQ, Redis and ``--local``.

    python benchmarks/breadth_first.py --repeat 3

The site (``tests.site_server.depth_site``): the seed links to one fast depth-1 page,
which leads to 300 depth-3 pages through 20 depth-2 pages, and to 5 slow depth-1
pages whose first answer outlasts the fetch deadline (0.3 s here), so that they come
back as retries while deeper pages are queued.  Workers: 1 process x 2 threads
(``--local``: 2 threads).  Figures, from the test server's own request log, median
of the rounds:

- *overtaken*: depth-3 pages fetched before the last depth-1 page;
- *depth 1 at*: where the depth-1 pages' last fetches fall in the crawl, as a share of
  all its requests (0 first, 1 last), their mean; *depth 3 at*: the same for depth 3.

With ``--cost``, what priorities cost instead: the generated site (2000 pages x 10
links, nginx) crawled by workers (2 x 8) on RabbitMQ, its queues declared without
priorities (as by a crawler from before them), with them (as the crawler declares
them now), and with them and ``--breadth-first``, taking turns; median round.

Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    crawl_with_workers,
    free_port,
    serve,
    write_site,
)
from benchmarks.measuring.workers import BIN, ROOT, broker_env, flush_services, start_workers, stop
from tests.site_server import Request, SiteServer, depth_site, overtaken

RUNS = ("rabbitmq", "redis", "local")
#: Slow pages' first answers outlast the fetch deadline; their retries come back soon.
SETTINGS = {"CRAWLER_FETCH_DEADLINE": "0.3", "CRAWLER_MIN_BACKOFF_MS": "200"}


def positions(requests: list[Request], prefix: str) -> float:
    """Where the last fetch of each page under ``prefix`` falls, 0 to 1, on average."""
    last = {request.path: i for i, request in enumerate(requests)}
    spots = [i / (len(requests) - 1) for path, i in last.items() if path.startswith(prefix)]
    return statistics.mean(spots)


def one_round(run: str, breadth_first: bool) -> dict[str, float]:
    server = SiteServer().start()
    try:
        site = depth_site(server)
        args = [site.seed, *(["--breadth-first"] if breadth_first else [])]
        env = broker_env("rabbitmq" if run == "local" else run, **SETTINGS)
        started = time.monotonic()
        if run == "local":
            subprocess.run(
                [sys.executable, "-m", "crawler.example", "--local", "--threads", "2", *args],
                cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
            )  # fmt: skip
        else:
            flush_services(env)
            workers = start_workers(env, "crawler.example", processes=1, threads=2)
            try:
                subprocess.run(
                    [str(BIN / "python"), "-m", "crawler.example", *args, "--wait"],
                    cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
                )  # fmt: skip
            finally:
                stop(workers)
        elapsed = time.monotonic() - started
        requests = list(server.requests)
        return {
            "overtaken": overtaken(requests),
            "depth 1 at": positions(requests, "/d1/"),
            "depth 3 at": positions(requests, "/d3/"),
            "seconds": elapsed,
        }
    finally:
        server.stop()


COSTS: dict[str, dict[str, Any]] = {
    "plain queues": {"plain_queues": True},
    "priority queues": {},
    "priority queues, --breadth-first": {"options": ("--breadth-first",)},
}


def cost(repeat: int, pages: int) -> int:
    """What RabbitMQ's priority queues cost a crawl's throughput."""
    rounds: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        tmp.chmod(0o755)  # nginx's workers read the site
        port = free_port()
        (tmp / "site").mkdir()
        write_site(tmp / "site", f"http://127.0.0.1:{port}", pages, 10)
        with serve(tmp / "site", port, state=tmp):
            for round_ in range(repeat):
                for kind, (name, settings) in enumerate(COSTS.items()):
                    prefix = tmp / f"{round_}-{kind}"
                    prefix.mkdir()
                    seed = f"http://127.0.0.1:{port}/page/0.html"
                    outcome = crawl_with_workers(
                        "rabbitmq", seed, prefix,
                        processes=DEFAULT_PROCESSES, threads=DEFAULT_THREADS, **settings,
                    )  # fmt: skip
                    rounds.setdefault(name, []).append(outcome)
    print(f"site: {pages} pages x 10 links, nginx; workers 2 x 8 on RabbitMQ; median of {repeat}")
    print(f"{'queues':<34} {'pages':>6} {'pages/s':>8} {'CPU ms/page':>11} {'x plain':>8}")
    plain = statistics.median(r["pages_per_s"] for r in rounds["plain queues"])
    for name, outcomes in rounds.items():
        rate = statistics.median(r["pages_per_s"] for r in outcomes)
        cpu = statistics.median(r["cpu_ms_per_page"] for r in outcomes)
        pages_ = min(r["pages"] for r in outcomes)
        print(f"{name:<34} {pages_:>6} {rate:>8.0f} {cpu:>11.2f} {rate / plain:>8.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--cost", action="store_true", help="measure what priorities cost")
    parser.add_argument("--pages", type=int, default=2000, help="with --cost: the site's pages")
    arguments = parser.parse_args()
    if arguments.cost:
        return cost(arguments.repeat, arguments.pages)
    rounds: dict[tuple[str, bool], list[dict[str, float]]] = {}
    for _ in range(arguments.repeat):
        for run in RUNS:
            for breadth_first in (False, True):
                rounds.setdefault((run, breadth_first), []).append(one_round(run, breadth_first))
    print("site: 300 depth-3 pages, 5 slow depth-1 pages; workers 1 x 2 threads;")
    print(f"median of {arguments.repeat} round(s)")
    print(f"{'run':<10} {'order':<14} {'overtaken':>9} {'depth 1 at':>10} {'depth 3 at':>10}")
    for (run, breadth_first), figures in rounds.items():
        median = {key: statistics.median(f[key] for f in figures) for key in figures[0]}
        order = "breadth-first" if breadth_first else "arrival"
        print(
            f"{run:<10} {order:<14} {median['overtaken']:>9.0f}"
            f" {median['depth 1 at']:>10.2f} {median['depth 3 at']:>10.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
