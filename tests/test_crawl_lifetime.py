"""A crawl outlives its claims: the journal answers for every URL after its claim expired,
and the crawl's journal and counters are refreshed while it goes on."""

from __future__ import annotations

import time
from typing import Any

import pytest

from crawler.frontier import claims, journal
from crawler.frontier.digests import url_digest
from crawler.stores.memcached import MemcachedClient
from crawler.stores.redis import RedisStorePool
from tests.site_server import SiteServer, html, page_path
from tests.support import FAST_FAILURES, crawl_id_of
from tests.workers import WorkerProcesses, environment, seed

PAGES = 100
#: Seconds a claim lasts, and a crawl's journal and counters unless refreshed.
CLAIM_TTL, GRACE = 1, 3


@pytest.mark.parametrize(
    ("broker_env", "dedup"),
    [("rabbitmq_env", "memcached"), ("redis_env", "memcached"), ("rabbitmq_env", "redis")],
)
def test_a_crawl_that_outlives_its_claims_and_grace_fetches_every_page_once(
    broker_env: str,
    dedup: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    memcached: MemcachedClient,
) -> None:
    store: Any = memcached
    stores = {}
    if dedup == "redis":  # DEDUP_URL: the same promise from the Redis store
        server = request.getfixturevalue("own_redis_store")
        server.flush()
        store = RedisStorePool(server.url).client
        stores["DEDUP_URL"] = server.url
    env = environment(
        **request.getfixturevalue(broker_env),
        **stores,
        **FAST_FAILURES,
        CRAWLER_CLAIM_TTL=str(CLAIM_TTL),
        CRAWLER_CRAWL_GRACE=str(GRACE),
    )
    # A chain, one page after the other, each also linking back to the seed and to an
    # early page: those links come long after the early pages' claims expired.
    for i in range(PAGES):
        targets = [min(i + 1, PAGES - 1), 0, i // 2]
        site.pages[page_path(i)] = html(*(site.url(page_path(t)) for t in targets))
    site.delay = 0.06
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        started = time.monotonic()
        crawled = seed(env, site.url(page_path(0)), "--wait")
        took = time.monotonic() - started
        crawl_id = crawl_id_of(crawled.stdout)
        urls = [site.url(page_path(i)) for i in range(PAGES)]
        digests = [url_digest(url, crawl_id) for url in urls]
        journaled = journal.owners(store, crawl_id, digests)
        claimed = store.get_multi([claims.url_hash(url, crawl_id) for url in urls[:10]])
    finally:
        assert workers.stop() == 0

    assert took > 1.5 * GRACE, f"the crawl must outlive its first claims and its grace: {took}"
    assert crawled.returncode == 0, crawled.stderr[-2000:]
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)}
    assert f"{PAGES} pages fetched" in crawled.stdout
    # The first claims were gone long before the crawl ended; the journal answered.
    assert claimed == {}
    assert len(journaled) == PAGES
