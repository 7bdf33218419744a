"""Outages mid-crawl at a real crawl's scale: what is lost, fetched twice, and what ``--wait`` says.

    python benchmarks/outages.py --scenario all --pages 2000

Each scenario crawls a generated site (``--pages`` x 10 links, served on 127.0.0.1)
with ``dramatiq crawler.example -p 2 -t 4`` and a seeder in ``--wait --output``,
and once ``--pages``/5 pages are done, takes one service away and brings it back:

* ``redis``: a Redis broker of its own, with an append-only file, shut down for
  ``--outage`` seconds (10 by default) and restarted;
* ``rabbitmq``: ``rabbitmqctl stop_app`` / ``start_app`` on the machine's RabbitMQ
  (15 s by default: it purges the ``default`` queue and stops that RabbitMQ's
  clients meanwhile, so run it on a machine of your own);
* ``memcached``: a Memcached of its own killed and restarted empty (5 s).

It prints one JSON line per scenario: the seeder's exit code, pages never fetched,
pages fetched twice, records written, URLs given up.  Backoffs are shortened
through the ``CRAWLER_*`` variables (1 s, then 2 and 4) as the tests do.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from tests.site_server import SiteServer, generate_site, page_path  # noqa: E402
from tests.support import (  # noqa: E402
    FAST_FAILURES,
    MemcachedProcess,
    RedisProcess,
    clean_broker,
    clean_memcached,
)
from tests.workers import (  # noqa: E402
    WorkerProcesses,
    dead_letters,
    environment,
    queued_messages,
)

OUTAGES = {"redis": 10.0, "rabbitmq": 15.0, "memcached": 5.0}
#: Seconds ``--wait`` may take after the outage before it counts as hung.
WAIT_LIMIT = 300


def run(scenario: str, pages: int, outage: float) -> dict[str, Any]:
    site = SiteServer().start()
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=10))
    site.delay = 0.01
    directory = Path(tempfile.mkdtemp())
    output = directory / "records.jsonl"
    with ExitStack() as stack:
        stack.callback(site.stop)
        stack.enter_context(clean_memcached())
        env = environment(**{**FAST_FAILURES, "CRAWLER_MIN_BACKOFF_MS": "1000"})
        own_redis = own_memcached = None
        if scenario == "redis":
            own_redis = RedisProcess(directory)
            stack.callback(own_redis.shut_down)
            env.update(REDIS="1", REDIS_URL=own_redis.url)
        else:
            env.update(stack.enter_context(clean_broker("rabbitmq")))
        if scenario == "memcached":
            own_memcached = MemcachedProcess()
            stack.callback(own_memcached.stop)
            env["MEMCACHED_SERVERS"] = own_memcached.servers
        workers = WorkerProcesses(env, processes=2, threads=4)
        stack.callback(workers.stop)
        seed = site.url(page_path(0))
        waiting = subprocess.Popen(
            [sys.executable, "-m", "crawler.example", seed, "--wait", "--output", str(output)],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        workers.wait_until(lambda: workers.count("Done crawling") >= pages // 5, timeout=120)
        if own_redis is not None:
            own_redis.shut_down()
            time.sleep(outage)
            own_redis.start()
        elif own_memcached is not None:
            own_memcached.stop()
            time.sleep(outage)
            own_memcached.start()
        else:
            subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True)
            time.sleep(outage)
            subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True)
        exit_code: int | str
        try:
            _, stderr = waiting.communicate(timeout=WAIT_LIMIT)
            exit_code = waiting.returncode
        except subprocess.TimeoutExpired:
            waiting.kill()
            _, stderr = waiting.communicate()
            exit_code = f"still waiting after {WAIT_LIMIT} s"
        deadline = time.monotonic() + 60
        while queued_messages(env) and time.monotonic() < deadline:
            time.sleep(0.5)
        counts = site.fetch_counts()
        last_line = (stderr.strip().splitlines() or [""])[-1]
        return {
            "scenario": scenario,
            "outage_s": outage,
            "pages": pages,
            "wait_exit": exit_code,
            "never_fetched": pages - len(counts),
            "fetched_twice": sum(n > 1 for n in counts.values()),
            "records": len(output.read_text().splitlines()) if output.exists() else 0,
            "given_up": workers.count("Giving up on URL"),
            "dead_letters": dead_letters(env),
            "handed_back": workers.count("goes back to the queue"),
            "seeder_said_waiting": "waiting for" in stderr,
            "seeder_last_line": last_line[:200],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*OUTAGES, "all"], default="all")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--outage", type=float, help="seconds (default: per scenario)")
    arguments = parser.parse_args()
    scenarios = list(OUTAGES) if arguments.scenario == "all" else [arguments.scenario]
    for scenario in scenarios:
        outage = arguments.outage if arguments.outage is not None else OUTAGES[scenario]
        print(json.dumps(run(scenario, arguments.pages, outage)), flush=True)


if __name__ == "__main__":
    main()
