"""What ``--render`` costs: pages/s, CPU per page and peak memory of a crawl with and
without it, side by side, and of one with ``--render auto`` (only the pages that need a
browser rendered), on a generated site.

    python benchmarks/render_cost.py                                # 500 pages
    python benchmarks/render_cost.py --pages 200 --runs local,rabbitmq,redis --repeat 3
    python benchmarks/render_cost.py --site mixed --pages 400 --runs local
    python benchmarks/render_cost.py --site mixed --pages 400 --runs local --polite

``--polite`` runs every crawl at ``crawler crawl``'s default pace (``--auto-throttle``);
without it, as upstream's seeder does, unthrottled.

The site (``--site``): ``plain``, pages of plain ``<a href>`` links; or ``mixed``, the
shape of ``tests/scripted_site.py``'s ``mixed_site``: ``/`` links to ``--pages`` less a
tenth static docs pages (each running a small script that adds no link) and to the
first page of a section of a tenth of ``--pages`` whose other pages only that page's
script links to (each linking back by script), all linking to ``/`` in their HTML.

Each round crawls the site with ``--local`` (16 threads) and with workers (2 x 8) on
RabbitMQ (and on Redis, with ``--runs``), once in each mode of ``--modes``, taking
turns: ``static`` (no ``--render``), ``auto`` (``--render auto``), ``full``
(``--render``); the median round of each is reported, with its time, CPU and memory
against the static crawl's.  Every crawl uses ``--follow-relative`` and must fetch
every page it can reach: on the mixed site, the static crawl every page but the
section's script-only ones, the others every page; every record of the ``full`` crawl
must say ``rendered``, and the ``auto`` crawl's rendered pages are counted.  With
``full`` beside ``auto`` on the mixed site, the report says the least CPU any ``--render
auto`` could take there (:func:`floor`): the static crawl's, and the section's pages
each at the CPU a render adds in the full crawl.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

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
from crawler.environment import Limits
from scripts.services import apt_install
from tests.scripted_site import mixed_site
from tests.site_server import Page, SiteServer

RUNS = ("local", "rabbitmq", "redis")
SITES = ("plain", "mixed")
#: Each mode's ``--render`` option, and what its runs' names end with.
MODES: dict[str, tuple[tuple[str, ...], str]] = {
    "static": ((), ""),
    "auto": (("--render", "auto"), " --render auto"),
    "full": (("--render",), " --render"),
}
#: The modes crawled on each site unless ``--modes`` says.
DEFAULT_MODES = {"plain": "static,full", "mixed": "static,auto,full"}
#: What the issue asks of ``--render auto`` on the mixed site: at most this many times
#: the static crawl's time and CPU.
AUTO_TARGET = 2.0
#: Seconds between two readings of the crawl's processes.
PERIOD = 0.2
#: What the crawls are given besides ``--render``: links found as the browser finds them.
OPTIONS = ("--follow-relative",)


@dataclass(frozen=True)
class Site:
    """A site written for the crawls.

    Parameters:
      seed(str): The seed's path.
      reach(dict): By mode, the paths of the pages its crawl must fetch, and no other.
      description(str): What it is, in the report's first line.
      needs_browser(int): How many of its pages any crawl must render to reach every
        page (the scripted section's: each links to others by script only).
    """

    seed: str
    reach: dict[str, frozenset[str]]
    description: str
    needs_browser: int = 0


def write_plain_site(root: Path, base: str, pages: int, links: int) -> Site:
    """:func:`~benchmarks.measuring.write_site`'s pages of plain links: every crawl
    fetches them all."""
    write_site(root, base, pages, links)
    every = frozenset(f"/page/{i}.html" for i in range(pages))
    return Site(
        "/page/0.html",
        dict.fromkeys(MODES, every),
        f"plain site: {pages} pages, {links} links each",
    )


class _Pages:
    """What :func:`tests.scripted_site.mixed_site` fills: its ``pages``, and nothing served."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}


def write_mixed_site(root: Path, pages: int) -> Site:
    """:func:`tests.scripted_site.mixed_site` as files (``/`` as ``index.html``): a
    scripted section of ``pages // 10`` pages, ``/app/N.html``, and the rest static docs
    pages.  A crawl without ``--render`` fetches every page but the section's
    script-only ones (all but ``/app/0.html``); one with it, every page."""
    scripted = pages // 10
    site = _Pages()
    every = mixed_site(cast(SiteServer, site), static=pages - scripted, scripted_pages=scripted)
    for path, page in site.pages.items():
        file = root / ("index.html" if path == "/" else path.lstrip("/"))
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(page.body)
    script_only = frozenset(f"/app/{i}.html" for i in range(1, scripted))
    reach = dict.fromkeys(MODES, frozenset(every))
    reach["static"] = frozenset(every) - script_only
    return Site(
        "/",
        reach,
        f"mixed site: {len(every)} pages (/, {pages - scripted} static docs pages, {scripted}"
        f" app pages, {len(script_only)} of them linked by script only)",
        needs_browser=scripted,
    )


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
    rendered = sum(1 for record in pages if record.get("rendered") is True)
    reasons: dict[str, int] = {}  # --render auto: why pages were rendered or not
    for record in pages:
        if "render_reason" in record:
            reason = f"{'rendered' if record['rendered'] else 'fetched'}: {record['render_reason']}"
            reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "pages": len(pages),
        "records": len(records),
        "seconds": round(seconds, 3),
        "pages_per_s": len(pages) / seconds,
        "cpu_seconds": round(cpu, 3),
        "cpu_ms_per_page": 1000 * cpu / max(len(pages), 1),
        "peak_memory_mib": round(peak, 1),
        "rendered_pages": rendered,
        "rendered_share": rendered / max(len(pages), 1),
        "render_reasons": dict(sorted(reasons.items())),
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


def measure(
    seed: str,
    tmp: Path,
    runs: list[str],
    repeat: int,
    modes: list[str],
    wait: tuple[str, ...],
    site: Site,
    paced: tuple[str, ...] = (),
) -> Any:
    """Each round, each run crawls in each mode in turn; the median round of each (by
    pages/s), with its ratios to the static crawl's (when ``static`` is a mode)."""
    rounds: dict[str, list[dict[str, Any]]] = {}
    for round_ in range(repeat):
        for run in runs:
            for mode in modes:
                render, suffix = MODES[mode]
                prefix = tmp / f"{run}-{round_}-{mode}"
                prefix.mkdir()
                prefix.chmod(0o777)
                options = OPTIONS + paced + (render + wait if render else ())
                served_before = served_lines(tmp / "access.log")
                if run == "local":
                    outcome = crawl_locally(seed, prefix, options)
                else:
                    outcome = crawl_with_workers(run, seed, prefix, options)
                # More than 1: attempts that failed (a render past its deadline) and were retried.
                served = served_lines(tmp / "access.log") - served_before
                outcome["fetches_per_page"] = served / max(outcome["pages"], 1)
                reached = {
                    urlsplit(record["url"]).path
                    for record in records_of(prefix / "records.jsonl")
                    if record.get("outcome") == "crawled"
                }
                outcome["mode"] = mode
                outcome["expected_pages"] = len(site.reach[mode])
                outcome["pages_missing"] = sorted(site.reach[mode] - reached)[:10]
                outcome["pages_unexpected"] = sorted(reached - site.reach[mode])[:10]
                rounds.setdefault(run + suffix, []).append(outcome)
                shutil.rmtree(prefix, ignore_errors=True)
    results: dict[str, Any] = {}
    for name, outcomes in rounds.items():
        rates = [outcome["pages_per_s"] for outcome in outcomes]
        median = statistics.median_low(rates)
        results[name] = dict(outcomes[rates.index(median)], rounds=outcomes)
    for run in runs:
        if "static" not in modes:
            continue
        plain = results[run]
        for mode in modes:
            if mode == "static":
                continue
            other = results[run + MODES[mode][1]]
            other["x_static_seconds"] = other["seconds"] / plain["seconds"]
            other["x_static_cpu"] = other["cpu_seconds"] / plain["cpu_seconds"]
            other["x_plain_pages_per_s"] = other["pages_per_s"] / plain["pages_per_s"]
            other["x_plain_cpu_per_page"] = other["cpu_ms_per_page"] / plain["cpu_ms_per_page"]
            other["x_plain_memory"] = other["peak_memory_mib"] / plain["peak_memory_mib"]
    return results


def faults(results: dict[str, Any]) -> list[str]:
    """What went wrong in any round: a page missing or one more than the mode reaches, a
    page of the ``full`` crawl not rendered, a browser left."""
    found = []
    for name, run in results.items():
        for number, outcome in enumerate(run["rounds"]):
            if (
                outcome["pages"] != outcome["expected_pages"]
                or outcome["pages_missing"]
                or outcome["pages_unexpected"]
            ):
                found.append(
                    f"{name}, round {number}: {outcome['pages']} pages, not"
                    f" {outcome['expected_pages']} (missing {outcome['pages_missing']},"
                    f" not expected {outcome['pages_unexpected']})"
                )
            if outcome["mode"] == "full" and outcome["rendered_pages"] != outcome["pages"]:
                found.append(f"{name}, round {number}: {outcome['rendered_pages']} rendered")
            if outcome["browsers_left"]:
                found.append(f"{name}, round {number}: browsers left {outcome['browsers_left']}")
    return found


def table(results: dict[str, Any]) -> str:
    """One line a run and mode; ``x time`` and ``x CPU``: its seconds and CPU seconds over
    the static crawl's (the whole crawl's, whatever pages each reached)."""
    lines = [
        f"{'run':22} {'pages':>6} {'seconds':>8} {'pages/s':>8} {'CPU ms/page':>12}"
        f" {'peak MiB':>9} {'rendered':>11} {'fetches/page':>12} {'x time':>7} {'x CPU':>7}"
    ]
    for name, run in results.items():
        ratios = (
            f" {run['x_static_seconds']:7.1f} {run['x_static_cpu']:7.1f}"
            if "x_static_seconds" in run
            else ""
        )
        lines.append(
            f"{name:22} {run['pages']:6d} {run['seconds']:8.1f} {run['pages_per_s']:8.1f}"
            f" {run['cpu_ms_per_page']:12.1f} {run['peak_memory_mib']:9.0f}"
            f" {run['rendered_pages']:5d} {run['rendered_share']:5.0%}"
            f" {run['fetches_per_page']:12.2f}{ratios}"
        )
    return "\n".join(lines)


def against_target(results: dict[str, Any], runs: list[str], site: Site) -> list[str]:
    """Each run's ``--render auto`` against :data:`AUTO_TARGET`, said plainly; and, with a
    ``full`` crawl beside it, the least any ``--render auto`` could cost (:func:`floor`)."""
    said = []
    for run in runs:
        auto = results.get(run + MODES["auto"][1])
        if auto is None or "x_static_seconds" not in auto:
            continue
        over = [
            what
            for what, ratio in (("time", auto["x_static_seconds"]), ("CPU", auto["x_static_cpu"]))
            if ratio > AUTO_TARGET
        ]
        said.append(
            f"{run} --render auto: {auto['x_static_seconds']:.2f}x the static crawl's time,"
            f" {auto['x_static_cpu']:.2f}x its CPU, {auto['rendered_pages']} of"
            f" {auto['pages']} pages rendered ({auto['rendered_share']:.1%}): within"
            f" {AUTO_TARGET:g}x: " + ("yes" if not over else f"NO ({' and '.join(over)})")
        )
        full = results.get(run + MODES["full"][1])
        if full is not None and site.needs_browser:
            render_ms, least = floor(results[run], full, auto["pages"], site.needs_browser)
            auto["render_cpu_ms"], auto["x_static_cpu_floor"] = render_ms, least
            said.append(
                f"{run} --render auto's floor: the {site.needs_browser} pages that need a"
                f" browser, each at the {render_ms:.0f} ms of CPU a render adds in the full"
                f" --render crawl, make any --render auto at least {least:.2f}x the static"
                " crawl's CPU"
            )
    return said


def floor(
    static: dict[str, Any], full: dict[str, Any], pages: int, needs_browser: int
) -> tuple[float, float]:
    """What a render adds to a page's CPU, in ms (the full crawl's CPU less its pages'
    at the static crawl's CPU a page, over its pages: the browser's start spread over
    them all, so less than a crawl of few renders pays); and the least CPU a crawl of
    ``pages`` that renders ``needs_browser`` of them could take, over the static
    crawl's."""
    static_page = static["cpu_seconds"] / static["pages"]
    render = (full["cpu_seconds"] - static_page * full["pages"]) / full["pages"]
    least = static_page * pages + render * needs_browser
    return render * 1000, least / static["cpu_seconds"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--site", choices=SITES, default="plain")
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--links", type=int, default=10, help="links on each page (plain site)")
    parser.add_argument("--runs", default="local,rabbitmq", help="of: " + ",".join(RUNS))
    parser.add_argument(
        "--modes",
        help="of: " + ",".join(MODES) + " (default: "
        + "; ".join(f"{site}: {modes}" for site, modes in DEFAULT_MODES.items()) + ")",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--render-wait", help="the crawls' --render-wait (default: idle)")
    parser.add_argument(
        "--polite", action="store_true", help="every crawl at crawler crawl's default pace"
        " (--auto-throttle: each host paced by its server, 2 requests in flight at most)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    runs = arguments.runs.split(",")
    if not set(runs) <= set(RUNS):
        parser.error(f"--runs: of {', '.join(RUNS)}")
    modes = (arguments.modes or DEFAULT_MODES[arguments.site]).split(",")
    if not set(modes) <= set(MODES) or len(set(modes)) != len(modes):
        parser.error(f"--modes: each of {', '.join(MODES)} at most once")
    if arguments.site == "mixed" and arguments.pages < 20:
        parser.error("--pages: at least 20 for the mixed site (a tenth of them scripted)")
    linked = arguments.pages - arguments.pages // 10 + 1  # the mixed site's / links them all
    if arguments.site == "mixed" and linked > Limits().max_links_per_page:
        parser.error(
            f"--pages: the mixed site's / would link {linked:,} pages, over the"
            f" {Limits().max_links_per_page:,} a page the crawler takes links from"
        )
    if not shutil.which("chromium"):  # Debian's, as the tests install it
        apt_install("chromium")
    if not shutil.which("chromium"):
        print("skipped: no chromium here, and apt-get could not install it")
        return 0
    wait: tuple[str, ...] = ()
    if arguments.render_wait:
        wait = ("--render-wait", arguments.render_wait)
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        tmp.chmod(0o755)
        port = free_port()
        root = tmp / "site"
        root.mkdir()
        base = f"http://127.0.0.1:{port}"
        if arguments.site == "mixed":
            site = write_mixed_site(root, arguments.pages)
        else:
            site = write_plain_site(root, base, arguments.pages, arguments.links)
        with serve(root, port, access_log=tmp / "access.log", state=tmp):
            paced = ("--auto-throttle",) if arguments.polite else ()
            results = measure(
                base + site.seed, tmp, runs, arguments.repeat, modes, wait, site, paced
            )
    pages_at_once = os.environ.get("CRAWLER_RENDER_PAGES", "4")
    print(
        f"{site.description}; median of {arguments.repeat} round(s); modes {','.join(modes)};"
        f" --render-wait {arguments.render_wait or 'idle'}, {pages_at_once} pages at once a"
        " process" + ("; --auto-throttle (crawler crawl's pace)" if arguments.polite else "")
    )
    print(table(results))
    for line in against_target(results, runs, site):
        print(line)
    found = faults(results)
    if arguments.site == "plain":
        print("same pages, every page rendered, no browser left:", "NO" if found else "yes")
    else:
        script_only = len(site.reach["auto"] - site.reach["static"])
        print(
            f"every page reached (without --render: all but the {script_only} script-only"
            " ones), every page of --render rendered, no browser left:",
            "NO" if found else "yes",
        )
    for fault in found:
        print("  " + fault)
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=2))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
