"""``DEDUP_URL=redis://``: the dedup store in a Redis that keeps what it holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import (
    FAST_FAILURES,
    HELD_FETCHES,
    RedisClusterProcesses,
    RedisProcess,
    wait_for_crawl,
    wait_until,
)
from tests.workers import WorkerProcesses, environment, seed

PAGES = 600
THREADS = 4


@dataclass(frozen=True)
class FaultedCrawl:
    """How a crawl through a fault of its store ended: the waiting seeder's exit status,
    the crawl's id and output, the pages fetched when the fault was over, the workers."""

    returncode: int
    crawl_id: str
    stdout: str
    stderr: str
    fetched_at_fault: int
    workers: WorkerProcesses


def crawl_through(
    env: dict[str, str], site: SiteServer, *, after: int, fault: Callable[[], None], timeout: float
) -> FaultedCrawl:
    """Crawl ``PAGES`` pages (10 ms each) with one worker process of ``THREADS`` threads
    and ``--wait``; ``fault`` runs once each thread is in a fetch the site holds, from
    its ``after``-th request on, and releases them (``site.release()``) once the store is
    away: each thread then meets the fault in its next store call of the page (its
    links' claims).  Faulted at "``after`` pages done" instead, the store's calls it met
    could all be the bookkeeping of pages just done, which rides out a short outage by
    design (``CRAWLER_STORE_PATIENCE``): beside other tests' load that happened, and no
    attempt met the fault.  The fetches wait longer than the store is away
    (``CRAWLER_FETCH_DEADLINE``): a held page is fetched once."""
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    site.delay, site.hold_from = 0.01, after
    workers = WorkerProcesses(env, processes=1, threads=THREADS)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = waiting.stdout.readline().split()[1]
        site.wait_for_held(THREADS)
        fault()
        fetched_at_fault = len(site.fetch_counts())
        stdout, stderr = waiting.communicate(timeout=timeout)
    finally:
        site.release()
        assert workers.stop() == 0
    return FaultedCrawl(waiting.returncode, crawl_id, stdout, stderr, fetched_at_fault, workers)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_crawl_on_a_redis_store_restarted_mid_crawl_fetches_each_page_once(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = RedisProcess(tmp_path)  # an append-only file, as the README advises
    env = environment(
        **request.getfixturevalue(broker_env),
        **{**FAST_FAILURES, **HELD_FETCHES, "CRAWLER_MIN_BACKOFF_MS": "500"},  # past the restart
        DEDUP_URL=store.url,
    )

    def restart() -> None:
        store.shut_down()
        site.release()
        time.sleep(2)
        store.start()

    try:
        crawl = crawl_through(env, site, after=PAGES // 4, fault=restart, timeout=120)
        # The last message's ending is counted just after its record went to --wait.
        deadline = time.monotonic() + 30
        status = seed(env, "--status", crawl.crawl_id)
        while " 0 outstanding," not in status.stdout and time.monotonic() < deadline:
            status = seed(env, "--status", crawl.crawl_id)
    finally:
        store.shut_down()

    assert crawl.returncode == 0, crawl.stderr[-2000:]
    assert f"{PAGES} pages fetched" in crawl.stdout
    counts = site.fetch_counts()
    assert len(counts) == PAGES
    # Only a page in hand when Redis went away can be fetched again (its attempt failed
    # after the fetch and was retried): at most one per worker thread.
    twice = sum(n > 1 for n in counts.values())
    assert twice <= THREADS, twice
    print(f"{twice} page(s) fetched twice across the store's restart")
    # The counters lived through the restart too.
    assert f": finished: {PAGES} pages fetched, " in status.stdout, status.stdout
    workers = crawl.workers
    assert workers.logged_any("Redis is unavailable")
    assert not workers.logged_any("Could not record that"), "an ending was not counted"


def test_a_crawl_on_a_redis_cluster_store_spreads_its_claims_and_fetches_each_page_once(
    rabbitmq_env: dict[str, str], site: SiteServer, own_redis_cluster: RedisClusterProcesses
) -> None:
    own_redis_cluster.flush()
    env = environment(**rabbitmq_env, **FAST_FAILURES, DEDUP_URL=own_redis_cluster.url)
    pages = 300
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    workers = WorkerProcesses(env, processes=2, threads=THREADS)
    try:
        # --max-rate and --max-pages put the hosts' turns and the budget on the cluster too.
        args = ("--max-rate", "400", "--max-pages", str(pages + 10))
        waiting = wait_for_crawl(env, site.url(page_path(0)), *args)
        stdout, stderr = waiting.communicate(timeout=120)
    finally:
        assert workers.stop() == 0

    assert waiting.returncode == 0, stderr[-2000:]
    assert f"{pages} pages fetched" in stdout
    assert sorted(site.fetch_counts().values()) == [1] * pages
    # Every node holds a share of the per-URL keys; the crawl's figures share one node.
    nodes = own_redis_cluster.nodes()
    sizes = [node.dbsize() for node in nodes]
    figures = [node.keys("crawl:{*}:*") for node in nodes]
    assert min(sizes) > pages // 10, sizes
    assert sum(bool(keys) for keys in figures) == 1, figures
    for node in nodes:
        node.close()


def test_a_redis_cluster_store_whose_primary_dies_mid_crawl_fails_over_to_its_replica(
    rabbitmq_env: dict[str, str], site: SiteServer, tmp_path: Path
) -> None:
    (tmp_path / "cluster").mkdir()
    # Three primaries with a replica each; a primary silent for a second is replaced.
    cluster = RedisClusterProcesses(tmp_path / "cluster", replicas=1, node_timeout_ms=1000)
    env = environment(
        **rabbitmq_env,
        # A retry comes once the failover (a second's silence, then a vote) is over.
        **{
            **FAST_FAILURES,
            **HELD_FETCHES,
            "CRAWLER_MIN_BACKOFF_MS": "4000",
            "CRAWLER_MAX_BACKOFF_MS": "8000",
        },
        DEDUP_URL=cluster.url,
    )

    def kill_a_primary() -> None:
        cluster.kill(cluster.primaries()[0])
        site.release()
        wait_until(  # its replica takes its place
            lambda: len(cluster.primaries()) == RedisClusterProcesses.PRIMARIES and cluster.ok(),
            timeout=30,
        )

    try:
        crawl = crawl_through(env, site, after=PAGES // 3, fault=kill_a_primary, timeout=180)
    finally:
        cluster.shut_down()

    assert crawl.returncode == 0, crawl.stderr[-2000:]
    assert f"{PAGES} pages fetched" in crawl.stdout
    assert crawl.fetched_at_fault < PAGES, "the failover came after the crawl"
    counts = site.fetch_counts()
    assert len(counts) == PAGES
    # Only pages in hand when the primary died are fetched again, each once more: after
    # the first failure a worker fetches nothing until every primary answers again
    # (without that gate some 50 pages were: their claims on live primaries, their
    # links on the dead one).
    twice = sum(n > 1 for n in counts.values())
    assert max(counts.values()) <= 2 and twice <= THREADS, sorted(counts.values())[-10:]
    print(f"{twice} page(s) fetched twice across the failover")
    # An attempt that met the dead primary said so; one that fetched its page again
    # had met it. (redis-py's cluster client may also ride out the failover by itself,
    # its own retries finding the new primary: then no attempt met it.)
    if twice:
        assert crawl.workers.logged_any("Redis is unavailable")
