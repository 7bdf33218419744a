"""The server's pace (issue 54): a server that defends itself, and one that slows under load.

    python benchmarks/server_pace.py                        # 300 pages, both servers, all
    python benchmarks/server_pace.py --pages 60 --server defending --contenders local

Serves a generated site (``tests/site_server.py``'s ``generate_site``: ``--pages`` pages
of ``--links`` absolute links, page i linking to i + 1, and a ``robots.txt`` allowing
every page) on 127.0.0.1, from this process, behind one of the servers of
``tests/defending_servers.py`` (the ones ``tests/test_server_pace.py`` tests):

- ``defending``: answers 429 with ``Retry-After: 1`` to a request above 4 in flight or
  20 in the last second (as servers and CDNs do), pages in 10 ms otherwise;
- ``loaded``: answers every request, in 5 ms doubled for each request more in flight.

Each contender crawls the site from its first page, one after another, each against a
server of its own (its counts start at nought), with ``benchmarks/polite_pace.py``'s
helpers:

- ``workers``: ``crawler worker``'s Dramatiq workers, 2 processes x 8 threads on
  RabbitMQ, seeded with ``crawler crawl --workers -i SEEDS --auto-throttle --wait``;
- ``local``: ``crawler crawl --local -i SEEDS --auto-throttle --threads 16``;
- ``scrapy_autothrottle``: Scrapy (``benchmarks/scrapy_spider.py``) with
  ``AUTOTHROTTLE_ENABLED``, its other settings Scrapy's defaults
  (``CONCURRENT_REQUESTS_PER_DOMAIN`` 8, ``DOWNLOAD_DELAY`` 0, AutoThrottle's start
  delay 5 s and target concurrency 1, retries on: 2, 429 among the statuses retried)
  but ``CONCURRENT_REQUESTS`` 16, the crawler's threads; robots.txt obeyed.  Scrapy is
  found or made as ``polite_pace.py`` does; when it cannot be had, this prints
  ``scrapy: not installed`` and measures the others.

``--auto-throttle`` is ``crawler crawl``'s default: given here as the tests give it.

What is printed for each server and contender, counted by the server:

- seconds, from the contender's first request to its last (no contender pays for its
  start-up);
- pages: distinct pages answered 200, of ``--pages``; requests: every request,
  robots.txt's and those answered 429 included;
- defending: requests answered 429, and their share of the requests after the first
  3 s (the crawler's target: at most 5%);
- loaded: the most requests in flight at once, and the median answer time (unloaded:
  5 ms; the crawler's target: at most twice that);
- CPU ms a page: the contender's processes, as ``polite_pace.py`` counts them (for the
  workers, the worker processes and their parent, RabbitMQ, Memcached and the seeder;
  for the others, the command and its children), over the pages fetched;
- ok: every page fetched, and the server's pace held (429 after 3 s at most 5%, or the
  median answer at most twice the unloaded one).

Prints a table, then one JSON line per server and contender; ``--json FILE`` writes
every figure to FILE as well.  One round each: a server's pace, not a speed, is what
is measured, and the figures are the server's own counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import DEFAULT_PROCESSES, DEFAULT_THREADS
from benchmarks.polite_pace import (
    crawl_locally,
    crawl_with_scrapy,
    crawl_with_workers,
    scrapy_command,
)
from tests.defending_servers import IN_FLIGHT, PER_SECOND, Defending, Loaded
from tests.site_server import Page, Request, SiteServer, generate_site, page_path

CONTENDERS = ("workers", "local", "scrapy_autothrottle")
SERVERS = ("defending", "loaded")
#: The crawler's options, workers' and ``--local``'s alike.
CRAWL_OPTIONS = ("--auto-throttle",)
#: Scrapy's settings besides its defaults (``crawl_with_scrapy`` adds its log's).
SCRAPY_SETTINGS: dict[str, Any] = {
    "AUTOTHROTTLE_ENABLED": True,
    "CONCURRENT_REQUESTS": DEFAULT_PROCESSES * DEFAULT_THREADS,
    "ROBOTSTXT_OBEY": True,
    "COOKIES_ENABLED": False,
}
#: Seconds from the first request after which the share answered 429 is counted.
SETTLING = 3.0
#: The share answered 429 after :data:`SETTLING` a crawl may have (issue 54).
MOST_REFUSED = 0.05
#: The loaded server's answer time unloaded, and how many times it a median may be.
UNLOADED, MOST_SLOWED = 0.005, 2


def main() -> int:
    """Parse the options, measure every server and contender, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=300, help="pages of the site")
    parser.add_argument("--links", type=int, default=5, help="links on each page")
    parser.add_argument(
        "--server", choices=(*SERVERS, "both"), default="both", help="which server(s)"
    )
    parser.add_argument(
        "--contenders", default=",".join(CONTENDERS),
        help=f"comma-separated, of: {', '.join(CONTENDERS)}",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="write every figure to this file too")
    args = parser.parse_args()
    contenders = [name.strip() for name in args.contenders.split(",") if name.strip()]
    unknown = set(contenders) - set(CONTENDERS)
    if unknown or not contenders:
        parser.error(f"--contenders: {', '.join(sorted(unknown)) or 'none'}; known: {CONTENDERS}")
    if args.pages < 2 or args.links < 1:
        parser.error("--pages 2 or more, --links 1 or more")
    servers = list(SERVERS) if args.server == "both" else [args.server]
    results = measure(pages=args.pages, links=args.links, servers=servers, contenders=contenders)
    print(table(results, pages=args.pages))
    for server, by_contender in results.items():
        for name, figures in by_contender.items():
            if figures is not None:
                print(json.dumps({"server": server, "contender": name, **figures}))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


def measure(
    *, pages: int, links: int, servers: list[str], contenders: list[str]
) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Each contender's figures against each server, by server and contender; None for
    Scrapy when it cannot be had.

    Parameters:
      pages(int): Pages of the site.
      links(int): Links on each page.
      servers(list): Names from :data:`SERVERS`, in the order they serve.
      contenders(list): Names from :data:`CONTENDERS`, in the order they run.
    """
    scrapy = None
    if any(name.startswith("scrapy") for name in contenders):
        scrapy = scrapy_command()
        if scrapy is None:
            print("scrapy: not installed", flush=True)
    results: dict[str, dict[str, dict[str, Any] | None]] = {}
    site = SiteServer().start()
    try:
        with tempfile.TemporaryDirectory() as directory:
            tmp = Path(directory)
            seeds = tmp / "seeds.txt"
            seeds.write_text(site.url(page_path(0)) + "\n")
            for server_name in servers:
                results[server_name] = {}
                for name in contenders:
                    if name.startswith("scrapy") and scrapy is None:
                        results[server_name][name] = None
                        continue
                    site_pages = generate_site(site.base_url, pages=pages, links_per_page=links)
                    site_pages["/robots.txt"] = Page(
                        b"User-agent: *\nAllow: /\n", content_type="text/plain"
                    )
                    server: Defending | Loaded = (
                        Defending(site_pages)
                        if server_name == "defending"
                        else Loaded(site_pages, base=UNLOADED)
                    )
                    site.behaviors.clear()
                    site.behaviors.update(dict.fromkeys(site_pages, server))
                    site.requests.clear()
                    run_dir = tmp / f"{server_name}-{name}"
                    run_dir.mkdir()
                    if name == "workers":
                        figures = crawl_with_workers(seeds, run_dir, CRAWL_OPTIONS, check=False)
                    elif name == "local":
                        figures = crawl_locally(seeds, CRAWL_OPTIONS, check=False)
                    else:
                        assert scrapy is not None
                        figures = crawl_with_scrapy(scrapy, seeds, run_dir, SCRAPY_SETTINGS)
                    time.sleep(0.2)  # the last answers counted
                    figures.update(server_figures(server, list(site.requests), pages=pages))
                    figures["cpu_ms_per_page"] = cpu_per_page(figures)
                    results[server_name][name] = figures
                    print(f"{server_name} {name}: {json.dumps(figures)}", file=sys.stderr)
    finally:
        site.stop()
    return results


def server_figures(
    server: Defending | Loaded, requests: list[Request], *, pages: int
) -> dict[str, Any]:
    """What the server counted of one contender's crawl (``requests``: the site's log of
    it): seconds from the first request to the last, pages answered 200, duplicates,
    requests; for a :class:`Defending` server, the 429s and their share after
    :data:`SETTLING`; for a :class:`Loaded` one, the peak in flight and the median
    answer; and whether every page came and the server's pace was held."""
    times = [request.time for request in requests]
    paths = [page_path(i) for i in range(pages)]
    fetched = sum(server.served[path] > 0 for path in paths)
    figures: dict[str, Any] = {
        "seconds": round(max(times) - min(times), 2) if times else float("nan"),
        "pages": fetched,
        "expected_pages": pages,
        "duplicates": sum(server.served[path] for path in paths) - fetched,
        "requests": len(requests),
    }
    if isinstance(server, Defending):
        share = server.refused_share_after(SETTLING)
        figures.update(
            limits=f"{IN_FLIGHT} in flight, {PER_SECOND}/s",
            refused=server.refused,
            refused_share_after_settling=round(share, 4),
            pace_held=share <= MOST_REFUSED,
        )
    else:
        median = server.median_answer_time()
        figures.update(
            peak_in_flight=server.peak,
            median_answer_ms=round(1000 * median, 1),
            pace_held=median <= MOST_SLOWED * server.base,
        )
    figures["ok"] = fetched == pages and figures["pace_held"]
    return figures


def cpu_per_page(figures: dict[str, Any]) -> float:
    """CPU ms a page: the contender's CPU seconds over the pages fetched."""
    cpu_s, pages = float(figures["cpu_s"]), int(figures["pages"])
    return round(1000 * cpu_s / max(pages, 1), 2)


def table(results: dict[str, dict[str, dict[str, Any] | None]], *, pages: int) -> str:
    """One line a server and contender: seconds, pages of N, requests, 429s and their
    share after the first seconds (defending), peak in flight and median answer
    (loaded), CPU ms a page, and whether every page came and the pace was held."""
    lines = [
        f"{pages} pages; defending: 429 above {IN_FLIGHT} in flight or {PER_SECOND}/s, "
        f"ok: every page and <= {MOST_REFUSED:.0%} answered 429 after {SETTLING:g} s; "
        f"loaded: {1000 * UNLOADED:g} ms doubled a request more in flight, ok: every page "
        f"and median answer <= {MOST_SLOWED * 1000 * UNLOADED:g} ms",
        f"{'server':<10} {'contender':<20} {'seconds':>8} {'pages':>9} {'requests':>8} "
        f"{'429s':>5} {f'429 >{SETTLING:g}s':>8} {'peak':>5} {'median ms':>9} "
        f"{'CPU ms/page':>11} {'ok':>3}",
    ]
    for server, by_contender in results.items():
        for name, figures in by_contender.items():
            if figures is None:
                lines.append(f"{server:<10} {name:<20} not installed")
                continue
            fetched = f"{figures['pages']}/{pages}"
            if "refused" in figures:
                refused, share = (
                    str(figures["refused"]),
                    f"{figures['refused_share_after_settling']:.1%}",
                )
                peak = median = "-"
            else:
                refused = share = "-"
                peak, median = str(figures["peak_in_flight"]), f"{figures['median_answer_ms']:.1f}"
            lines.append(
                f"{server:<10} {name:<20} {figures['seconds']:>8.2f} {fetched:>9} "
                f"{figures['requests']:>8} {refused:>5} {share:>8} {peak:>5} {median:>9} "
                f"{figures['cpu_ms_per_page']:>11.2f} {'yes' if figures['ok'] else 'NO':>3}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
