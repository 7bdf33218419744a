"""Memcached stopped or hung during a crawl: a clear error and retries, never a silent skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, MemcachedProcess, metric, metrics_port, read_metrics
from tests.workers import WorkerProcesses, dead_letters, environment, queued_messages, seed


def test_memcached_stopped_and_restarted_mid_crawl_loses_no_page(
    site: SiteServer,
    rabbitmq_env: dict[str, str],
    own_memcached: MemcachedProcess,
    tmp_path: Path,
) -> None:
    env = environment(
        **{
            **rabbitmq_env,
            **FAST_FAILURES,
            "MEMCACHED_SERVERS": own_memcached.servers,
            "CRAWLER_MIN_BACKOFF_MS": "500",  # outlasts libmemcached's 1 s retry timeout
            "dramatiq_prom_db": str(tmp_path / "prometheus"),
        }
    )

    def settled() -> bool:
        """Every page fetched, none queued, and none in the workers' hands: a retry
        waiting out its backoff in a worker's memory is in no queue RabbitMQ counts."""
        if not (site.fetched(every_page) and queued_messages(env) == 0):
            return False
        in_hand = read_metrics(metrics_port(env))
        return (
            metric(in_hand, "dramatiq_messages_inprogress")
            + metric(in_hand, "dramatiq_delayed_messages_inprogress")
            == 0
        )

    site.pages.update(generate_site(site.base_url, pages=100, links_per_page=4))
    # From the 20th request on the site holds its answers until Memcached is stopped:
    # then each thread, its fetch back, meets the outage in its links' claims.
    site.delay, site.hold_from = 0.02, 20
    every_page = [page_path(i) for i in range(100)]
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        assert seed(env, site.url(page_path(0))).returncode == 0
        site.wait_for_held(4)
        own_memcached.stop()
        site.release()
        workers.wait_until(lambda: workers.count("Memcached is unavailable") > 0)
        own_memcached.start()
        workers.wait_until(settled, timeout=90)
    finally:
        assert workers.stop() == 0

    assert queued_messages(env) == 0
    assert workers.count("Giving up on URL") == 0
    assert workers.logged_any("will be retried")


def test_hung_memcached_fails_messages_clearly_and_dead_letters_them(
    site: SiteServer, redis_env: dict[str, str], own_memcached: MemcachedProcess
) -> None:
    env = environment(
        **redis_env,
        **{**FAST_FAILURES, "CRAWLER_STORE_PATIENCE": "0.5"},  # each ending waits that out
        MEMCACHED_SERVERS=own_memcached.servers,
        MEMCACHED_TIMEOUT_MS="200",
    )
    site.pages.update(generate_site(site.base_url, pages=30, links_per_page=3))
    # The fifth request on waits for the hang: the crawl cannot end before it (it did,
    # once its workers started faster).
    site.delay, site.hold_from = 0.05, 5
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        assert seed(env, site.url(page_path(0))).returncode == 0
        workers.wait_until(lambda: workers.count("Done crawling") >= 3)
        own_memcached.pause()
        site.release()
        # Redis counts messages in hand as well, so 0 means every one has ended.
        workers.wait_until(lambda: queued_messages(env) == 0, timeout=120)
    finally:
        site.release()
        assert workers.stop() == 0

    gave_up = workers.count("Giving up on URL")
    assert gave_up > 0
    assert workers.count("after 4 attempts: Memcached is unavailable") == gave_up
    assert dead_letters(env) == gave_up
    assert workers.count("already been visited") == 0
    # The hang stopped the crawl short: what was not fetched sits in the dead-letter queue.
    assert len(site.fetch_counts()) < 30


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_seeder_reports_an_unreachable_broker_in_one_line(broker: str) -> None:
    closed = "127.0.0.1:9"
    env = environment(
        RABBITMQ_URL=f"amqp://guest:guest@{closed}/?connection_attempts=1",
        **({"REDIS": "1", "REDIS_URL": f"redis://{closed}/0"} if broker == "redis" else {}),
    )

    result = seed(env, "http://127.0.0.1:1/")

    assert result.returncode == 1
    name = {"rabbitmq": "RabbitMQ", "redis": "Redis"}[broker]
    assert result.stderr.startswith(f"error: cannot reach {name} at ")
    assert closed in result.stderr
    assert result.stderr.count("\n") == 1
    assert "guest:guest" not in result.stderr
