"""A pool of Memcached servers: keys spread by consistent hashing, and a crawl that goes
on, and ends, when one server dies."""

from __future__ import annotations

import pylibmc
import pytest

from crawler.environment import memcached_behaviors
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, MemcachedProcess, wait_for_crawl
from tests.workers import WorkerProcesses, environment

PAGES = 1500


def test_losing_one_of_three_servers_moves_only_its_share_of_the_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers = [MemcachedProcess(memory_mb=16) for _ in range(3)]
    try:
        monkeypatch.setenv("MEMCACHED_SERVERS", ",".join(s.servers for s in servers))
        all_three = pylibmc.Client([s.servers for s in servers], behaviors=memcached_behaviors())
        keys = [f"key-{i}" for i in range(3000)]
        all_three.set_multi(dict.fromkeys(keys, b"1"))
        monkeypatch.setenv("MEMCACHED_SERVERS", ",".join(s.servers for s in servers[:2]))
        two = pylibmc.Client([s.servers for s in servers[:2]], behaviors=memcached_behaviors())
        still_found = len(two.get_multi(keys))
    finally:
        for server in servers:
            server.stop()

    # Two thirds stay where they were (modulo hashing would keep a third).
    assert 0.55 * len(keys) < still_found < 0.8 * len(keys)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_crawl_over_two_memcached_servers_ends_when_one_is_killed(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest
) -> None:
    servers = [MemcachedProcess(), MemcachedProcess()]
    env = environment(
        **request.getfixturevalue(broker_env),
        **FAST_FAILURES,
        MEMCACHED_SERVERS=",".join(server.servers for server in servers),
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    site.delay = 0.005
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        workers.wait_until(lambda: workers.count("Done crawling") >= PAGES // 3)
        assert servers[1].process is not None
        servers[1].process.kill()  # kill -9: every key it held is gone
        crawled_before = workers.count("Done crawling")
        _, stderr = waiting.communicate(timeout=120)
    finally:
        assert workers.stop() == 0
        for server in servers:
            server.stop()

    assert waiting.returncode == 0, stderr[-2000:]
    counts = site.fetch_counts()
    assert len(counts) == PAGES
    # A page is fetched again only when the dead server held both its claim and its
    # journal entry: some quarter of the pages crawled before, at most half.
    twice = sum(n > 1 for n in counts.values())
    assert twice <= crawled_before // 2, (twice, crawled_before)
    # ... plus, for a page in hand at the kill, the retry of the attempt that met it.
    assert max(counts.values()) <= 3
    print(f"{twice} of {crawled_before} pages crawled before the kill were fetched again")
