"""A Memcached too small for the crawl: its evictions are said, never silent, and the
crawl still ends, each page fetched once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import (
    FAST_FAILURES,
    MemcachedProcess,
    crawl_id_of,
    metric,
    metrics_port,
    read_metrics,
    wait_for_crawl,
)
from tests.workers import WorkerProcesses, environment, seed

PAGES = 12_000
WARNING = "items during this crawl: some pages may be fetched twice; give it more memory"


# On the Redis broker, which also keeps its delivery counts in Memcached: the most items
# per page, so the most evictions.  (RabbitMQ's run, the same 65 s, was dropped from the
# suite for time; `benchmarks/memory.py evict` crawls on RabbitMQ.)
@pytest.mark.parametrize("broker_env", ["redis_env"])
def test_a_crawl_in_a_memcached_that_evicts_ends_says_so_and_fetches_each_page_once(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    small = MemcachedProcess(memory_mb=2)  # evicts after some 14,000 keys
    env = environment(
        **request.getfixturevalue(broker_env),
        **FAST_FAILURES,
        MEMCACHED_SERVERS=small.servers,
        dramatiq_prom_db=str(tmp_path),
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=3))
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
        while metric(metrics := read_metrics(metrics_port()), "crawler_memcached_evictions") == 0:
            assert time.monotonic() < deadline, metrics
            time.sleep(0.5)
        stdout, stderr = waiting.communicate(timeout=180)
    finally:
        workers.stop()
        small.stop()

    assert status.returncode == 0
    assert status.stdout.splitlines()[-1].startswith("Memcached evicted ")
    assert metric(metrics, "crawler_memcached_evictions") > 0
    # The crawl ended by itself, every page fetched, none twice: the journal held.
    assert waiting.returncode == 0, stderr[-2000:]
    assert f"{PAGES} pages fetched" in stdout, stdout
    assert stdout.splitlines()[-1].startswith("Memcached evicted ")
    assert WARNING in stdout.splitlines()[-1]
    counts = site.fetch_counts()
    assert len(counts) == PAGES
    assert max(counts.values()) == 1
