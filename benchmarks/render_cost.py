"""What ``--render`` costs: pages/s, CPU per page and peak memory of a crawl with and
without it, side by side, on a generated site of plain ``<a href>`` links.

    python benchmarks/render_cost.py                                # 500 pages
    python benchmarks/render_cost.py --pages 200 --runs local,rabbitmq,redis --repeat 3

Each round crawls the site with ``--local`` (16 threads) and with workers (2 x 8) on
RabbitMQ (and on Redis, with ``--runs``), once without ``--render`` and once with it,
taking turns; the median round is reported.  Both crawls use ``--follow-relative`` and
must fetch the same pages; every record of the crawl with ``--render`` must say
``rendered``.

CPU and memory are those of every process of the crawl, Chromium and Playwright's
driver included, read from ``/proc`` every 0.2 s: for ``--local``, the crawl's process
and its descendants (from the crawl's own clock's start to its exit); for workers, the
Dramatiq processes and their descendants (from the seeding to the seeder's exit; the
broker's, Memcached's and the seeder's CPU are listed apart in the JSON).  Memory is
the peak of the tree's summed PSS (RSS where PSS cannot be read).  Chromium is
installed with apt-get when missing.  Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    ROOT,
    CrawlCpu,
    broker_env,
    flush_services,
    free_port,
    serve,
    start_workers,
    stop,
    write_site,
)
from benchmarks.measuring.accounting import CLK_TCK
from scripts.services import apt_install

RUNS = ("local", "rabbitmq", "redis")
#: Seconds between two readings of the crawl's processes.
PERIOD = 0.2
#: What the crawls are given besides ``--render``: links found as the browser finds them.
OPTIONS = ("--follow-relative",)


def process_tree(roots: list[int]) -> list[int]:
    """``roots`` and every process descending from them, as ``/proc`` shows them now."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:  # gone
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, ()))
    return found


def tree_cpu(pids: list[int]) -> float:
    """The CPU seconds of ``pids`` and of the children they reaped (user and system)."""
    return sum(cpu_by_kind(pids).values())


def cpu_by_kind(pids: list[int]) -> dict[str, float]:
    """:func:`tree_cpu` by kind of process: Chromium's, Playwright's driver (node), the
    crawler's (Python)."""
    spent: dict[str, float] = {}
    for pid in pids:
        try:
            head, tail = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        name = head.split("(", 1)[1]
        kind = "chromium" if name.startswith("chrom") else "node" if name == "node" else "python"
        ticks = sum(int(field) for field in tail.split()[11:15])  # utime stime cutime cstime
        spent[kind] = spent.get(kind, 0.0) + ticks / CLK_TCK
    return spent


def memory_mib(pid: int) -> float:
    """Process ``pid``'s proportional set size (its resident memory, shared pages split
    between their users), its RSS when that cannot be read, 0 once it is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        return int(rollup.split("\nPss:", 1)[1].split()[0]) / 1024
    except (OSError, IndexError):
        pass
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class TreeSampler(threading.Thread):
    """Reads the CPU and memory of a process tree every :data:`PERIOD` seconds until
    :meth:`finish`: the CPU seconds at each reading, the peak of the summed memory, and
    every process seen (to find browsers left behind).

    Parameters:
      root(int): The tree's root process.
    """

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.readings: list[tuple[float, float]] = []  # (time.monotonic(), CPU seconds)
        self.peak_mib = 0.0
        self.seen: set[int] = set()
        self.by_kind: dict[str, float] = {}  # at the last reading
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            pids = process_tree([self.root])
            now, self.by_kind = time.monotonic(), cpu_by_kind(pids)
            self.readings.append((now, sum(self.by_kind.values())))
            self.peak_mib = max(self.peak_mib, sum(memory_mib(pid) for pid in pids))
            self.seen.update(pids)
            self._done.wait(PERIOD)

    def finish(self) -> None:
        self._done.set()
        self.join()

    def cpu_at(self, moment: float) -> float:
        """The tree's CPU seconds at ``moment``, between the readings around it."""
        before = [reading for reading in self.readings if reading[0] <= moment]
        after = [reading for reading in self.readings if reading[0] > moment]
        if not before:
            return 0.0  # before the first reading: the process had just started
        (t0, c0), (t1, c1) = before[-1], (after[0] if after else before[-1])
        return c0 if t1 == t0 else c0 + (c1 - c0) * (moment - t0) / (t1 - t0)


def left_behind(pids: set[int]) -> list[int]:
    """The browser processes among ``pids`` still alive (zombies aside) a few seconds on."""
    deadline = time.monotonic() + 5
    while True:
        alive = []
        for pid in sorted(pids):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[0] != "Z" and ("chrom" in exe or "playwright" in exe):
                alive.append(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def figures(
    records: list[dict[str, Any]], seconds: float, cpu: float, peak: float, left: list[int]
) -> dict[str, Any]:
    """A crawl's figures from its records, clock, CPU seconds and peak memory."""
    pages = [record for record in records if record.get("outcome") == "crawled"]
    render_ms = [record["render_ms"] for record in pages if "render_ms" in record]
    return {
        "pages": len(pages),
        "records": len(records),
        "seconds": round(seconds, 3),
        "pages_per_s": len(pages) / seconds,
        "cpu_ms_per_page": 1000 * cpu / max(len(pages), 1),
        "peak_memory_mib": round(peak, 1),
        "rendered_pages": sum(1 for record in pages if record.get("rendered") is True),
        "median_render_ms": statistics.median(render_ms) if render_ms else None,
        "browsers_left": left,
    }


def crawl_locally(seed: str, tmp: Path, options: tuple[str, ...]) -> dict[str, Any]:
    """``crawler.example --local`` (16 threads) from ``seed``: pages/s on its own clock,
    the CPU of its process tree from that clock's start to its exit."""
    output = tmp / "records.jsonl"
    env = dict(os.environ, MEMCACHED_SERVERS="127.0.0.1:9", PYTHONUNBUFFERED="1")
    reaped_before = _reaped_children_cpu()
    crawl = subprocess.Popen(
        [sys.executable, "-m", "crawler.example", "--local", seed,
         "--threads", str(DEFAULT_PROCESSES * DEFAULT_THREADS), "-o", str(output), *options],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    sampler = TreeSampler(crawl.pid)
    sampler.start()
    assert crawl.stdout is not None
    summary, finished = None, time.monotonic()
    for line in crawl.stdout:  # "Finished after 2.9s: 2000 pages fetched (689.7 pages/s), ..."
        found = re.search(r"(\d+) pages fetched \(([\d.]+) pages/s\)", line)
        if found:
            summary, finished = found, time.monotonic()
    crawl.wait(timeout=900)
    sampler.finish()
    cpu_total = _reaped_children_cpu() - reaped_before  # the tree, reaped: every process
    assert crawl.returncode in (0, 1) and summary, f"--local exited with {crawl.returncode}"
    seconds = int(summary.group(1)) / float(summary.group(2))
    cpu = cpu_total - sampler.cpu_at(finished - seconds)  # its start-up left out
    outcome = figures(records_of(output), seconds, cpu, sampler.peak_mib, left_behind(sampler.seen))
    outcome["pages_reported"] = int(summary.group(1))
    outcome["cpu_share_by_process"] = shares(sampler.by_kind)
    outcome["cpu_ms_per_page_with_start_up"] = 1000 * cpu_total / max(outcome["pages"], 1)
    return outcome


def crawl_with_workers(
    broker: str, seed: str, tmp: Path, options: tuple[str, ...]
) -> dict[str, Any]:
    """Workers (``dramatiq crawler.example -p 2 -t 8``) crawl from ``seed``, seeded with
    ``--wait -o``: pages/s from the seeder's ``seeded`` line to its exit, and the CPU of
    the workers' process tree meanwhile."""
    env = broker_env(broker, dramatiq_prom_db=str(tmp / f"prom-{broker}"))
    Path(env["dramatiq_prom_db"]).mkdir()
    flush_services(env)
    workers = start_workers(
        env, "crawler.example", processes=DEFAULT_PROCESSES, threads=DEFAULT_THREADS
    )
    try:
        output = tmp / "records.jsonl"
        services = CrawlCpu.start(workers.pid, broker)
        seeder = subprocess.Popen(
            [sys.executable, "-m", "crawler.example", seed, "--wait", "-o", str(output),
             *options],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert seeder.stdout is not None
        seeded_line = (
            seeder.stdout.readline()
        )  # "crawl <id> seeded with 1 URL(s)": the clock starts
        started = time.monotonic()
        sampler = TreeSampler(workers.pid)
        sampler.start()
        cpu_before = tree_cpu(process_tree([workers.pid]))
        stdout, stderr = seeder.communicate(timeout=900)
        elapsed = time.monotonic() - started
        cpu = tree_cpu(process_tree([workers.pid])) - cpu_before
        sampler.finish()
        by_part = services.by_part()
        assert seeder.returncode in (0, 1), seeded_line + stdout + stderr
    finally:
        stop(workers)
    outcome = figures(records_of(output), elapsed, cpu, sampler.peak_mib, [])
    pages = max(outcome["pages"], 1)
    outcome["cpu_ms_per_page_by_part"] = {
        "workers and their children": round(1000 * cpu / pages, 3),
        **{
            part: round(1000 * seconds / pages, 3)
            for part, seconds in by_part.items()
            if part not in ("workers", "worker parent")
        },
    }
    outcome["cpu_share_by_process"] = shares(sampler.by_kind)  # from their start
    outcome["browsers_left"] = left_behind(sampler.seen)  # once the workers stopped
    return outcome


def shares(spent: dict[str, float]) -> dict[str, float]:
    """Each kind's share of the CPU seconds ``spent``, at the tree's last reading."""
    total = sum(spent.values()) or 1.0
    return {kind: round(seconds / total, 3) for kind, seconds in sorted(spent.items())}


def _reaped_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def served_lines(access_log: Path) -> int:
    """The requests the site answered so far."""
    return len(access_log.read_text().splitlines()) if access_log.exists() else 0


def measure(seed: str, tmp: Path, runs: list[str], repeat: int, render: tuple[str, ...]) -> Any:
    rounds: dict[str, list[dict[str, Any]]] = {}
    for round_ in range(repeat):
        for run in runs:
            for rendering in (False, True):
                prefix = tmp / f"{run}-{round_}-{'render' if rendering else 'plain'}"
                prefix.mkdir()
                prefix.chmod(0o777)
                options = OPTIONS + (render if rendering else ())
                served_before = served_lines(tmp / "access.log")
                if run == "local":
                    outcome = crawl_locally(seed, prefix, options)
                else:
                    outcome = crawl_with_workers(run, seed, prefix, options)
                # More than 1: attempts that failed (a render past its deadline) and were retried.
                served = served_lines(tmp / "access.log") - served_before
                outcome["fetches_per_page"] = served / max(outcome["pages"], 1)
                rounds.setdefault(f"{run}{' --render' if rendering else ''}", []).append(outcome)
                shutil.rmtree(prefix, ignore_errors=True)
    results: dict[str, Any] = {}
    for name, outcomes in rounds.items():
        rates = [outcome["pages_per_s"] for outcome in outcomes]
        median = statistics.median_low(rates)
        results[name] = dict(outcomes[rates.index(median)], rounds=outcomes)
    for run in runs:
        plain, rendered = results[run], results[f"{run} --render"]
        rendered["x_plain_pages_per_s"] = rendered["pages_per_s"] / plain["pages_per_s"]
        rendered["x_plain_cpu_per_page"] = rendered["cpu_ms_per_page"] / plain["cpu_ms_per_page"]
        rendered["x_plain_memory"] = rendered["peak_memory_mib"] / plain["peak_memory_mib"]
    return results


def faults(results: dict[str, Any], pages: int) -> list[str]:
    """What went wrong in any round: pages missing, a page not rendered, a browser left."""
    found = []
    for name, run in results.items():
        for number, outcome in enumerate(run["rounds"]):
            if outcome["pages"] != pages:
                found.append(f"{name}, round {number}: {outcome['pages']} pages, not {pages}")
            if name.endswith("--render") and outcome["rendered_pages"] != outcome["pages"]:
                found.append(f"{name}, round {number}: {outcome['rendered_pages']} rendered")
            if outcome["browsers_left"]:
                found.append(f"{name}, round {number}: browsers left {outcome['browsers_left']}")
    return found


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{'run':18} {'pages':>6} {'seconds':>8} {'pages/s':>8} {'CPU ms/page':>12}"
        f" {'peak MiB':>9} {'fetches/page':>12} {'x pages/s':>10} {'x CPU/page':>11}"
    ]
    for name, run in results.items():
        ratios = (
            f" {run['x_plain_pages_per_s']:10.3f} {run['x_plain_cpu_per_page']:11.1f}"
            if "x_plain_pages_per_s" in run
            else ""
        )
        lines.append(
            f"{name:18} {run['pages']:6d} {run['seconds']:8.1f} {run['pages_per_s']:8.1f}"
            f" {run['cpu_ms_per_page']:12.1f} {run['peak_memory_mib']:9.0f}"
            f" {run['fetches_per_page']:12.2f}{ratios}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--links", type=int, default=10, help="links on each page")
    parser.add_argument("--runs", default="local,rabbitmq", help="of: " + ",".join(RUNS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--render-wait", help="the crawls' --render-wait (default: idle)")
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    runs = arguments.runs.split(",")
    if not set(runs) <= set(RUNS):
        parser.error(f"--runs: of {', '.join(RUNS)}")
    if not shutil.which("chromium"):  # Debian's, as the tests install it
        apt_install("chromium")
    if not shutil.which("chromium"):
        print("skipped: no chromium here, and apt-get could not install it")
        return 0
    render: tuple[str, ...] = ("--render",)
    if arguments.render_wait:
        render += ("--render-wait", arguments.render_wait)
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        tmp.chmod(0o755)
        port = free_port()
        root = tmp / "site"
        root.mkdir()
        write_site(root, f"http://127.0.0.1:{port}", arguments.pages, arguments.links)
        with serve(root, port, access_log=tmp / "access.log", state=tmp):
            results = measure(
                f"http://127.0.0.1:{port}/page/0.html", tmp, runs, arguments.repeat, render
            )
    pages_at_once = os.environ.get("CRAWLER_RENDER_PAGES", "4")
    print(
        f"{arguments.pages} pages, {arguments.links} links each; median of"
        f" {arguments.repeat} round(s); {' '.join(render)}, {pages_at_once} pages at once a process"
    )
    print(table(results))
    found = faults(results, arguments.pages)
    print("same pages, every page rendered, no browser left:", "NO" if found else "yes")
    for fault in found:
        print("  " + fault)
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=2))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
