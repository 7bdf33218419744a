"""Where a page's CPU goes on the distributed path: the per-page budget in the README.

    python benchmarks/budget.py                         # 4000 pages x 10 links, both brokers
    python benchmarks/budget.py --pages 200 --links 5   # the smoke run CI does

The workers (2 processes x 8 threads, as in ``run.py``) crawl the generated site with
``--wait`` on each broker while py-spy (a bench dependency) samples each worker process
500 times a second, without pausing it, whenever one of its threads holds the GIL.  Each
process's CPU per page is read from ``/proc``, as ``run.py`` does; the workers' share is
then split in proportion to what their sampled threads were doing, by the first of
:data:`PARTS` a sampled stack passes through.  C code that runs without the GIL (socket
reads, say) is not sampled: its CPU is split like the rest.  Sampling itself costs the
workers some CPU, so their total here is a little above ``run.py``'s.  Every address is
on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    BIN,
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    crawl_with_workers,
    free_port,
    serve,
    write_site,
)

BROKERS = ("rabbitmq", "redis")
#: What a worker thread is doing, named by what a sampled stack passes through: the
#: first part whose marks one of its frames contains.
PARTS = (
    ("logging", ("(logging/",)),
    ("metrics (prometheus_client)", ("crawler/metrics.py", "prometheus_client/")),
    ("record to the seeder", ("crawler/tracking/record_queue.py",)),
    ("done mark and counters", ("crawler/tracking/bookkeeping.py",)),
    ("GET and body (requests)", ("crawler/fetching/",)),
    ("links found and scoped", ("crawler/links/", "find_anchors", "links_to_follow")),
    ("links claimed and sent", ("send_claimed",)),
    ("claim, deliveries, politeness", ("crawler/frontier/",)),
    ("message received and acknowledged", ("ConsumerThread.run",)),
    ("the actor's own steps, Dramatiq's middleware", ("",)),
)


def part_of(stack: str) -> str:
    """The part of :data:`PARTS` a sampled stack (py-spy's raw line) counts for."""
    for part, marks in PARTS:
        if any(mark in stack for mark in marks):
            return part
    raise AssertionError("the last part takes every stack")


def shares(samples: Path) -> Counter[str]:
    """Samples per part over every ``*.txt`` file py-spy wrote in ``samples``."""
    counted: Counter[str] = Counter()
    for path in samples.glob("*.txt"):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():  # a stack and its samples; py-spy's notes aside
                counted[part_of(stack)] += int(count)
    return counted


def measure(broker: str, seed: str, tmp: Path, processes: int, threads: int) -> dict[str, object]:
    samples = tmp / f"samples-{broker}"
    samples.mkdir()
    crawl = crawl_with_workers(
        broker, seed, tmp, processes=processes, threads=threads, samples=samples
    )
    by_process: dict[str, float] = crawl["cpu_ms_per_page_by_part"]
    counted = shares(samples)
    total = sum(counted.values())
    workers = {part: round(by_process["workers"] * counted[part] / total, 3) for part, _ in PARTS}
    return {
        "pages": crawl["pages"],
        "pages_per_s": crawl["pages_per_s"],
        "samples": total,
        "workers": workers,
        "processes": by_process,
        "cpu_ms_per_page": crawl["cpu_ms_per_page"],
    }


def table(figures: dict[str, dict[str, object]]) -> str:
    lines = [f"{'broker':9} {'part':52} {'CPU ms/page':>11}"]
    for broker, run in figures.items():
        workers: dict[str, float] = run["workers"]  # type: ignore[assignment]
        processes: dict[str, float] = run["processes"]  # type: ignore[assignment]
        for part, cost in sorted(workers.items(), key=lambda item: -item[1]):
            lines.append(f"{broker:9} {'workers: ' + part:52} {cost:11.3f}")
        for process, cost in processes.items():
            name = "workers (all parts)" if process == "workers" else process
            lines.append(f"{broker:9} {name:52} {cost:11.3f}")
        lines.append(
            f"{broker:9} {'all processes':52} {run['cpu_ms_per_page']:11.3f}"
            f"   ({run['pages']:.0f} pages at {run['pages_per_s']:.0f} pages/s,"
            f" {run['samples']} samples)"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    arguments = parser.parse_args()
    if not (BIN / "py-spy").exists():  # installed beside this Python, as contenders runs it
        print("py-spy is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    figures = {}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)  # nginx's workers read the site from here
        port = free_port()
        (tmp / "site").mkdir()
        write_site(tmp / "site", f"http://127.0.0.1:{port}", arguments.pages, arguments.links)
        with serve(tmp / "site", port):
            for broker in BROKERS:
                seed = f"http://127.0.0.1:{port}/page/0.html"
                figures[broker] = measure(broker, seed, tmp, arguments.processes, arguments.threads)
    print(
        f"site: {arguments.pages} pages x {arguments.links} links; workers "
        f"{arguments.processes} processes x {arguments.threads} threads, sampled by py-spy"
    )
    print(table(figures))
    if arguments.json:
        arguments.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
