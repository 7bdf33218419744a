"""How much memory a waiting seeder (``--wait``) holds as its crawl grows.

    python benchmarks/seeder_memory.py --records 100000 1000000
    python benchmarks/seeder_memory.py --records 2000 --broker rabbitmq   # the smoke run
    python benchmarks/seeder_memory.py --seeds 1000 100000    # crawler crawl --workers -i FILE

With ``--seeds``, it measures seeding instead: ``crawler crawl --workers -i FILE`` with that many
seeds in FILE, sent to the benchmark's broker (no worker takes them), and the seeding
process's peak resident memory (``ru_maxrss``): the messages are made as they are sent,
so it should not grow with the seeds.

For each count, a seeder process follows a crawl of its own (the very ``follow`` that
``--wait`` runs, on a broker and a Memcached of the benchmark's own) while this process
feeds that many final records through the crawl's records queue, as workers would:
record ``i`` ended message ``i`` and sent messages ``2i+1`` and ``2i+2``, so the seeder
ends once all have come.  Records go in messages of 200, in order.  Prints the count, the
seconds the seeder took to read them all, and its peak resident memory (``VmHWM``),
and ``--output FILE`` is written by the seeder as ``--output`` would, so that the URLs
it wrote are remembered too.  Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring.workers import broker_env, flush_services

#: Records in each message of the feed.
BATCH = 200
#: The seeder: ``follow`` of a crawl of its own, its seed message id given.
SEEDER = """
import sys
from crawler.brokers import make_broker
from crawler.environment import lifetimes_from_environment
from crawler.frontier import counters
from crawler.frontier.keep_alive import KeepAlive
from pathlib import Path
from crawler.records import RecordFile
from crawler.stores.memcached import from_environment
from crawler.tracking import record_queue
from crawler.tracking.seeder import follow

crawl_id, seed, output = sys.argv[1:4]
broker, pool, lifetimes = make_broker(), from_environment(), lifetimes_from_environment()
with pool.reserve() as client:
    counters.start(client, crawl_id, 1, lifetimes.grace)
reader = record_queue.Reader(broker, crawl_id)
print("reading", flush=True)
keep_alive = KeepAlive(lifetimes.grace)
status = follow(pool, crawl_id, [seed], reader, RecordFile(Path(output)), keep_alive)
print(open("/proc/self/status").read(), flush=True)
sys.exit(status)
"""


def message_id(index: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, str(index)))


def feed(env: dict[str, str], crawl_id: str, records: int) -> None:
    """Send ``records`` final records of the tree to the crawl's seeder, as workers do."""
    os.environ.update(env)
    from crawler.brokers import make_broker
    from crawler.brokers.record_transport import transport

    sender = transport(make_broker()).record_sender()
    try:
        for start in range(0, records, BATCH):
            batch = [
                {
                    "url": f"http://127.0.0.1/page/{i}.html",
                    "outcome": "crawled",
                    "depth": 0,
                    "message_id": message_id(i),
                    "sent": [message_id(c) for c in (2 * i + 1, 2 * i + 2) if c < records],
                }
                for i in range(start, min(start + BATCH, records))
            ]
            sender.send(crawl_id, json.dumps(batch).encode())
    finally:
        sender.close()


def measure(broker: str, records: int, tmp: Path) -> dict[str, float]:
    env = broker_env(broker)
    flush_services(env)
    crawl_id = f"seeder-memory-{uuid.uuid4().hex[:8]}"
    seeder = subprocess.Popen(
        [sys.executable, "-c", SEEDER, crawl_id, message_id(0), str(tmp / f"{records}.jsonl")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert seeder.stdout is not None
    assert seeder.stdout.readline() == "reading\n", seeder.stderr.read() if seeder.stderr else ""
    started = time.monotonic()
    feed(env, crawl_id, records)
    stdout, stderr = seeder.communicate(timeout=1800)
    seconds = time.monotonic() - started
    assert seeder.returncode == 0, stdout + stderr
    peak = next(line for line in stdout.splitlines() if line.startswith("VmHWM:"))
    written = sum(1 for _ in (tmp / f"{records}.jsonl").open())
    assert written == records, f"{written} of {records} records written"
    return {
        "records": records,
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(int(peak.split()[1]) / 1024, 1),
    }


#: Measures one ``crawler crawl --workers -i FILE`` in a process of its own: its peak RSS, in KiB.
SEEDING = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
assert done.returncode == 0, done.stderr[-2000:]
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measure_seeding(broker: str, seeds: int, tmp: Path) -> dict[str, float]:
    env = broker_env(broker)
    flush_services(env)
    seed_file = tmp / f"{seeds}.txt"
    with seed_file.open("w") as file:
        for i in range(seeds):
            file.write(f"http://127.0.0.{1 + i % 3}:9/page/{i}.html\n")
    command = [
        str(Path(sys.executable).parent / "crawler"),
        "crawl",
        "--workers",
        "-i",
        str(seed_file),
    ]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", SEEDING, *command], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        "seeds": seeds,
        "seconds": round(time.monotonic() - started, 2),
        "peak_rss_mib": round(int(done.stdout.split()[-1]) / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--seeds", type=int, nargs="+", help="measure crawler crawl -i instead")
    parser.add_argument("--broker", choices=["rabbitmq", "redis"], default="redis")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    arguments = parser.parse_args()
    figures = []
    if arguments.seeds:
        with tempfile.TemporaryDirectory() as directory:
            for seeds in arguments.seeds:
                figures.append(measure_seeding(arguments.broker, seeds, Path(directory)))
                print(json.dumps(figures[-1]), flush=True)
        print(f"{'seeds':>9} {'seconds':>8} {'seeding peak RSS MiB':>21}  ({arguments.broker})")
        for run in figures:
            print(f"{run['seeds']:>9} {run['seconds']:>8.1f} {run['peak_rss_mib']:>21.1f}")
        return 0
    with tempfile.TemporaryDirectory() as directory:
        for records in arguments.records:
            figures.append(measure(arguments.broker, records, Path(directory)))
            print(json.dumps(figures[-1]), flush=True)
    if arguments.json:
        arguments.json.write_text(json.dumps({"broker": arguments.broker, "runs": figures}))
    print(f"{'records':>9} {'seconds':>8} {'seeder peak RSS MiB':>20}  ({arguments.broker})")
    for run in figures:
        print(f"{run['records']:>9} {run['seconds']:>8.1f} {run['peak_rss_mib']:>20.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
