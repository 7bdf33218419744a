"""A Memcached too small for the crawl: its evictions are said, never silent, and the
crawl still ends, each page fetched once.

The Memcached is shared, as a developer's often is: another tenant keeps writing to it
(:class:`Tenant`), so that the crawl's own keys are evicted a few seconds after they are
written (Memcached evicts the least recently used), without a crawl big enough to fill
it alone (12,000 pages and 78 s on the Redis broker; 2,000 now)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from pymemcache.client.base import Client

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

PAGES = 2_000
#: What the other tenant writes: items of the size of the crawl's URL claims (Memcached
#: evicts within a slab class, the items of one size: here the first, 96-byte chunks).
FILLER = b"x" * 8


class Tenant(threading.Thread):
    """Another user of the Memcached, writing items of its own (10,000 a second)
    until stopped: once the memory is full, each of its writes evicts the least recently
    used item, the crawl's as well as its own."""

    def __init__(self, servers: str) -> None:
        super().__init__(daemon=True)
        host, port = servers.split(":")
        self.client = Client((host, int(port)))
        self.stopped = threading.Event()

    def fill(self) -> None:
        """Take the whole room of the crawl's claims' size: from then on, each item of
        that size written evicts one."""
        written = 0
        while not int(self.client.stats("items").get(b"items:1:evicted", 0)):
            self.client.set_many({f"tenant:-{written + i}": FILLER for i in range(1000)})
            written += 1000

    def run(self) -> None:
        written = 0
        while not self.stopped.wait(0.1):
            self.client.set_many({f"tenant:{written + i}": FILLER for i in range(1000)})
            written += 1000

    def stop(self) -> None:
        if self.is_alive():
            self.stopped.set()
            self.join()
            self.client.close()


def keys_of_others(servers: str) -> int:
    """How many items not the tenant's the Memcached holds (``lru_crawler metadump``)."""
    host, port = servers.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(b"lru_crawler metadump all\r\n")
        dump = b""
        while not dump.endswith(b"END\r\n"):
            dump += connection.recv(65536)
    return sum(
        1 for line in dump.split(b"\n") if line.startswith(b"key=") and b"key=tenant" not in line
    )


WARNING = "items during this crawl: some pages may be fetched twice; give it more memory"


# On the Redis broker, which also keeps its delivery counts in Memcached: the most items
# per page, so the most evictions.  (`benchmarks/memory.py evict` crawls on RabbitMQ.)
@pytest.mark.parametrize("broker_env", ["redis_env"])
def test_a_crawl_in_a_memcached_that_evicts_ends_says_so_and_fetches_each_page_once(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Evicts after some 14,000 small items, the least recently used first (a plain LRU:
    # the segmented one evicts the tenant's items, never read, before the crawl's).
    small = MemcachedProcess(memory_mb=2, options=("-o", "no_lru_maintainer"))
    tenant = Tenant(small.servers)
    env = environment(
        **request.getfixturevalue(broker_env),
        **FAST_FAILURES,
        MEMCACHED_SERVERS=small.servers,
        dramatiq_prom_db=str(tmp_path),
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=3))
    workers = WorkerProcesses(env, processes=2, threads=8)
    tenant.fill()
    tenant.start()
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        deadline = time.monotonic() + 120
        while WARNING not in (status := seed(env, "--status", crawl_id)).stdout:
            assert time.monotonic() < deadline, status.stdout
            time.sleep(1)
        # Each worker process reads Memcached's stats for the metric every few seconds.
        port = metrics_port(env)
        while metric(metrics := read_metrics(port), "crawler_memcached_evictions") == 0:
            assert time.monotonic() < deadline, metrics
            time.sleep(0.5)
        stdout, stderr = waiting.communicate(timeout=180)
        tenant.stop()
        kept = keys_of_others(small.servers)
    finally:
        workers.stop()
        tenant.stop()
        small.stop()

    assert status.returncode == 0
    assert status.stdout.splitlines()[-1].startswith("Memcached evicted ")
    assert metric(metrics, "crawler_memcached_evictions") > 0
    # The crawl's own items were evicted too: each page's claim outlives the crawl.
    assert kept < PAGES, kept
    # The crawl ended by itself, every page fetched, none twice: the journal held.
    assert waiting.returncode == 0, stderr[-2000:]
    assert f"{PAGES} pages fetched" in stdout, stdout
    assert stdout.splitlines()[-1].startswith("Memcached evicted ")
    assert WARNING in stdout.splitlines()[-1]
    counts = site.fetch_counts()
    assert len(counts) == PAGES
    assert max(counts.values()) == 1
