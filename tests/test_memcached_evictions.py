"""A Memcached too small for the crawl: its evictions are said, never silent."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import (
    FAST_FAILURES,
    MemcachedProcess,
    crawl_id_of,
    metric,
    wait_for_crawl,
)
from tests.workers import WorkerProcesses, environment, seed

WARNING = "items during this crawl: some pages may be fetched twice; give it more memory"


def read_metrics() -> str:
    with urllib.request.urlopen("http://127.0.0.1:9191/metrics", timeout=10) as response:
        return str(response.read().decode())


def test_evictions_during_a_crawl_are_said_by_wait_status_and_the_metric(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    small = MemcachedProcess(memory_mb=2)  # evicts after some 14,000 keys
    env = environment(
        **rabbitmq_env,
        **FAST_FAILURES,
        MEMCACHED_SERVERS=small.servers,
        dramatiq_prom_db=str(tmp_path),
    )
    site.pages.update(generate_site(site.base_url, pages=12_000, links_per_page=3))
    workers = WorkerProcesses(env, processes=2, threads=8)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        deadline = time.monotonic() + 120
        while WARNING not in (status := seed(env, "--status", crawl_id)).stdout:
            assert time.monotonic() < deadline, status.stdout
            time.sleep(1)
        # Each worker process reads Memcached's stats for the metric every few seconds.
        while metric(metrics := read_metrics(), "crawler_memcached_evictions") == 0:
            assert time.monotonic() < deadline, metrics
            time.sleep(0.5)
        assert seed(env, "--cancel", crawl_id).returncode == 0
        stdout, stderr = waiting.communicate(timeout=120)
    finally:
        workers.stop()
        small.stop()

    assert status.returncode == 0
    assert status.stdout.splitlines()[-1].startswith("Memcached evicted ")
    assert waiting.returncode == 3, stderr[-2000:]
    assert stdout.splitlines()[-1].startswith("Memcached evicted ")
    assert WARNING in stdout.splitlines()[-1]
    assert metric(metrics, "crawler_memcached_evictions") > 0
