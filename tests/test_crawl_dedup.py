"""Dedup belongs to the crawl: seeding a site again crawls it again; ``--crawl-id`` adds
seeds to a crawl without fetching its pages again."""

from __future__ import annotations

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, crawl_id_of
from tests.workers import WorkerProcesses, environment, seed

PAGES = 20


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_seeding_a_crawled_site_again_starts_a_crawl_that_fetches_every_page_again(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, dedup_env: dict[str, str]
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **dedup_env, **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=4))
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        first = seed(env, site.url(page_path(0)), "--wait")
        after_first = site.fetch_counts()
        second = seed(env, site.url(page_path(0)), "--wait")
    finally:
        assert workers.stop() == 0

    assert first.returncode == second.returncode == 0
    assert crawl_id_of(first.stdout) != crawl_id_of(second.stdout)
    assert after_first == {page_path(i): 1 for i in range(PAGES)}
    assert site.fetch_counts() == {page_path(i): 2 for i in range(PAGES)}
    assert f"{PAGES} pages fetched" in second.stdout and "0 skipped as duplicates" in second.stdout


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_crawl_id_adds_seeds_to_a_crawl_without_fetching_its_pages_again(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, dedup_env: dict[str, str]
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **dedup_env, **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=4))
    extra = {f"/extra/{i}.html": site.pages[page_path(i)] for i in range(3)}
    site.pages.update(extra)
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        first = seed(env, site.url(page_path(0)), "--wait")
        crawl_id = crawl_id_of(first.stdout)
        added = seed(
            env, site.url(page_path(5)), *map(site.url, extra), "--crawl-id", crawl_id, "--wait"
        )
        status = seed(env, "--status", crawl_id)
        unknown = seed(env, site.url(page_path(0)), "--crawl-id", "0" * 32)
        malformed = seed(env, site.url(page_path(0)), "--crawl-id", "nope")
    finally:
        assert workers.stop() == 0

    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"crawl {crawl_id} seeded with 4 more URL(s)")
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)} | dict.fromkeys(extra, 1)
    assert "3 pages fetched" in added.stdout and "1 skipped as duplicates" in added.stdout
    seen = f"{site.url(page_path(5))} was crawled in crawl {crawl_id} already: not fetched again."
    assert seen in added.stdout.splitlines()
    assert f": finished: {PAGES + 3} pages fetched, " in status.stdout
    assert unknown.returncode == 2
    store = "Redis" if dedup_env else "Memcached"
    assert unknown.stderr.strip() == f"error: no crawl {'0' * 32} is known to {store}"
    assert malformed.returncode == 2
    assert "'nope' is not a crawl id (32 hex digits)" in malformed.stderr
