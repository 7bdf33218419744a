"""Fault loops: each fault again and again on a real crawl, and what it cost.

    python benchmarks/faults.py                          # every fault, 20 runs (50 for Redis)
    python benchmarks/faults.py --fault worker-kill-9 --runs 5 --pages 300
    python benchmarks/faults.py --fault memcached-node-loss --runs 20

Each run crawls a generated site (``--pages`` x 10 links, served on 127.0.0.1) with
``dramatiq crawler.example -p 2 -t 4`` and a seeder in ``--wait --output``, and once a
quarter of the pages are done, does the fault to services of the benchmark's own (a
RabbitMQ node, Redis servers and Memcached servers on ports of their own; the machine's
are not touched).  Some faults have a shape of their own (:data:`SHAPES`: pages,
workers, when the fault comes, variables), and some are timed against the same crawl
without the fault, run before each of their runs (``baseline``):

* ``memcached-node``: one of two Memcached servers in ``MEMCACHED_SERVERS`` killed (-9);
* ``memcached-node-loss``: the same on 5,000 pages with workers ``2 x 8``, the server
  killed after 1,500 pages, timed against the crawl without the kill;
* ``memcached-restart``: the Memcached killed (-9) and started again, empty;
* ``redis-broker-restart``: the Redis broker (append-only, ``appendfsync always``)
  shut down (``SHUTDOWN``) and started again 2 s later;
* ``redis-broker-kill-9``: the same Redis broker killed (-9) and started again;
* ``redis-store-restart``: the ``DEDUP_URL`` Redis shut down and started again;
* ``rabbitmq-restart``: the RabbitMQ node's ``stop_app``, 5 s, ``start_app``;
* ``rabbitmq-memory-alarm``: the RabbitMQ node's memory alarm raised for 15 s (every
  publisher blocked), then lifted;
* ``worker-kill-9``: the worker group killed (-9) and started again;
* ``redis-worker-kill-9-short-claims``: on the Redis broker, with claims of 5 s
  (``CRAWLER_CLAIM_TTL=5``), 20,000 pages with workers ``2 x 8``, the worker group killed
  (-9) and started again twice: a redelivery comes long after its claim expired.

Per fault it prints the runs, the runs whose ``--wait`` ended by itself (within
``--wait-limit`` seconds of the fault), pages never fetched, pages missing from
``--output``, pages fetched twice (in all, and most in one run), and URLs given up; a
JSON line per run with ``--verbose``.  Backoffs and deadlines are shortened through the
``CRAWLER_*`` variables, as the tests do.  It exits 1 when a run hung or lost a page or
a record.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pika
import redis
from dramatiq.common import dq_name, xq_name

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from benchmarks.measuring.seeding import WaitingSeeder, generated_site  # noqa: E402
from crawler.brokers import QUEUE  # noqa: E402
from tests.site_server import SiteServer, page_path  # noqa: E402
from tests.support import (  # noqa: E402
    FAST_FAILURES,
    MemcachedProcess,
    RabbitmqProcess,
    RedisProcess,
    read_records,
)
from tests.workers import WorkerProcesses, environment  # noqa: E402

#: Runs of each fault by default: the Redis broker's restarts showed the rarest losses.
RUNS = {"redis-broker-restart": 50, "redis-broker-kill-9": 50}
DEFAULT_RUNS = 20
PROCESSES, THREADS = 2, 4


@dataclass(frozen=True)
class Shape:
    """How a fault's crawl is run: its pages, its workers, after how many pages done each
    fault comes (one fault a number), its variables, and whether it is timed against
    the same crawl without the fault."""

    pages: int | None = None  # None: --pages
    processes: int = PROCESSES
    threads: int = THREADS
    after: tuple[float, ...] = (0.25,)  # a share of the pages, or a number of them
    env: tuple[tuple[str, str], ...] = ()
    baseline: bool = False


SHAPES = {
    "memcached-node-loss": Shape(pages=5000, threads=8, after=(1500,), baseline=True),
    "redis-worker-kill-9-short-claims": Shape(
        pages=20000, threads=8, after=(0.2, 0.5), env=(("CRAWLER_CLAIM_TTL", "5"),)
    ),
}


@dataclass
class Run:
    """What one crawl through one fault left."""

    fault: str
    ended: bool
    wait_exit: int | None
    never_fetched: int
    missing_from_output: int
    fetched_twice: int
    #: Pages fetched before the fault, and what the README promises of second fetches.
    crawled_before: int
    within_promise: bool
    given_up: int
    seconds: float
    last_line: str
    #: What ``crawler status`` said was outstanding once ``--wait`` exited 0 (must be 0).
    outstanding_at_exit_0: int | None = None
    #: The same crawl's seconds without the fault (for the shapes timed against one).
    seconds_without_fault: float | None = None
    #: For a run that hung or lost something: what the broker held at the end, and
    #: the workers' log lines that name a page never fetched.
    left_on_broker: dict[str, int] | None = None
    about_lost_pages: list[str] | None = None


@dataclass
class Services:
    """The benchmark's own services for one run, and the environment pointing at them."""

    env: dict[str, str]
    rabbitmq: RabbitmqProcess | None = None
    redis_broker: RedisProcess | None = None
    redis_store: RedisProcess | None = None
    memcached: list[MemcachedProcess] | None = None


Fault = Callable[[Services, WorkerProcesses], WorkerProcesses]


def memcached_node(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.memcached is not None and services.memcached[1].process is not None
    services.memcached[1].process.kill()
    return workers


def memcached_restart(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.memcached is not None and services.memcached[0].process is not None
    services.memcached[0].process.kill()
    services.memcached[0].process.wait()
    services.memcached[0].start()
    return workers


def redis_broker_restart(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.redis_broker is not None
    restart(services.redis_broker, kill=False)
    return workers


def redis_broker_kill_9(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.redis_broker is not None
    restart(services.redis_broker, kill=True)
    return workers


def redis_store_restart(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.redis_store is not None
    restart(services.redis_store, kill=False)
    return workers


def restart(server: RedisProcess, *, kill: bool) -> None:
    """Stop ``server`` (``kill -9``, or ``SHUTDOWN`` as an operator would) and start it
    again 2 s later, from its append-only file."""
    if kill and server.process is not None:
        server.process.kill()
        server.process.wait()
        server.process = None
    server.shut_down()
    time.sleep(2)
    server.start()


def rabbitmq_restart(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.rabbitmq is not None
    services.rabbitmq.ctl("stop_app")
    time.sleep(5)
    services.rabbitmq.ctl("start_app")
    return workers


def rabbitmq_memory_alarm(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    assert services.rabbitmq is not None
    services.rabbitmq.ctl("set_vm_memory_high_watermark", "absolute", "1")
    time.sleep(15)
    services.rabbitmq.ctl("set_vm_memory_high_watermark", "0.4")
    return workers


def worker_kill_9(services: Services, workers: WorkerProcesses) -> WorkerProcesses:
    workers.kill()
    return WorkerProcesses(services.env, processes=workers.processes, threads=workers.threads)


FAULTS: dict[str, Fault] = {
    "memcached-node": memcached_node,
    "memcached-node-loss": memcached_node,
    "memcached-restart": memcached_restart,
    "redis-broker-restart": redis_broker_restart,
    "redis-broker-kill-9": redis_broker_kill_9,
    "redis-store-restart": redis_store_restart,
    "rabbitmq-restart": rabbitmq_restart,
    "rabbitmq-memory-alarm": rabbitmq_memory_alarm,
    "worker-kill-9": worker_kill_9,
    "redis-worker-kill-9-short-claims": worker_kill_9,
}


@contextmanager
def services_for(fault: str, directory: Path, rabbitmq: RabbitmqProcess) -> Iterator[Services]:
    """Fresh services for one run of ``fault``: a RabbitMQ virtual host of its own on the
    benchmark's node (or a Redis broker of its own), Memcached (two servers for
    ``memcached-node``) or a ``DEDUP_URL`` Redis."""
    with ExitStack() as stack:
        # Its own metrics files: workers of the machine may be writing the default ones.
        metrics = tempfile.mkdtemp(dir=directory)
        env = environment(**FAST_FAILURES, dramatiq_prom_db=metrics)
        env.update(SHAPES.get(fault, Shape()).env)
        services = Services(env)
        if fault.startswith("redis-broker") or fault.startswith("redis-worker"):
            services.redis_broker = RedisProcess(Path(tempfile.mkdtemp(dir=directory)))
            stack.callback(services.redis_broker.shut_down)
            env.update(REDIS="1", REDIS_URL=services.redis_broker.url)
        else:
            services.rabbitmq = rabbitmq
            vhost = f"run-{time.monotonic_ns()}"
            rabbitmq.ctl("add_vhost", vhost)
            stack.callback(rabbitmq.ctl, "delete_vhost", vhost)
            rabbitmq.ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
            env["RABBITMQ_URL"] = f"{rabbitmq.url}/{vhost}"
        if fault == "redis-store-restart":
            services.redis_store = RedisProcess(Path(tempfile.mkdtemp(dir=directory)))
            stack.callback(services.redis_store.shut_down)
            env["DEDUP_URL"] = services.redis_store.url
        else:
            services.memcached = [
                MemcachedProcess() for _ in range(2 if fault.startswith("memcached-node") else 1)
            ]
            for server in services.memcached:
                stack.callback(server.stop)
            env["MEMCACHED_SERVERS"] = ",".join(server.servers for server in services.memcached)
        yield services


def run(
    fault: str, pages: int, wait_limit: float, directory: Path, rabbitmq: RabbitmqProcess
) -> Run:
    shape = SHAPES.get(fault, Shape())
    pages = shape.pages or pages
    output = Path(tempfile.mkdtemp(dir=directory)) / "records.jsonl"
    baseline = (
        crawl_alone(fault, pages, wait_limit, directory, rabbitmq) if shape.baseline else None
    )
    started = time.monotonic()
    with ExitStack() as stack, services_for(fault, directory, rabbitmq) as services:
        site = stack.enter_context(generated_site(pages, delay=0.005))
        workers = WorkerProcesses(services.env, processes=shape.processes, threads=shape.threads)
        seeder = WaitingSeeder(services.env, site.url(page_path(0)), "--output", str(output))
        outstanding = None
        try:
            crawled_before = 0
            for after in shape.after:
                done = int(after * pages) if after < 1 else int(after)
                # Pages fetched, from the site: a worker group started again counts anew.
                workers.wait_until(partial(fetched_at_least, site, done), timeout=300)
                crawled_before = crawled_before or len(site.fetch_counts())
                workers = FAULTS[fault](services, workers)
            left: dict[str, int] | None = None
            if seeder.process.poll() is None:
                try:
                    seeder.process.wait(timeout=wait_limit)
                except subprocess.TimeoutExpired:
                    left = left_on_broker(services.env)  # before the seeder's exit deletes its list
            ended = not seeder.running()
            seconds = time.monotonic() - started
            if ended and (seeder.returncode != 0 or len(site.fetch_counts()) < pages):
                left = left_on_broker(services.env)
            if ended and seeder.returncode == 0:
                outstanding = outstanding_of(services.env, seeder.crawl_id())
        finally:
            seeder.kill()
            if workers.stop() != 0:
                workers.kill()
    counts = site.fetch_counts()
    lost = [site.url(page_path(i)) for i in range(pages) if page_path(i) not in counts]
    # ... and the pages that link to them: how their links were claimed and sent.
    parents = [
        site.url(path)
        for path, page in site.pages.items()
        if any(f'href="{url}"'.encode() in page.body for url in lost)
    ]
    named = [repr(url) for url in lost + parents]
    about_lost = [line for line in workers.lines if any(url in line for url in named)]
    every_page = {site.url(page_path(i)) for i in range(pages)}
    recorded = {str(r["url"]) for r in read_records(output)} if output.exists() else set()
    return Run(
        fault=fault,
        ended=ended,
        wait_exit=seeder.returncode if ended else None,
        never_fetched=pages - len(counts),
        missing_from_output=len(every_page - recorded),
        fetched_twice=sum(n > 1 for n in counts.values()),
        crawled_before=crawled_before,
        within_promise=sum(n - 1 for n in counts.values()) <= promised(fault, crawled_before),
        given_up=workers.count("Giving up on URL"),
        seconds=round(seconds, 1),
        last_line=seeder.last_line(),
        outstanding_at_exit_0=outstanding,
        seconds_without_fault=None if baseline is None else round(baseline, 1),
        left_on_broker=left,
        about_lost_pages=[f"lost: {', '.join(lost)}", *about_lost[:60]] if lost else None,
    )


def fetched_at_least(site: SiteServer, pages: int) -> bool:
    return len(site.fetch_counts()) >= pages


def crawl_alone(
    fault: str, pages: int, wait_limit: float, directory: Path, rabbitmq: RabbitmqProcess
) -> float:
    """The seconds the crawl of ``fault``'s shape takes on the same services, undisturbed."""
    shape = SHAPES.get(fault, Shape())
    with ExitStack() as stack, services_for(fault, directory, rabbitmq) as services:
        site = stack.enter_context(generated_site(pages, delay=0.005))
        workers = WorkerProcesses(services.env, processes=shape.processes, threads=shape.threads)
        seeder = WaitingSeeder(services.env, site.url(page_path(0)))
        try:
            seeder.process.wait(timeout=wait_limit)
            return time.monotonic() - seeder.started
        finally:
            seeder.kill()
            if workers.stop() != 0:
                workers.kill()


def outstanding_of(env: dict[str, str], crawl_id: str) -> int:
    """What ``crawler status`` says is outstanding of the crawl."""
    shown = subprocess.run(
        [sys.executable, "-m", "crawler.example", "--status", crawl_id],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    found = re.search(r"(-?\d+) outstanding", shown.stdout)
    if found is not None:
        return int(found.group(1))
    raise RuntimeError(f"no outstanding figure in {shown.stdout!r} {shown.stderr[-300:]!r}")


def left_on_broker(env: dict[str, str]) -> dict[str, int]:
    """What a Redis broker holds, key by key (lists, hashes and sets by length); the
    message counts of a RabbitMQ's queues."""
    if env.get("REDIS") == "1":
        client = redis.Redis.from_url(env["REDIS_URL"])
        try:
            sizes = {}
            for key in client.scan_iter(count=1000):
                kind = client.type(key).decode()  # type: ignore[union-attr]
                size = {"list": client.llen, "hash": client.hlen, "set": client.scard}.get(kind)
                sizes[key.decode()] = int(size(key)) if size else -1
            return sizes
        finally:
            client.close()
    connection = pika.BlockingConnection(pika.URLParameters(env["RABBITMQ_URL"]))
    try:
        return {
            queue: queue_size(connection, queue)
            for queue in (QUEUE, dq_name(QUEUE), xq_name(QUEUE))
        }
    finally:
        connection.close()


def queue_size(connection: pika.BlockingConnection, queue: str) -> int:
    try:
        return int(connection.channel().queue_declare(queue, passive=True).method.message_count)
    except pika.exceptions.ChannelClosedByBroker:
        return -1


#: Pages a worker group has in hand at once, and the links each sends again when redone.
IN_HAND = PROCESSES * THREADS * (1 + 10)


def promised(fault: str, crawled_before: int) -> int:
    """The most second fetches the README promises for ``fault``: the pages in hand (and
    the links they send again); for Memcached, each page crawled before it loses its
    claim, once more."""
    if fault.startswith("memcached"):
        return crawled_before + IN_HAND
    return IN_HAND


def summary(runs: list[Run]) -> dict[str, int]:
    """One fault's figures over its runs."""
    twice = [r.fetched_twice for r in runs]
    return {
        "runs": len(runs),
        "ended": sum(r.ended and r.wait_exit == 0 for r in runs),
        "never_fetched": sum(r.never_fetched for r in runs),
        "missing_from_output": sum(r.missing_from_output for r in runs),
        "fetched_twice": sum(twice),
        "most_twice_in_a_run": max(twice, default=0),
        "given_up": sum(r.given_up for r in runs),
        "over_promise": sum(not r.within_promise for r in runs),
    }


def timing(runs: list[Run]) -> str | None:
    """For a fault timed against the crawl without it: both times and their ratio."""
    pairs = [(r.seconds, r.seconds_without_fault) for r in runs if r.seconds_without_fault]
    if not pairs:
        return None
    ratios = sorted(with_fault / alone for with_fault, alone in pairs)
    with_fault = statistics.median(p[0] for p in pairs)
    alone = statistics.median(p[1] for p in pairs)
    return (
        f"crawl time with the fault {with_fault:.1f} s, without {alone:.1f} s (medians);"
        f" ratio median {statistics.median(ratios):.2f}, most {ratios[-1]:.2f}"
    )


def line(fault: str, figures: dict[str, int]) -> str:
    return f"{fault:22}" + "".join(f" {figures[key]:>{width}}" for key, width in COLUMNS.items())


#: The table's columns: each figure's width, its header.
COLUMNS = {
    "runs": 5,
    "ended": 6,
    "never_fetched": 6,
    "missing_from_output": 8,
    "fetched_twice": 7,
    "most_twice_in_a_run": 9,
    "given_up": 8,
    "over_promise": 6,
}


HEADER = (
    f"{'fault':22} {'runs':>5} {'ended':>6} {'lost':>6} {'missing':>8} {'twice':>7}"
    f" {'most/run':>9} {'given up':>8} {'over':>6}"
)
LEGEND = (
    "ended: --wait exited 0 by itself; lost: pages never fetched; missing: pages fetched"
    " but not in --output;\ntwice: pages fetched twice (in all, and most in one run);"
    " given up: URLs dead-lettered;\nover: runs with more second fetches than the README"
    " promises (the pages in hand and their links; for Memcached, the pages crawled before)."
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fault", choices=FAULTS, action="append", help="a fault to run (repeatable; default all)"
    )
    parser.add_argument("--runs", type=int, help=f"runs of each fault (default {DEFAULT_RUNS}, "
                        "50 for the Redis broker's)")  # fmt: skip
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--wait-limit", type=float, default=180, help="seconds (default 180)")
    parser.add_argument("--verbose", action="store_true", help="a JSON line per run")
    parser.add_argument("--json", type=Path, help="write the figures of each fault here")
    arguments = parser.parse_args()
    # Killed with SIGTERM, the services of its own are stopped on the way out all the same.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    faults = arguments.fault or list(FAULTS)
    directory = Path(tempfile.mkdtemp(prefix="crawler-faults-"))
    rabbitmq = RabbitmqProcess()
    lines, failed = [HEADER], False
    figures: dict[str, dict[str, Any]] = {}
    timings: list[str] = []
    try:
        for fault in faults:
            runs = []
            for _ in range(arguments.runs or RUNS.get(fault, DEFAULT_RUNS)):
                outcome = run(fault, arguments.pages, arguments.wait_limit, directory, rabbitmq)
                runs.append(outcome)
                if arguments.verbose:
                    print(json.dumps(asdict(outcome)), flush=True)
                failed |= not outcome.ended or outcome.wait_exit != 0
                failed |= bool(outcome.never_fetched or outcome.missing_from_output)
                failed |= not outcome.within_promise
            figures[fault] = summary(runs)
            lines.append(line(fault, figures[fault]))
            print(lines[-1], file=sys.stderr, flush=True)
            timed = timing(runs)
            if timed:
                figures[fault]["timing"] = timed
                print(f"{fault}: {timed}", file=sys.stderr, flush=True)
                timings.append(f"{fault}: {timed}")
    finally:
        rabbitmq.shut_down()
    print("\n".join([*lines, LEGEND, *timings]))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
