"""A pool of Memcached servers: keys spread by consistent hashing, and a crawl that goes
on, and ends, when one server dies."""

from __future__ import annotations

import time
from typing import Any

import pytest
from dramatiq.middleware.time_limit import TimeLimitExceeded
from pymemcache.client import base

from crawler.stores.memcached import (
    MemcachedClient,
    MemcachedError,
    NotFound,
    Servers,
    ThreadMappedPool,
    client_of,
)
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, MemcachedProcess, wait_for_crawl
from tests.workers import WorkerProcesses, environment

#: Enough that a third of them crawled before the kill puts some hundred keys on each server.
PAGES = 600


def test_losing_one_of_three_servers_moves_only_its_share_of_the_keys() -> None:
    servers = [MemcachedProcess(memory_mb=16) for _ in range(3)]
    try:
        keys = [f"key-{i}" for i in range(3000)]
        with client_of([s.servers for s in servers]) as all_three:
            assert all_three.add_multi(dict.fromkeys(keys, b"1"), time=60) == []
        with client_of([s.servers for s in servers[:2]]) as two:
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


def pool_of(servers: list[MemcachedProcess], timeout: float) -> ThreadMappedPool:
    """A pool of ``servers`` whose calls and dead servers wait ``timeout`` seconds."""
    return ThreadMappedPool(
        Servers([s.servers for s in servers], timeout=timeout, dead_timeout=timeout)
    )


def test_a_killed_server_leaves_the_ring_without_failing_a_call_and_rejoins_once_probed() -> None:
    servers = [MemcachedProcess(), MemcachedProcess()]
    try:
        pool = pool_of(servers, timeout=0.5)
        keys = [f"key-{i}" for i in range(200)]
        with pool.reserve() as client, client:
            assert client.add_multi(dict.fromkeys(keys, b"1"), time=60) == []
            assert servers[1].process is not None
            servers[1].process.kill()
            servers[1].process.wait()
            # The call that meets the dead server (on the connection it dropped, then on
            # one it refuses) goes on to the server left: no call fails.
            found = client.get_multi(keys)
            assert pool.servers.ring() == [servers[0].servers]
            # Its keys are still there, the dead one's are gone, and new ones are stored.
            assert 0.3 * len(keys) < len(found) < 0.7 * len(keys)
            assert client.add_multi(dict.fromkeys(keys, b"2"), time=60) == list(found)
            assert len(client.get_multi(keys)) == len(keys)
            assert [address for address, _ in client.get_stats()] == [servers[0].servers]
            # Its probes are refused: it stays out, and no live call meets it.
            time.sleep(0.6)
            assert len(client.get_multi(keys)) == len(keys)
            assert pool.servers.ring() == [servers[0].servers]
            # Started again, empty: the next probe answers and it takes its share back.
            servers[1].start()
            time.sleep(0.6)
            assert len(client.get_multi(keys)) == len(found)
            assert pool.servers.ring() == [s.servers for s in servers]
    finally:
        for server in servers:
            server.stop()


def test_every_call_goes_on_when_a_server_refuses_it(own_memcached: MemcachedProcess) -> None:
    dead = MemcachedProcess()
    dead.stop()  # a port nobody listens on: every connection to it is refused
    pool = pool_of([own_memcached, dead], timeout=0.5)
    keys = [f"key-{i}" for i in range(50)]
    with pool.reserve() as client, client:
        assert client.add_multi(dict.fromkeys(keys, b"1"), time=60) == []
    for call in (
        lambda c: c.get_multi(keys),
        lambda c: c.incr_and_append(dict.fromkeys(keys, 1), dict.fromkeys(keys, b"x")),
        lambda c: [c.add(key, b"2", time=60) for key in keys],
        lambda c: c.touch_multi(keys, 60),
    ):
        pool = pool_of([own_memcached, dead], timeout=0.5)  # both in the ring again
        with pool.reserve() as client, client:
            call(client)
            assert pool.servers.ring() == [own_memcached.servers]
    with pool_of([own_memcached, dead], timeout=0.5).reserve() as client, client:
        assert len(client.get_multi(keys)) == len(keys)


def test_a_lone_server_that_restarts_is_used_again_by_the_next_call(
    own_memcached: MemcachedProcess,
) -> None:
    with client_of([own_memcached.servers]) as client:
        assert_used_again(client, own_memcached)


def assert_used_again(client: MemcachedClient, own_memcached: MemcachedProcess) -> None:
    assert client.add("claim", b"owner", time=60)
    own_memcached.stop()
    with pytest.raises(MemcachedError):
        client.get("claim")
    own_memcached.start()
    assert client.get("claim") is None and client.add("claim", b"owner", time=60)


def test_the_client_answers_as_pylibmc_did(own_memcached: MemcachedProcess) -> None:
    with client_of([own_memcached.servers]) as client:
        assert_answers_as_pylibmc(client)


def assert_answers_as_pylibmc(client: MemcachedClient) -> None:
    long_key = "rate:" + "x" * 300 + " with spaces"
    assert client.set(long_key, b"kept", time=60) and client.get(long_key) == b"kept"
    assert client.add("number", 1, time=60) and client.incr("number", 41) == 42
    assert client.get("number") == 42 and client.decr("number", 50) == 0
    with pytest.raises(NotFound):
        client.incr("missing")
    assert client.set("text", "é", time=60) and client.get("text") == "é"
    with pytest.raises(TypeError, match="not dict"):
        client.set("object", {"pickled": "never"})
    value, token = client.gets("missing")
    assert (value, token) == (None, None)
    assert client.cas("missing", b"x", b"1", time=60) is False


def test_a_server_that_hangs_stays_in_the_ring_and_keeps_its_keys() -> None:
    """A hung server may be alive with its keys: taken out and back, it would hold
    claims that contradict those the others took meanwhile."""
    servers = [MemcachedProcess(), MemcachedProcess()]
    try:
        pool = pool_of(servers, timeout=0.3)
        keys = [f"key-{i}" for i in range(100)]
        with pool.reserve() as client, client:
            assert client.add_multi(dict.fromkeys(keys, b"1"), time=60) == []
            servers[1].pause()
            with pytest.raises(MemcachedError, match="timed out"):
                client.get_multi(keys)
            with pytest.raises(MemcachedError, match="timed out"):
                client.get_multi(keys)
            servers[1].resume()
            assert len(client.get_multi(keys)) == len(keys)
    finally:
        for server in servers:
            server.stop()


def test_a_call_interrupted_mid_reply_leaves_nothing_for_the_next_call_to_read(
    own_memcached: MemcachedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dramatiq's time limit raises in the worker thread wherever it is, a pure-Python
    client's read included: the reply it was reading must not become the next one's."""
    with client_of([own_memcached.servers]) as client:
        assert client.set("first", b"1", time=60) and client.set("second", b"2", time=60)
        read_line, interrupted = base._readline, list[bool]()

        def interrupted_once(sock: Any, buf: bytes) -> Any:
            if not interrupted:
                interrupted.append(True)
                raise TimeLimitExceeded()
            return read_line(sock, buf)

        monkeypatch.setattr(base, "_readline", interrupted_once)
        with pytest.raises(TimeLimitExceeded):
            client.get("first")
        assert client.get("second") == b"2"
