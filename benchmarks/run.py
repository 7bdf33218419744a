"""One benchmark run, side by side: this crawler on RabbitMQ and on Redis, ``--local``,
Scrapy, and a no-op Dramatiq actor as the ceiling, all on the same local site.

    python benchmarks/run.py --pages 2000 --links 10 --repeat 3   # the full run
    python benchmarks/run.py --pages 150 --links 5 --quick --repeat 2  # the smoke run CI does

Prints one table with ratios and writes the figures as JSON (``--json``).
Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pylibmc
import redis

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROCESSES, THREADS = 2, 8
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_site(directory: Path, base: str, pages: int, links: int) -> None:
    """``pages`` HTML files, each with ``links`` absolute links; page i links to i+1."""
    rng = random.Random(1)
    (directory / "page").mkdir()
    for i in range(pages):
        targets = [(i + 1) % pages] + [rng.randrange(pages) for _ in range(links - 1)]
        anchors = "".join(f'<a href="{base}/page/{t}.html">p{t}</a>\n' for t in targets)
        (directory / "page" / f"{i}.html").write_text(f"<html><body>\n{anchors}</body></html>\n")


class QuietHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as nginx

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(directory: Path, port: int) -> Iterator[str]:
    """nginx when installed (it is not the bottleneck), else Python's threaded server."""
    nginx = shutil.which("nginx")
    if nginx:
        conf = directory.parent / "nginx.conf"
        conf.write_text(
            f"daemon off; worker_processes 1; pid {directory.parent}/nginx.pid;"
            f"error_log {directory.parent}/nginx-error.log;"
            "events { worker_connections 1024; }"
            "http { access_log off; keepalive_requests 100000; types { text/html html; }"
            f" server {{ listen 127.0.0.1:{port}; root {directory}; }} }}"
        )
        process = subprocess.Popen([nginx, "-c", str(conf), "-p", str(directory.parent)])
        kind = "nginx"
    else:
        handler = partial(QuietHandler, directory=str(directory))
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        kind = "python http.server"
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the site server did not start"
            time.sleep(0.05)
    try:
        yield kind
    finally:
        if nginx:
            process.terminate()
            process.wait()
        else:
            server.shutdown()


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def service_pids() -> dict[str, list[int]]:
    def pgrep(pattern: str) -> list[int]:
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
        return [int(pid) for pid in found.split()]

    return {
        "rabbitmq": pgrep("beam.smp"),
        "redis": pgrep("redis-server"),
        "memcached": pgrep("memcached"),
    }


def children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(child) for child in found.split()]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def flush_services(env: dict[str, str]) -> None:
    pylibmc.Client(["127.0.0.1"], binary=True).flush_all()
    if env.get("REDIS") == "1":
        redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    else:
        sys.path.insert(0, str(ROOT))
        from tests.conftest import purge_rabbitmq

        purge_rabbitmq()


def start_workers(env: dict[str, str], module: str) -> subprocess.Popen[bytes]:
    workers = subprocess.Popen(
        [str(BIN / "dramatiq"), module, "-p", str(PROCESSES), "-t", str(THREADS)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(children(workers.pid)) < PROCESSES:
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.1)
    time.sleep(1.0)  # let each worker process import and connect before the clock starts
    return workers


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def metric(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def broker_env(broker: str, **settings: str) -> dict[str, str]:
    """This process's environment plus ``settings``, pointed at ``broker`` (Redis: db 14)."""
    env = dict(os.environ, **settings)
    env.pop("REDIS", None)
    if broker == "redis":
        env.update(REDIS="1", REDIS_URL="redis://127.0.0.1:6379/14")
    return env


def crawl_with_workers(broker: str, seed: str, tmp: Path) -> dict[str, Any]:
    env = broker_env(broker, dramatiq_prom_db=str(tmp / f"prom-{broker}"))
    Path(env["dramatiq_prom_db"]).mkdir()
    flush_services(env)
    workers = start_workers(env, "crawler.example")
    pids = children(workers.pid)
    services = service_pids()
    parts = {
        "workers": pids,
        "worker parent": [workers.pid],  # dramatiq's main process: relays the workers' logs
        broker: services[broker],
        "memcached": services["memcached"],
    }
    cpu_before = {pid: cpu_seconds(pid) for group in parts.values() for pid in group}
    seeder_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seeder = subprocess.Popen(
        [sys.executable, "-m", "crawler.example", seed, "--wait"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert seeder.stdout is not None
    seeded_line = seeder.stdout.readline()  # "crawl <id> seeded with 1 URL(s)": the clock starts
    started = time.monotonic()
    stdout, stderr = seeder.communicate(timeout=900)
    elapsed = time.monotonic() - started
    seeder_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_by_part = {
        part: sum(cpu_seconds(pid) - cpu_before[pid] for pid in group)
        for part, group in parts.items()
    }
    cpu_by_part["seeder"] = (seeder_after.ru_utime + seeder_after.ru_stime) - (
        seeder_before.ru_utime + seeder_before.ru_stime
    )
    cpu = sum(cpu_by_part.values())
    rss = max(peak_rss_mib(pid) for pid in pids)
    metrics = urllib.request.urlopen("http://127.0.0.1:9191/metrics", timeout=10).read().decode()
    stop(workers)
    assert seeder.returncode == 0, seeded_line + stdout + stderr
    crawled = metric(metrics, 'crawler_pages_total{outcome="crawled"}')
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


def crawl_locally(seed: str) -> dict[str, Any]:
    env = dict(os.environ, MEMCACHED_SERVERS="127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-m", "crawler.example", "--local", seed,
         "--threads", str(PROCESSES * THREADS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # "Finished after 2.9s: 2000 pages fetched (689.7 pages/s), ...": its own clock,
    # from the first seed to the end, as for the workers and Scrapy.
    summary = re.search(r"(\d+) pages fetched \(([\d.]+) pages/s\)", result.stdout)
    assert summary, result.stdout
    pages, rate = int(summary.group(1)), float(summary.group(2))
    return {"pages": pages, "seconds": pages / rate, "pages_per_s": rate}


def crawl_with_scrapy(seed: str, tmp: Path) -> dict[str, Any] | None:
    if shutil.which("scrapy", path=str(BIN)) is None:
        return None
    stats = tmp / "scrapy-stats.json"
    started = time.monotonic()
    subprocess.run(
        [str(BIN / "scrapy"), "runspider", str(ROOT / "benchmarks" / "scrapy_spider.py"),
         "-a", f"start={seed}", "-s", f"CONCURRENT_REQUESTS={PROCESSES * THREADS}",
         "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={PROCESSES * THREADS}",
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


def noop_ceiling(broker: str, messages: int, tmp: Path) -> dict[str, Any]:
    env = broker_env(
        broker, dramatiq_prom_db=str(tmp / f"prom-noop-{broker}"), PYTHONPATH=str(ROOT)
    )
    Path(env["dramatiq_prom_db"]).mkdir()
    flush_services(env)
    # The messages are sent first, by one process; that CPU is measured too, from the
    # second message on (the first connects).
    broker_pids = service_pids()[broker]
    broker_before = sum(map(cpu_seconds, broker_pids))
    sender = subprocess.run(
        [sys.executable, "-c",
         "import resource\n"
         "from benchmarks.noop import noop, broker\n"
         "noop.send()\n"
         "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
         "before = usage.ru_utime + usage.ru_stime\n"
         f"for _ in range({messages} - 1): noop.send()\n"
         "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
         "print(usage.ru_utime + usage.ru_stime - before)\n"
         "broker.close()"],
        cwd=ROOT, env=env, check=True, timeout=300, capture_output=True, text=True,
    )  # fmt: skip
    sending = {
        "sender_cpu_ms_per_message": 1000 * float(sender.stdout) / (messages - 1),
        "broker_cpu_ms_per_sent_message": 1000
        * (sum(map(cpu_seconds, broker_pids)) - broker_before)
        / messages,
    }
    workers = subprocess.Popen(
        [str(BIN / "dramatiq"), "benchmarks.noop", "-p", str(PROCESSES), "-t", str(THREADS)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # The rate between 10% and 90% of the messages done: the workers' steady pace,
    # with their start-up and the last stragglers left out; and the CPU it took.
    deadline = time.monotonic() + 300
    marks: list[tuple[float, float, float, float]] = []  # time, count, workers' CPU, broker's
    processed = 0.0
    while processed < messages and time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            text = (
                urllib.request.urlopen("http://127.0.0.1:9191/metrics", timeout=5).read().decode()
            )
        except OSError:
            continue
        processed = metric(text, "dramatiq_messages_total")
        if 0.1 * messages <= processed <= 0.9 * messages:
            workers_cpu = sum(map(cpu_seconds, [workers.pid, *children(workers.pid)]))
            broker_cpu = sum(map(cpu_seconds, broker_pids))
            marks.append((time.monotonic(), processed, workers_cpu, broker_cpu))
    stop(workers)
    assert len(marks) >= 2, "too few readings between 10% and 90%: use more --noop-messages"
    first, last = marks[0], marks[-1]
    done = last[1] - first[1]
    assert done > 0, "no message done between two readings: use more --noop-messages"
    return {
        "messages": processed,
        "window_seconds": last[0] - first[0],
        "window_messages": done,
        "messages_per_s": done / (last[0] - first[0]),
        "workers_cpu_ms_per_message": 1000 * (last[2] - first[2]) / done,
        "broker_cpu_ms_per_message": 1000 * (last[3] - first[3]) / done,
        **sending,
    }


def main() -> int:
    global PROCESSES, THREADS
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--noop-messages", type=int, default=20000)
    parser.add_argument("--processes", type=int, default=PROCESSES, help="worker processes")
    parser.add_argument(
        "--threads",
        type=int,
        default=THREADS,
        help="per worker process; Scrapy and --local get processes x threads",
    )
    parser.add_argument("--quick", action="store_true", help="skip Scrapy and the ceilings")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds, taking turns; the median is reported"
    )
    parser.add_argument("--json", type=Path, default=Path("benchmark.json"))
    args = parser.parse_args()
    PROCESSES, THREADS = args.processes, args.threads

    results: dict[str, Any] = {
        "pages": args.pages, "links": args.links, "processes": PROCESSES, "threads": THREADS
    }  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)  # nginx workers read the site as an unprivileged user
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        (tmp / "site").mkdir()
        write_site(tmp / "site", base, args.pages, args.links)
        seed = f"{base}/page/0.html"
        with serve(tmp / "site", port) as server:
            results["server"] = server
            # Rounds take turns, so that a slow spell of a shared machine hits every
            # contender alike; each figure is the median of its rounds.
            for round_ in range(args.repeat):
                prefix = tmp / f"round-{round_}"
                prefix.mkdir()
                for broker in ("rabbitmq", "redis"):
                    runs.setdefault(broker, []).append(crawl_with_workers(broker, seed, prefix))
                runs.setdefault("local", []).append(crawl_locally(seed))
                if not args.quick:
                    scrapy = crawl_with_scrapy(seed, prefix)
                    if scrapy is not None:
                        runs.setdefault("scrapy", []).append(scrapy)
        if not args.quick:
            for broker in ("rabbitmq", "redis"):
                for round_ in range(args.repeat):
                    prefix = tmp / f"round-{round_}"
                    runs.setdefault(f"noop_{broker}", []).append(
                        noop_ceiling(broker, args.noop_messages, prefix)
                    )
    results["repeat"] = args.repeat
    for run, figures in runs.items():
        results[run] = median_run(figures)
        results[run]["rounds"] = figures

    args.json.write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


def median_run(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median rate (the lower middle one of an even number)."""
    key = "pages_per_s" if "pages_per_s" in rounds[0] else "messages_per_s"
    ordered = sorted(rounds, key=lambda figures: float(figures[key]))
    return dict(ordered[(len(ordered) - 1) // 2])


def table(results: dict[str, Any]) -> str:
    scrapy = (results.get("scrapy") or {}).get("pages_per_s")
    lines = [
        f"site: {results['pages']} pages x {results['links']} links, "
        f"served by {results['server']}; "
        f"workers {results['processes']} processes x {results['threads']} threads; "
        f"median of {results['repeat']} round(s)",
        f"{'run':<10} {'pages/s':>8} {'msgs/page':>9} {'CPU ms/page':>11} {'RSS MiB':>8} "
        f"{'/Scrapy':>7} {'/no-op':>7}",
    ]
    for run in ("rabbitmq", "redis", "local", "scrapy"):
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
    for broker in ("rabbitmq", "redis"):
        ceiling = results.get(f"noop_{broker}")
        if ceiling:
            lines.append(f"no-op actor on {broker}: {ceiling['messages_per_s']:.0f} messages/s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
