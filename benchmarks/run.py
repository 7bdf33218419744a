"""One benchmark run, side by side: this crawler on RabbitMQ and on Redis, ``--local``,
Scrapy, and a no-op Dramatiq actor as the ceiling, all on the same local site.

    python benchmarks/run.py --pages 2000 --links 10 --repeat 3   # the full run
    python benchmarks/run.py --pages 150 --links 5 --quick --repeat 2  # the smoke run CI does
    python benchmarks/run.py --site python-docs --repeat 3         # a real site, heavy pages
    python benchmarks/run.py --site postgresql-docs --repeat 3     # a real site, light pages

``--site python-docs`` crawls the Python 3 documentation of Debian's ``python3-doc``,
``--site postgresql-docs`` the PostgreSQL 15 documentation of ``postgresql-doc-15``
(each installed with apt-get when missing, if it can be; else it says so and exits 0
having measured nothing) with ``--follow-relative --same-domain`` on both brokers and
``--local``, next to Scrapy's ``CrawlSpider`` with the same scope and concurrency, and
``wget -r -l inf`` as the reference for the page set.  nginx's access log says which
HTML pages each contender fetched: every one must have fetched wget's.

Prints one table with ratios and writes the figures as JSON (``--json``).
Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    crawl_locally,
    crawl_with_scrapy,
    crawl_with_wget,
    crawl_with_workers,
    free_port,
    noop_ceiling,
    serve,
    served,
    write_site,
)
from benchmarks.measuring.real_sites import SITES

BROKERS = ("rabbitmq", "redis")


def main() -> int:
    """Parse the options, measure, write the figures to ``--json`` and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--noop-messages", type=int, default=20000)
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES, help="worker processes")
    parser.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help="per worker process; Scrapy and --local get processes x threads",
    )
    parser.add_argument("--quick", action="store_true", help="skip Scrapy and the ceilings")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds, taking turns; the median is reported"
    )
    parser.add_argument("--json", type=Path, default=Path("benchmark.json"))
    parser.add_argument(
        "--site", choices=["generated", *SITES], default="generated",
        help="the generated site (--pages x --links), or a real one: the Python docs "
        "(heavy pages) or the PostgreSQL docs (light pages)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.site in SITES:
        site = SITES[args.site]
        directory = site.directory()
        if directory is None:
            print(f"skipped: no {site.package} here, and apt-get could not install it (not root?)")
            return 0
        docs = measure_docs(
            args.site,
            directory, processes=args.processes, threads=args.threads, repeat=args.repeat,
            quick=args.quick,
        )  # fmt: skip
        args.json.write_text(json.dumps(docs, indent=2))
        print(docs_table(docs))
        return 0 if docs["same_pages"] else 1

    results = measure(
        pages=args.pages,
        links=args.links,
        processes=args.processes,
        threads=args.threads,
        repeat=args.repeat,
        quick=args.quick,
        noop_messages=args.noop_messages,
    )
    args.json.write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


def measure(
    *,
    pages: int,
    links: int,
    processes: int,
    threads: int,
    repeat: int,
    quick: bool,
    noop_messages: int,
) -> dict[str, Any]:
    """Every contender's figures on one generated site, as ``benchmark.json`` holds them.

    Rounds take turns, so that a slow spell of a shared machine hits every contender
    alike; each contender's figures are its median round's, with every round under
    ``rounds``.

    Parameters:
      pages(int): The site's pages.
      links(int): Links on each page.
      processes(int): Worker processes, for the crawl and the no-op ceiling.
      threads(int): Threads per worker process; ``--local`` and Scrapy get
        processes x threads.
      repeat(int): Rounds.
      quick(bool): Whether to skip Scrapy and the no-op ceilings.
      noop_messages(int): Messages the no-op ceiling consumes on each broker.
    """
    results: dict[str, Any] = {
        "pages": pages, "links": links, "processes": processes, "threads": threads
    }  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)  # nginx workers read the site as an unprivileged user
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        (tmp / "site").mkdir()
        write_site(tmp / "site", base, pages, links)
        seed = f"{base}/page/0.html"
        with serve(tmp / "site", port) as server:
            results["server"] = server
            for round_ in range(repeat):
                prefix = tmp / f"round-{round_}"
                prefix.mkdir()
                for broker in BROKERS:
                    runs.setdefault(broker, []).append(
                        crawl_with_workers(
                            broker, seed, prefix, processes=processes, threads=threads
                        )
                    )
                runs.setdefault("local", []).append(
                    crawl_locally(seed, threads=processes * threads)
                )
                # --state: the same local crawl kept on disk as it goes (SQLite).
                state = ("--state", str(prefix / "state"))
                runs.setdefault("local_state", []).append(
                    crawl_locally(seed, threads=processes * threads, options=state)
                )
                # Page handlers: one that does nothing, and examples/titles.py's.
                for run, handler in HANDLERS.items():
                    runs.setdefault(run, []).append(
                        crawl_locally(
                            seed, threads=processes * threads, options=("--handler", handler)
                        )
                    )
                if not quick:
                    scrapy = crawl_with_scrapy(seed, prefix, concurrency=processes * threads)
                    if scrapy is not None:
                        runs.setdefault("scrapy", []).append(scrapy)
        if not quick:
            for broker in BROKERS:
                for round_ in range(repeat):
                    prefix = tmp / f"round-{round_}"
                    runs.setdefault(f"noop_{broker}", []).append(
                        noop_ceiling(
                            broker, noop_messages, prefix, processes=processes, threads=threads
                        )
                    )
    results["repeat"] = repeat
    for run, figures in runs.items():
        results[run] = median_run(figures)
        results[run]["rounds"] = figures
    return results


#: The ``--local`` runs with a page handler, by name.
HANDLERS = {
    "local_noop": "benchmarks.measuring.handlers:noop",
    "local_title": "examples.titles:title_and_description",
}


#: The crawl options of the real-site run, and Scrapy's spider with the same scope.
DOCS_OPTIONS = ("--follow-relative", "--same-domain")
DOCS_SPIDER = "scrapy_docs_spider.py"


def html_pages(access_log: Path) -> set[str]:
    """The HTML pages served with status 200 since the log was emptied; empties it."""
    pages = {path for path in served(access_log) if path.endswith((".html", "/"))}
    access_log.write_text("")
    return pages


def measure_docs(
    name: str, directory: Path, *, processes: int, threads: int, repeat: int, quick: bool
) -> dict[str, Any]:
    """Every contender's figures on a real site, rounds taking turns, and whether
    each fetched the same HTML pages as wget in every round.

    Parameters:
      name(str): The site's name in :data:`SITES`.
      directory(Path): The docs' HTML directory (``index.html`` is the seed).
      processes(int): Worker processes.
      threads(int): Threads per worker process; ``--local`` and Scrapy get
        processes x threads.
      repeat(int): Rounds.
      quick(bool): Whether to skip Scrapy.
    """
    pages = sorted(directory.rglob("*.html"))
    results: dict[str, Any] = {
        "site": f"{name} ({directory})", "files": len(pages),
        "kib_per_page": round(sum(p.stat().st_size for p in pages) / len(pages) / 1024, 1),
        "processes": processes, "threads": threads, "repeat": repeat,
    }  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {}
    differences: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        tmp.chmod(0o755)
        port = free_port()
        seed = f"http://127.0.0.1:{port}/index.html"
        log = tmp / "access.log"
        with serve(directory, port, access_log=log, state=tmp) as server:
            results["server"] = server
            for round_ in range(repeat):
                prefix = tmp / f"round-{round_}"
                prefix.mkdir()
                log.write_text("")
                runs.setdefault("wget", []).append(crawl_with_wget(seed, prefix))
                reference = html_pages(log)
                runs["wget"][-1].update(pages=len(reference))
                contenders: dict[str, Callable[[], dict[str, Any] | None]] = {
                    broker: partial(
                        crawl_with_workers, broker, seed, prefix, processes=processes,
                        threads=threads, options=DOCS_OPTIONS, exits=(0, 1),
                    )
                    for broker in BROKERS
                }  # fmt: skip
                contenders["local"] = partial(
                    crawl_locally, seed, threads=processes * threads, options=DOCS_OPTIONS,
                    exits=(0, 1),
                )  # fmt: skip
                if not quick:
                    contenders["scrapy"] = partial(
                        crawl_with_scrapy, seed, prefix, concurrency=processes * threads,
                        spider=DOCS_SPIDER,
                    )  # fmt: skip
                for run, crawl in contenders.items():
                    outcome = crawl()
                    fetched = html_pages(log)
                    if outcome is None:
                        continue
                    outcome["html_pages"] = len(fetched)
                    differences.setdefault(run, []).append(len(fetched ^ reference))
                    runs.setdefault(run, []).append(outcome)
    for one in runs["wget"]:
        one["pages_per_s"] = one["pages"] / one["seconds"]
    for run, rounds in runs.items():
        results[run] = median_run(rounds)
        results[run]["rounds"] = rounds
    results["pages_differing_from_wget"] = differences
    results["same_pages"] = all(not any(counts) for counts in differences.values())
    return results


def docs_table(results: dict[str, Any]) -> str:
    """The real-site figures as the README's table."""
    scrapy = (results.get("scrapy") or {}).get("pages_per_s")
    wget = results["wget"]["pages_per_s"]
    lines = [
        f"site: {results['site']}, {results['files']} HTML files of "
        f"{results['kib_per_page']} KiB on average, served by {results['server']}; "
        f"workers {results['processes']} processes x {results['threads']} threads; "
        f"median of {results['repeat']} round(s); HTML pages as wget's: "
        f"{'yes' if results['same_pages'] else 'NO'} {results['pages_differing_from_wget']}",
        f"{'run':<10} {'pages':>6} {'pages/s':>8} {'CPU ms/page':>11} {'/Scrapy':>7} {'/wget':>7}",
    ]
    for run in ("rabbitmq", "redis", "local", "scrapy", "wget"):
        figures = results.get(run)
        if not figures:
            continue
        rate = figures["pages_per_s"]
        pages = figures.get("html_pages", figures.get("pages"))
        lines.append(
            f"{run:<10} {pages:>6} {rate:>8.0f} "
            f"{figures.get('cpu_ms_per_page', float('nan')):>11.2f} "
            f"{(rate / scrapy if scrapy else float('nan')):>7.2f} {rate / wget:>7.2f}"
        )
    return "\n".join(lines)


def median_run(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median rate (the lower middle one of an even number)."""
    key = "pages_per_s" if "pages_per_s" in rounds[0] else "messages_per_s"
    ordered = sorted(rounds, key=lambda figures: float(figures[key]))
    return dict(ordered[(len(ordered) - 1) // 2])


def table(results: dict[str, Any]) -> str:
    """The figures of ``results`` (as :func:`measure` returns them) as the README's table."""
    scrapy = (results.get("scrapy") or {}).get("pages_per_s")
    lines = [
        f"site: {results['pages']} pages x {results['links']} links, "
        f"served by {results['server']}; "
        f"workers {results['processes']} processes x {results['threads']} threads; "
        f"median of {results['repeat']} round(s)",
        f"{'run':<10} {'pages/s':>8} {'msgs/page':>9} {'CPU ms/page':>11} {'RSS MiB':>8} "
        f"{'/Scrapy':>7} {'/no-op':>7}",
    ]
    for run in ("rabbitmq", "redis", "local", "local_state", *HANDLERS, "scrapy"):
        figures = results.get(run)
        if not figures:
            continue
        rate = figures["pages_per_s"]
        ceiling = (results.get(f"noop_{run}") or {}).get("messages_per_s")
        lines.append(
            f"{run:<10} {rate:>8.0f} {figures.get('messages_per_page', float('nan')):>9.2f} "
            f"{figures.get('cpu_ms_per_page', float('nan')):>11.2f} "
            f"{figures.get('peak_worker_rss_mib', float('nan')):>8.1f} "
            f"{(rate / scrapy if scrapy else float('nan')):>7.2f} "
            f"{(rate / ceiling if ceiling else float('nan')):>7.2f}"
        )
    for broker in BROKERS:
        ceiling = results.get(f"noop_{broker}")
        if ceiling:
            lines.append(f"no-op actor on {broker}: {ceiling['messages_per_s']:.0f} messages/s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
