"""Real ``dramatiq crawler.example`` workers on real brokers and Memcached."""

from __future__ import annotations

import pytest

from crawler.brokers import make_broker
from tests.site_server import SiteServer, generate_site, page_path
from tests.workers import WorkerProcesses, environment, queued_messages, seed

PAGES = 300
LINKS_PER_PAGE = 10


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_fetch_every_page_of_a_site_exactly_once(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, dedup_env: dict[str, str]
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **dedup_env)
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=LINKS_PER_PAGE))
    workers = WorkerProcesses(env, processes=2, threads=4)
    try:
        seeded = seed(env, site.url(page_path(0)))
        assert seeded.returncode == 0, seeded.stderr

        workers.wait_until(lambda: workers.count("Done crawling") == PAGES, timeout=120)
    finally:
        # A graceful stop hands back every message not yet processed.
        assert workers.stop() == 0

    twice = [path for path, n in site.fetch_counts().items() if n > 1]
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)}, "\n".join(
        line for line in workers.lines if any(path in line for path in twice) or "WARN" in line
    )
    assert queued_messages(env) == 0
    # Links are claimed when sent, so a duplicate never enters the queue.
    assert workers.count("Crawling '") == PAGES
    assert workers.count("already been visited") == 0
    assert workers.tracebacks() == []


def test_with_publisher_confirms_a_waited_crawl_fetches_every_page_once(
    site: SiteServer, rabbitmq_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment(**rabbitmq_env, CRAWLER_PUBLISH_CONFIRMS="1")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert make_broker().confirm_delivery is True  # type: ignore[attr-defined]
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=5))
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        waited = seed(env, site.url(page_path(0)), "--wait")
    finally:
        assert workers.stop() == 0

    assert waited.returncode == 0, waited.stderr
    assert "60 pages fetched" in waited.stdout
    assert site.fetch_counts() == {page_path(i): 1 for i in range(60)}
