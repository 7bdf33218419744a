"""Fast at a polite pace (issue 54): many hosts, each held to R requests a second.

    python benchmarks/polite_pace.py                        # 10 hosts x 200 pages, 10/s each
    python benchmarks/polite_pace.py --hosts 3 --pages 60 --contenders local,workers

Writes a generated site for each of ``--hosts`` hosts, each a loopback address of its
own (127.0.0.2, 127.0.0.3, ...): ``--pages`` pages of ``--links`` absolute links within
the host (page i links to i+1, so every page is reached), and a ``robots.txt``
allowing every page.  One nginx serves them all, a server block an address, on one
port, and logs each request's time, address, path and status.  The seeds are each
host's first page, in a seed file.

Every contender crawls the hosts at ``--rate`` requests a second per host at most, one
contender after another (rounds taking turns with ``--repeat``):

- ``workers``: ``crawler worker``'s Dramatiq workers, 2 processes x 8 threads on
  RabbitMQ (the benchmark's own virtual host), seeded with
  ``crawler crawl --workers -i SEEDS --max-rate R --wait``;
- ``local``: ``crawler crawl --local -i SEEDS --max-rate R --threads 16``;
- ``scrapy``: Scrapy (``benchmarks/scrapy_spider.py``), ``DOWNLOAD_DELAY`` 1/R and
  ``CONCURRENT_REQUESTS_PER_DOMAIN`` 1, the delay not randomized, robots.txt obeyed;
- ``scrapy_autothrottle``: the same with ``AUTOTHROTTLE_ENABLED`` (1/R its least delay);
- ``workers_unthrottled``, ``local_unthrottled`` (only when named): the first two
  without ``--max-rate``, and then a line with the ratio of each one's CPU a page.

With ``--crawl-delay`` each host's ``robots.txt`` asks for ``Crawl-delay: 1/R`` and the
crawler's contenders are given no ``--max-rate``: the pace is robots.txt's (and
``--auto-throttle``'s, ``crawler crawl``'s defaults), as on a real site that asks for one.

Scrapy is this Python's when installed (``pip install -e '.[bench]'``), else that of a
virtualenv of the benchmarks' own, made the first time with pip
(``~/.cache/crawler-benchmarks/venv-scrapy``); when neither can be had, it prints
``scrapy: not installed`` and measures the others.

What is printed for each contender, from nginx's access log unless said otherwise:

- seconds, from the contender's first request to its last (no contender pays for its
  start-up), and their ratio to the ideal, pages / R (a crawler that keeps every
  host at exactly R from its first request scores (pages - 1) / pages);
- CPU ms a page: the crawl's processes, as ``run.py`` counts them (for the workers,
  the worker processes and their parent, RabbitMQ, Memcached and the seeder; for the
  others, the command and its children), over the pages fetched;
- pages fetched (distinct pages answered 200, all hosts) and how many pages each host
  served at the least;
- duplicates: requests for a page beyond its first; for the workers, their rate-limit
  deferrals too (a message sent again later because its host had no turn for it),
  read from their metrics;
- max/s: the most requests one host got in any one-second window, robots.txt's
  included, and pages max/s, its pages' only; held when the pages' is at most R and
  one of the crawler's rate buckets (a tenth of R, at least 1): R + 1 up to 10/s.
  (The crawler reads a host's robots.txt before its first turn: one more request
  in the host's first second.)

Prints a table, then one JSON line per contender (the median round by seconds, every
round under ``rounds``).  Every address is on 127.0.0.x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    BIN,
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    ROOT,
    CrawlCpu,
    broker_env,
    flush_services,
    free_port,
    metric,
    read_metrics,
    start_workers,
    stop,
    write_site,
)
from benchmarks.measuring.generated_site import MIME_TYPES
from scripts.services import apt_install

CONTENDERS = ("workers", "local", "scrapy", "scrapy_autothrottle")
#: The same crawls of the workers and ``--local`` without ``--max-rate`` (the crawl's
#: other defaults kept), run only when asked for: the CPU a page the polite crawls are
#: held to (at most 1.5x theirs, issue 54).
UNTHROTTLED = ("workers_unthrottled", "local_unthrottled")
#: Where a virtualenv with Scrapy is made when this Python has none (as ``run.py``'s).
SCRAPY_VENV = Path.home() / ".cache" / "crawler-benchmarks" / "venv-scrapy"
#: What it installs: the ``bench`` extra's Scrapy (``pyproject.toml``).
SCRAPY_REQUIREMENT = "scrapy>=2.11"
#: Seconds any one contender's crawl may take.
TIMEOUT = 900
#: The crawler's command line, run by this Python from the project's root.
CRAWLER = (sys.executable, "-c", "import sys; from crawler.command import main; sys.exit(main())")


def main() -> int:
    """Parse the options, measure every contender, print the table and the JSON lines."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=10, help="hosts, 127.0.0.2 on (at most 250)")
    parser.add_argument("--pages", type=int, default=200, help="pages of each host")
    parser.add_argument("--links", type=int, default=10, help="links on each page")
    parser.add_argument("--rate", type=float, default=10.0, help="requests a second per host")
    parser.add_argument(
        "--contenders", default=",".join(CONTENDERS),
        help=f"comma-separated, of: {', '.join(CONTENDERS + UNTHROTTLED)}",
    )  # fmt: skip
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds, taking turns; the median is reported"
    )
    parser.add_argument(
        "--crawl-delay", action="store_true",
        help="the hosts' robots.txt asks for Crawl-delay 1/R, and the crawler is given no "
        "--max-rate: its pace comes from robots.txt (Scrapy keeps DOWNLOAD_DELAY 1/R)",
    )  # fmt: skip
    args = parser.parse_args()
    contenders = [name.strip() for name in args.contenders.split(",") if name.strip()]
    unknown = set(contenders) - set(CONTENDERS + UNTHROTTLED)
    if unknown or not contenders:
        known = CONTENDERS + UNTHROTTLED
        parser.error(f"--contenders: {', '.join(sorted(unknown)) or 'none'}; known: {known}")
    if args.crawl_delay and set(contenders) & set(UNTHROTTLED):
        parser.error("--crawl-delay paces every crawl that reads robots.txt: no unthrottled one")
    if not 1 <= args.hosts <= 250 or args.pages < 2 or args.links < 1 or args.rate <= 0:
        parser.error("--hosts 1 to 250, --pages 2 or more, --links 1 or more, --rate over 0")
    results = measure(
        hosts=args.hosts, pages=args.pages, links=args.links, rate=args.rate,
        contenders=contenders, repeat=args.repeat, crawl_delay=args.crawl_delay,
    )  # fmt: skip
    print(table(results, hosts=args.hosts, pages=args.pages, rate=args.rate, repeat=args.repeat))
    for name, figures in results.items():
        if figures is not None:
            print(json.dumps({"contender": name, **figures}))
    return 0


def measure(
    *,
    hosts: int,
    pages: int,
    links: int,
    rate: float,
    contenders: list[str],
    repeat: int,
    crawl_delay: bool = False,
) -> dict[str, dict[str, Any] | None]:
    """Each contender's median round (by seconds), with every round; None for Scrapy
    when it cannot be had.

    Parameters:
      hosts(int): Hosts, each a loopback address of its own.
      pages(int): Pages of each host.
      links(int): Links on each page.
      rate(float): Requests a second per host at most.
      contenders(list): Names from :data:`CONTENDERS`, in the order they run.
      repeat(int): Rounds, taking turns.
      crawl_delay(bool): The pace asked for by robots.txt's ``Crawl-delay``, not given
        to the crawler as ``--max-rate``.
    """
    scrapy = None
    if any(name.startswith("scrapy") for name in contenders):
        scrapy = scrapy_command()
        if scrapy is None:
            print("scrapy: not installed", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)  # nginx workers read the sites as an unprivileged user
        port = free_port()
        addresses = [f"127.0.0.{2 + i}" for i in range(hosts)]
        delay = 1 / rate if crawl_delay else None
        roots = write_hosts(tmp / "sites", addresses, port, pages=pages, links=links, delay=delay)
        seeds = tmp / "seeds.txt"
        seeds.write_text("".join(f"http://{address}:{port}/page/0.html\n" for address in addresses))
        log = tmp / "access.log"
        with serve_hosts(roots, port, log, state=tmp):
            for round_ in range(1, repeat + 1):
                for name in contenders:
                    if name.startswith("scrapy") and scrapy is None:
                        continue
                    run_dir = tmp / f"round-{round_}-{name}"
                    run_dir.mkdir()
                    log.write_text("")  # nginx appends: this contender's requests only
                    paced = [] if name in UNTHROTTLED or crawl_delay else rate_options(rate)
                    if name.startswith("workers"):
                        figures = crawl_with_workers(seeds, run_dir, paced)
                    elif name.startswith("local"):
                        figures = crawl_locally(seeds, paced)
                    else:
                        assert scrapy is not None
                        settings = polite_scrapy_settings(
                            rate, autothrottle=name.endswith("throttle")
                        )
                        figures = crawl_with_scrapy(scrapy, seeds, run_dir, settings)
                    time.sleep(0.5)  # nginx's last lines written
                    figures.update(log_figures(log, hosts=hosts, pages=pages, rate=rate))
                    runs[name].append(figures)
                    print(f"round {round_} {name}: {json.dumps(figures)}", file=sys.stderr)
    return {name: (median_round(rounds) if rounds else None) for name, rounds in runs.items()}


def write_hosts(
    directory: Path,
    addresses: list[str],
    port: int,
    *,
    pages: int,
    links: int,
    delay: float | None = None,
) -> dict[str, Path]:
    """A generated site for each address, its links within it, with a ``robots.txt``
    allowing every page (and asking for ``Crawl-delay: delay``, when given); each
    site's directory, by address."""
    roots = {}
    for address in addresses:
        root = directory / address
        root.mkdir(parents=True)
        write_site(root, f"http://{address}:{port}", pages, links)
        asked = f"Crawl-delay: {delay:g}\n" if delay else ""
        (root / "robots.txt").write_text(f"User-agent: *\n{asked}Disallow:\n")
        roots[address] = root
    return roots


@contextmanager
def serve_hosts(
    roots: dict[str, Path], port: int, access_log: Path, *, state: Path
) -> Iterator[None]:
    """One nginx serving each site of ``roots`` on its address and ``port``, until the end.

    Each request is logged to ``access_log`` as ``$msec $server_addr $uri $status``
    (:func:`log_figures` reads it).  nginx's configuration, pid file and error log go
    in ``state``.
    """
    nginx = shutil.which("nginx")
    if nginx is None:  # installed when it can be, as run.py's sites are
        apt_install("nginx")
        nginx = shutil.which("nginx")
    if nginx is None:
        raise SystemExit("nginx is not installed: apt-get install nginx (it serves every host)")
    servers = "".join(
        f" server {{ listen {address}:{port}; root {root}; }}" for address, root in roots.items()
    )
    conf = state / "nginx.conf"
    conf.write_text(
        f"daemon off; worker_processes 1; pid {state}/nginx.pid;"
        f"error_log {state}/nginx-error.log;"
        "events { worker_connections 1024; }"
        "http { log_format hosts '$msec $server_addr $uri $status';"
        f" access_log {access_log} hosts; keepalive_requests 100000; {MIME_TYPES}{servers} }}"
    )
    process = subprocess.Popen([nginx, "-c", str(conf), "-p", str(state)])
    try:
        deadline = time.monotonic() + 10
        for address in roots:
            while True:
                try:
                    socket.create_connection((address, port), timeout=1).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        error = (state / "nginx-error.log").read_text(errors="replace")
                        raise RuntimeError(
                            f"nginx did not serve {address}:{port}: {error}"
                        ) from None
                    time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait()


def log_figures(access_log: Path, *, hosts: int, pages: int, rate: float) -> dict[str, Any]:
    """What nginx's log says of one contender's crawl.

    Seconds from the first request to the last and their ratio to the ideal (``pages /
    rate``); distinct pages answered 200 (all hosts, and the fewest of one host);
    duplicates (page requests answered 200 beyond each page's first); the most requests
    one host got in any one-second window, robots.txt's included, and the most requests
    for pages; the bound those should keep within (``bound_per_s``): R and a tenth of
    R, at least one request (turns that come back late together), as requests are
    counted in any window.
    """
    times: dict[str, list[float]] = defaultdict(list)
    page_times: dict[str, list[float]] = defaultdict(list)
    fetched: dict[str, set[str]] = defaultdict(set)
    page_requests = 0
    for line in access_log.read_text().splitlines():
        msec, address, path, status = line.split()
        times[address].append(float(msec))
        if path.startswith("/page/"):
            page_times[address].append(float(msec))
            if status == "200":
                page_requests += 1
                fetched[address].add(path)
    every = [when for whens in times.values() for when in whens]
    seconds = max(every) - min(every) if every else float("nan")
    ideal = pages / rate
    distinct = sum(len(paths) for paths in fetched.values())
    per_host = [len(paths) for paths in fetched.values()]
    bound = rate + max(1, int(rate / 10))
    busiest_for_pages = max(map(busiest_second, page_times.values()), default=0)
    return {
        "seconds": round(seconds, 2),
        "ideal_s": round(ideal, 2),
        "x_ideal": round(seconds / ideal, 3),
        "pages": distinct,
        "expected_pages": hosts * pages,
        "fewest_pages_of_a_host": min(per_host) if len(per_host) == hosts else 0,
        "duplicates": page_requests - distinct,
        "max_per_s": max(map(busiest_second, times.values()), default=0),
        "max_page_requests_per_s": busiest_for_pages,
        "bound_per_s": bound,
        "rate_held": busiest_for_pages <= bound,
    }


def busiest_second(times: list[float]) -> int:
    """The most of ``times`` (seconds) within any one second."""
    times = sorted(times)
    most, first = 0, 0
    for last, when in enumerate(times):
        while when - times[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


def children_cpu() -> float:
    """CPU seconds of this process's children reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rate_options(rate: float) -> list[str]:
    """The crawl's options that hold each host to ``rate`` requests a second."""
    return ["--max-rate", f"{rate:g}"]


def crawl_with_workers(
    seeds: Path, run_dir: Path, options: Sequence[str], *, check: bool = True
) -> dict[str, Any]:
    """Workers (2 processes x 8 threads) on RabbitMQ crawl from ``seeds``, seeded with
    ``crawler crawl --workers -i SEEDS OPTIONS --wait`` (here ``OPTIONS`` are ``--max-rate R``):
    CPU per page, deferrals, wall time, the seeder's exit status (which must be 0 when
    ``check``)."""
    env = broker_env("rabbitmq", dramatiq_prom_db=str(run_dir / "prometheus"))
    (run_dir / "prometheus").mkdir()
    flush_services(env)
    workers = start_workers(
        env, "crawler.example", processes=DEFAULT_PROCESSES, threads=DEFAULT_THREADS
    )
    try:
        meter = CrawlCpu.start(workers.pid, "rabbitmq")
        started = time.monotonic()
        seeder = subprocess.run(
            [*CRAWLER, "crawl", "--workers", "-i", str(seeds), *options, "--wait"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
        )  # fmt: skip
        wall = time.monotonic() - started
        cpu = meter.by_part()
        metrics = read_metrics(timeout=10)
    finally:
        stop(workers)
    assert seeder.returncode == 0 or not check, seeder.stdout + seeder.stderr[-2000:]
    crawled = metric(metrics, 'crawler_pages_total{outcome="crawled"}')
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(cpu.values()), 3),
        "cpu_s_by_part": {part: round(seconds, 3) for part, seconds in cpu.items()},
        "deferrals": int(metric(metrics, 'crawler_rate_limit_waits_total{result="deferred"}')),
        "messages_per_page": round(metric(metrics, "crawler_pages_total") / max(crawled, 1), 3),
        "summary": last_line(seeder.stdout),
        "exit": seeder.returncode,
    }


def last_line(output: str) -> str:
    """A command's last line of output (its summary), empty when it wrote none."""
    lines = output.strip().splitlines()
    return lines[-1] if lines else ""


def crawl_locally(seeds: Path, options: Sequence[str], *, check: bool = True) -> dict[str, Any]:
    """``crawler crawl --local -i SEEDS OPTIONS --threads 16`` (here ``OPTIONS`` are
    ``--max-rate R``): its CPU (the command and its processes), wall time and exit
    status (which must be 0 when ``check``)."""
    env = dict(os.environ, MEMCACHED_SERVERS="127.0.0.1:9")  # none: --local needs none
    threads = DEFAULT_PROCESSES * DEFAULT_THREADS
    before, started = children_cpu(), time.monotonic()
    result = subprocess.run(
        [*CRAWLER, "crawl", "--local", "-i", str(seeds), *options, "--threads", str(threads)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    wall, cpu = time.monotonic() - started, children_cpu() - before
    assert result.returncode == 0 or not check, result.stdout + result.stderr[-2000:]
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 3),
        "summary": last_line(result.stdout),
        "exit": result.returncode,
    }


def polite_scrapy_settings(rate: float, *, autothrottle: bool) -> dict[str, Any]:
    """Scrapy's settings for one request at a time a host, ``1 / rate`` seconds apart
    (with ``autothrottle``, ``AUTOTHROTTLE_ENABLED``, its other settings Scrapy's: at
    least so far apart), robots.txt obeyed, no retries.

    Parameters:
      rate(float): Requests a second per host at most.
      autothrottle(bool): Whether ``AUTOTHROTTLE_ENABLED``.
    """
    return {
        "CONCURRENT_REQUESTS": DEFAULT_PROCESSES * DEFAULT_THREADS,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 1 / rate,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "AUTOTHROTTLE_ENABLED": autothrottle,
        "ROBOTSTXT_OBEY": True,
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
    }


def crawl_with_scrapy(
    scrapy: Path, seeds: Path, run_dir: Path, settings: dict[str, Any]
) -> dict[str, Any]:
    """Scrapy (``benchmarks/scrapy_spider.py``) crawls from ``seeds`` with ``settings``
    (and no telnet console, its log and stats in ``run_dir``): its CPU and wall time.

    Parameters:
      scrapy(Path): Scrapy's command (:func:`scrapy_command`).
      seeds(Path): The seed file.
      run_dir(Path): Where its log and stats go.
      settings(dict): Scrapy's settings, by name (``-s NAME=VALUE``).
    """
    log = run_dir / "scrapy.log"
    settings = {
        **settings,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "LOG_FILE": log,
        "STATS_DUMP": True,
    }
    before, started = children_cpu(), time.monotonic()
    subprocess.run(
        [str(scrapy), "runspider", str(ROOT / "benchmarks" / "scrapy_spider.py"),
         "-a", f"seeds={seeds}",
         *(part for name, value in settings.items() for part in ("-s", f"{name}={value}"))],
        cwd=run_dir, check=True, timeout=TIMEOUT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wall, cpu = time.monotonic() - started, children_cpu() - before
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 3)}


def scrapy_command() -> Path | None:
    """Scrapy's command: this Python's (``pip install -e '.[bench]'``), else that of
    :data:`SCRAPY_VENV`, made the first time with pip; None when it cannot be had."""
    here = shutil.which("scrapy", path=str(BIN))
    if here:
        return Path(here)
    installed = SCRAPY_VENV / "installed.txt"  # written last: a half-made one is made again
    if not installed.exists():
        print(f"making {SCRAPY_VENV} for Scrapy ({SCRAPY_REQUIREMENT})", flush=True)
        shutil.rmtree(SCRAPY_VENV, ignore_errors=True)
        SCRAPY_VENV.parent.mkdir(parents=True, exist_ok=True)
        pip = [str(SCRAPY_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        try:
            subprocess.run([sys.executable, "-m", "venv", str(SCRAPY_VENV)], check=True)
            subprocess.run([*pip, SCRAPY_REQUIREMENT], check=True, timeout=TIMEOUT)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return None
        installed.write_text(SCRAPY_REQUIREMENT + "\n")
    return SCRAPY_VENV / "bin" / "scrapy"


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of median seconds (the lower of two), with CPU ms a page, and every round."""
    for figures in rounds:
        figures["cpu_ms_per_page"] = round(1000 * figures["cpu_s"] / max(figures["pages"], 1), 2)
    ordered = sorted(rounds, key=lambda figures: figures["seconds"])
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["rounds"] = rounds
    return median


def table(
    results: dict[str, dict[str, Any] | None], *, hosts: int, pages: int, rate: float, repeat: int
) -> str:
    """One line a contender: seconds, x ideal, CPU ms a page, pages, duplicates and
    deferrals, the busiest second of a host (every request, and pages' only), and
    whether the pages' kept within the bound."""
    lines = [
        f"{hosts} hosts x {pages} pages at {rate:g} requests/s a host: ideal "
        f"{pages / rate:.1f} s; median of {repeat} round(s); seconds on nginx's clock; "
        f"held: pages max/s <= {rate + max(1, int(rate / 10)):g}",
        f"{'contender':<20} {'seconds':>8} {'x ideal':>8} {'CPU ms/page':>11} {'pages':>6} "
        f"{'duplicates':>10} {'deferrals':>9} {'max/s':>6} {'pages max/s':>11} {'held':>4}",
    ]
    for name, figures in results.items():
        if figures is None:
            lines.append(f"{name:<20} not installed")
            continue
        deferrals = figures.get("deferrals")
        lines.append(
            f"{name:<20} {figures['seconds']:>8.2f} {figures['x_ideal']:>8.2f} "
            f"{figures['cpu_ms_per_page']:>11.2f} {figures['pages']:>6} "
            f"{figures['duplicates']:>10} {'-' if deferrals is None else deferrals:>9} "
            f"{figures['max_per_s']:>6} {figures['max_page_requests_per_s']:>11} "
            f"{'yes' if figures['rate_held'] else 'NO':>4}"
        )
    for name in UNTHROTTLED:
        polite, unthrottled = results.get(name.split("_")[0]), results.get(name)
        if polite and unthrottled and unthrottled["cpu_ms_per_page"]:
            ratio = polite["cpu_ms_per_page"] / unthrottled["cpu_ms_per_page"]
            lines.append(f"{name.split('_')[0]}: CPU a page {ratio:.2f}x the unthrottled crawl's")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
