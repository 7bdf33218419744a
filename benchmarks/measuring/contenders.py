"""One crawl of the site by each contender: this crawler's workers on a broker,
``--local``, and Scrapy, each with its figures: pages, seconds, rate, and for the
workers, CPU and memory per page.

Every clock starts at seeding and stops at the crawl's end, so that no contender
pays for its process start-up.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dramatiq.brokers.rabbitmq import RabbitmqBroker

from benchmarks.measuring.accounting import (
    CrawlCpu,
    metric,
    peak_rss_mib,
    read_metrics,
)
from benchmarks.measuring.workers import (
    BIN,
    ROOT,
    broker_env,
    flush_services,
    start_workers,
    stop,
)
from crawler.brokers import QUEUE
from crawler.environment import rabbitmq_url


def crawl_with_workers(
    broker: str,
    seed: str,
    tmp: Path,
    *,
    processes: int,
    threads: int,
    options: tuple[str, ...] = (),
    exits: tuple[int, ...] = (0,),
    samples: Path | None = None,
    plain_queues: bool = False,
) -> dict[str, Any]:
    """Workers (``dramatiq crawler.example``) crawl from ``seed``, seeded with ``--wait``.

    The clock runs from the seeder's ``seeded`` line to its exit. CPU per page adds up
    the worker processes and their parent, the broker, Memcached and the seeder.

    Parameters:
      broker(str): ``"rabbitmq"`` or ``"redis"``.
      seed(str): The first page's URL.
      tmp(Path): A directory of this round's, for the workers' metrics, and their
        ``CRAWLER_WARC_DIR`` (a ``--warc`` directory inside it is written).
      processes(int): Worker processes.
      threads(int): Worker threads in each process.
      options(tuple): Crawl options for the seeder, such as ``--follow-relative``.
      exits(tuple): The seeder's exit statuses that are no error (1: some page failed,
        as the Python docs' one broken link does).
      samples(Path): A directory where py-spy writes the stacks of each worker process
        while it holds the GIL (``<pid>.txt``, py-spy's raw format), or None.
      plain_queues(bool): RabbitMQ's queues declared before without priorities (as by
        a crawler from before them), not with them as the crawler declares them.
    """
    env = broker_env(broker, dramatiq_prom_db=str(tmp / f"prom-{broker}"))
    env["CRAWLER_WARC_DIR"] = str(tmp)
    Path(env["dramatiq_prom_db"]).mkdir()
    flush_services(env)
    if plain_queues:
        declare_plain_queues()
    workers = start_workers(env, "crawler.example", processes=processes, threads=threads)
    meter = CrawlCpu.start(workers.pid, broker)
    pids = meter.parts["workers"]
    samplers = [sample_stacks(pid, samples / f"{pid}.txt") for pid in pids] if samples else []
    seeder = subprocess.Popen(
        [sys.executable, "-m", "crawler.example", seed, "--wait", *options],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert seeder.stdout is not None
    seeded_line = seeder.stdout.readline()  # "crawl <id> seeded with 1 URL(s)": the clock starts
    started = time.monotonic()
    stdout, stderr = seeder.communicate(timeout=900)
    elapsed = time.monotonic() - started
    cpu_by_part = meter.by_part()  # before py-spy's samplers, children too, are reaped
    for sampler in samplers:
        sampler.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        sampler.wait(timeout=60)
    cpu = sum(cpu_by_part.values())
    rss = max(peak_rss_mib(pid) for pid in pids)
    metrics = read_metrics(timeout=10)
    stop(workers)
    assert seeder.returncode in exits, seeded_line + stdout + stderr
    # HTML pages fetched: with --warc, those whose payload was stored before too.
    crawled = metric(metrics, 'crawler_pages_total{outcome="crawled"}') + metric(
        metrics, 'crawler_pages_total{outcome="duplicate-content"}'
    )
    messages = metric(metrics, "crawler_pages_total")
    return {
        "pages": crawled,
        "seconds": elapsed,
        "pages_per_s": crawled / elapsed,
        "messages_per_page": messages / max(crawled, 1),
        "cpu_ms_per_page": 1000 * cpu / max(crawled, 1),
        "cpu_ms_per_page_by_part": {
            part: round(1000 * seconds / max(crawled, 1), 3)
            for part, seconds in cpu_by_part.items()
        },
        "peak_worker_rss_mib": rss,
    }


def declare_plain_queues() -> None:
    """The crawler's RabbitMQ queues, declared as Dramatiq does without priorities."""
    broker = RabbitmqBroker(url=rabbitmq_url())
    broker.declare_queue(QUEUE, ensure=True)
    broker.close()


def sample_stacks(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid``'s threads while they hold the GIL (its Python CPU), 500
    times a second without pausing it, once it is attached (its log: ``output.log``)."""
    log = output.with_suffix(".log")
    with log.open("wb") as log_file:
        sampler = subprocess.Popen(
            [str(BIN / "py-spy"), "record", "--pid", str(pid), "--output", str(output),
             "--format", "raw", "--rate", "500", "--threads", "--gil", "--nonblocking"],
            stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while b"Sampling process" not in log.read_bytes():
        if sampler.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"py-spy could not sample process {pid}: {log.read_text()}")
        time.sleep(0.05)
    return sampler


def crawl_locally(
    seed: str, *, threads: int, options: tuple[str, ...] = (), exits: tuple[int, ...] = (0,)
) -> dict[str, Any]:
    """``crawler.example --local`` crawls from ``seed``, on its own clock.

    Parameters:
      seed(str): The first page's URL.
      threads(int): Its ``--threads``: as many as the workers have in all.
      options(tuple): Crawl options, such as ``--follow-relative``.
      exits(tuple): Its exit statuses that are no error (see :func:`crawl_with_workers`).
    """
    env = dict(os.environ, MEMCACHED_SERVERS="127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-m", "crawler.example", "--local", seed, "--threads", str(threads),
         *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode in exits, result.stdout + result.stderr
    # "Finished after 2.9s: 2000 pages fetched (689.7 pages/s), ...": its own clock,
    # from the first seed to the end, as for the workers and Scrapy.
    summary = re.search(r"(\d+) pages fetched \(([\d.]+) pages/s\)", result.stdout)
    assert summary, result.stdout
    pages, rate = int(summary.group(1)), float(summary.group(2))
    return {"pages": pages, "seconds": pages / rate, "pages_per_s": rate}


def crawl_with_defaults(seed: str, *options: str) -> dict[str, Any]:
    """``crawler crawl --local SEED`` with its defaults (and ``options``), as a user runs it.

    Parameters:
      seed(str): The first page's URL.
      options(tuple): More of its flags, such as ``--processes 1``.
    """
    env = dict(os.environ, MEMCACHED_SERVERS="127.0.0.1:9")
    command = "import sys; from crawler.command import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-c", command, "crawl", "--local", seed, *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: the docs' 404 link
    summary = re.search(r"(\d+) pages fetched \(([\d.]+) pages/s\)", result.stdout)
    assert summary, result.stdout
    return {"pages": int(summary.group(1)), "own_pages_per_s": float(summary.group(2))}


def crawl_with_scrapy(
    seed: str, tmp: Path, *, concurrency: int, spider: str = "scrapy_spider.py"
) -> dict[str, Any] | None:
    """Scrapy (``benchmarks/<spider>``) crawls from ``seed``; None if not installed.

    No robots.txt, cookies or retries. The figures are on Scrapy's own clock, from its
    engine's start to its end; ``seconds_with_start_up`` is the whole command's.

    Parameters:
      seed(str): The first page's URL.
      tmp(Path): A directory of this round's, for Scrapy's log and stats.
      concurrency(int): Its ``CONCURRENT_REQUESTS``, in all and per domain: as many as
        the workers have threads in all.
      spider(str): The spider's file in ``benchmarks/``.
    """
    if shutil.which("scrapy", path=str(BIN)) is None:
        return None
    stats = tmp / "scrapy-stats.json"
    started = time.monotonic()
    subprocess.run(
        [str(BIN / "scrapy"), "runspider", str(ROOT / "benchmarks" / spider),
         "-a", f"start={seed}", "-s", f"CONCURRENT_REQUESTS={concurrency}",
         "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={concurrency}",
         "-s", "STATS_DUMP=True", "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FILE={stats}",
         "-s", "ROBOTSTXT_OBEY=False", "-s", "COOKIES_ENABLED=False", "-s", "RETRY_ENABLED=False",
         "-s", "TELNETCONSOLE_ENABLED=False"],
        cwd=tmp, check=True, timeout=900,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    text = stats.read_text()
    pages = int(text.split("'response_received_count': ")[1].split(",")[0])
    # Scrapy's own clock, from its engine's start to its end: start-up excluded, as for the rest.
    engine = float(text.split("'elapsed_time_seconds': ")[1].split(",")[0])
    return {
        "pages": pages,
        "seconds": engine,
        "pages_per_s": pages / engine,
        "seconds_with_start_up": elapsed,
    }


def crawl_with_wget(seed: str, tmp: Path) -> dict[str, Any]:
    """``wget -r -l inf`` from ``seed``: the reference for a site's page set (it also
    fetches stylesheets, scripts and images), one connection, on its whole command's clock.

    Parameters:
      seed(str): The first page's URL.
      tmp(Path): A directory of this round's, where wget's copy goes (then deleted).
    """
    if shutil.which("wget") is None:
        raise SystemExit("wget is not installed: apt-get install wget (the page set's reference)")
    started = time.monotonic()
    done = subprocess.run(
        ["wget", "--recursive", "--level=inf", "--quiet",
         "--directory-prefix", str(tmp / "wget"), seed],
        timeout=900,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    shutil.rmtree(tmp / "wget", ignore_errors=True)
    # 8: the server answered some request with an error (the docs have a 404 link).
    assert done.returncode in (0, 8), f"wget failed with exit status {done.returncode}"
    return {"seconds": elapsed}
