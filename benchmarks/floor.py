"""The least CPU a page can cost in this design, each part measured alone, against the
no-op ceiling: how many pages/s the machine could crawl if nothing but those parts ran.

    python benchmarks/floor.py                                     # the full run
    python benchmarks/floor.py --times 200 --noop-messages 8000   # the smoke run CI does

A crawled page is at least: its message consumed and one link's message sent (both
measured on the no-op ceiling's own run: the CPU its workers and broker spend per
message at full pace, and its one sending process's), one GET (client and nginx), and
six Memcached operations that keep dedup and the crawl's counters exact (claim check,
the links' get_multi, the new link's add, the "ended once" add, the outcome's incr,
the done mark; memcached's own stats count 1 get, 10 keys in one get_multi and 3
adds or sets per page on RabbitMQ, 4 on Redis, and the crawl adds an incr for the
pages that found new links).  All but the consumed message are timed single-threaded.
None has logging, records or glue code, so the sum is below what any real page costs.
Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import urllib3

from crawler.stores.memcached import client_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    children,
    cpu_seconds,
    free_port,
    noop_ceiling,
    serve,
    service_pids,
    write_site,
)
from benchmarks.measuring.workers import own_services

CORES = len(os.sched_getaffinity(0))
NGINX = shutil.which("nginx") is not None
#: Memcached operations per crawled page, by kind (see the module docstring).
MEMCACHED_OPS = {"get": 1, "get_multi": 1, "add": 2, "incr": 1, "set": 1}


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_ms_each(action: Callable[[], object], times: int, servers: list[int]) -> dict[str, float]:
    """CPU ms per call of ``action``: this process's, and the ``servers``' it made busy."""
    servers_before = sum(cpu_seconds(pid) for pid in servers)
    before = own_cpu()
    for _ in range(times):
        action()
    client = own_cpu() - before
    server = sum(cpu_seconds(pid) for pid in servers) - servers_before
    return {"client": 1000 * client / times, "server": 1000 * server / times}


def fetch_cost(times: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)
        port = free_port()
        (tmp / "site").mkdir()
        write_site(tmp / "site", f"http://127.0.0.1:{port}", 100, 10)
        with serve(tmp / "site", port) as server:
            # Python's server, the fallback, runs in this process: its CPU is the client's.
            nginx = (
                [int(p) for p in (tmp / "nginx.pid").read_text().split()]
                if server == "nginx"
                else []
            )
            pool = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1)
            count = iter(range(10**9))

            def get() -> bytes:
                return pool.request("GET", f"/page/{next(count) % 100}.html").data

            get()
            return cpu_ms_each(get, times, nginx + [c for p in nginx for c in children(p)])


def memcached_cost(times: int) -> dict[str, float]:
    own_services()  # a Memcached of the benchmark's own: none of its keys in the user's
    client = client_of(os.environ["MEMCACHED_SERVERS"].split(","))
    servers = service_pids()["memcached"]
    keys = [uuid.uuid4().hex for _ in range(10)]
    client.set("floor-counter", 0)
    ops: dict[str, Callable[[], object]] = {
        "get": lambda: client.get(keys[0]),
        "get_multi": lambda: client.get_multi(keys),
        "add": lambda: client.add(uuid.uuid4().hex, b"x", time=60),
        "incr": lambda: client.incr("floor-counter"),
        "set": lambda: client.set(keys[1], b"done", time=60),
    }
    total = {"client": 0.0, "server": 0.0}
    for name, per_page in MEMCACHED_OPS.items():
        cost = cpu_ms_each(ops[name], times, servers)
        for side in total:
            total[side] += per_page * cost[side]
    return total


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--times", type=int, default=5000, help="GETs and Memcached calls timed")
    parser.add_argument("--noop-messages", type=int, default=20000)
    args = parser.parse_args()
    times = args.times
    fetch = fetch_cost(times)
    memcached = memcached_cost(times)
    print(f"{CORES} cores; workers as in run.py: {DEFAULT_PROCESSES} processes")
    print(f"{'broker':9} {'part':28} {'client ms':>9} {'server ms':>9}")
    for broker in ("rabbitmq", "redis"):
        with tempfile.TemporaryDirectory() as directory:
            noop = noop_ceiling(
                broker,
                args.noop_messages,
                Path(directory),
                processes=DEFAULT_PROCESSES,
                threads=DEFAULT_THREADS,
            )
        ceiling = noop["messages_per_s"]
        parts = {
            "message consumed (no-op)": {
                "client": noop["workers_cpu_ms_per_message"],
                "server": noop["broker_cpu_ms_per_message"],
            },
            "one link's message sent": {
                "client": noop["sender_cpu_ms_per_message"],
                "server": noop["broker_cpu_ms_per_sent_message"],
            },
            f"GET of a 10-link page{'' if NGINX else ' (+server)'}": fetch,
            "6 Memcached operations": memcached,
        }
        for name, cost in parts.items():
            print(f"{broker:9} {name:28} {cost['client']:9.3f} {cost['server']:9.3f}")
        floor = sum(cost["client"] + cost["server"] for cost in parts.values())
        best = 1000 * CORES / floor
        print(
            f"{broker:9} floor {floor:.3f} CPU ms/page -> at most {best:.0f} pages/s = "
            f"{best / ceiling:.2f} of the no-op's {ceiling:.0f} messages/s (target 0.40)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
