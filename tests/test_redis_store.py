"""``DEDUP_URL=redis://``: the dedup store in a Redis that keeps what it holds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, RedisProcess, wait_for_crawl
from tests.workers import WorkerProcesses, environment, seed

PAGES = 600
THREADS = 4


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_crawl_on_a_redis_store_restarted_mid_crawl_fetches_each_page_once(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = RedisProcess(tmp_path)  # an append-only file, as the README advises
    env = environment(
        **request.getfixturevalue(broker_env),
        **{**FAST_FAILURES, "CRAWLER_MIN_BACKOFF_MS": "500"},  # outlasts the restart
        DEDUP_URL=store.url,
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    site.delay = 0.01
    workers = WorkerProcesses(env, processes=1, threads=THREADS)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = waiting.stdout.readline().split()[1]
        workers.wait_until(lambda: workers.count("Done crawling") >= PAGES // 4)
        store.shut_down()
        time.sleep(2)
        store.start()
        stdout, stderr = waiting.communicate(timeout=120)
        status = seed(env, "--status", crawl_id)
    finally:
        assert workers.stop() == 0
        store.shut_down()

    assert waiting.returncode == 0, stderr[-2000:]
    assert f"{PAGES} pages fetched" in stdout
    counts = site.fetch_counts()
    assert len(counts) == PAGES
    # Only a page in hand when Redis went away can be fetched again (its attempt failed
    # after the fetch and was retried): at most one per worker thread.
    twice = sum(n > 1 for n in counts.values())
    assert twice <= THREADS, twice
    print(f"{twice} page(s) fetched twice across the store's restart")
    # The counters lived through the restart too.
    assert f": finished: {PAGES} pages fetched, " in status.stdout, status.stdout
    assert workers.logged_any("Redis is unavailable")
