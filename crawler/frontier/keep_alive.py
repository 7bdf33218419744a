"""A crawl's journal and counters live as long as the crawl: refreshed while it goes on.

Memcached cannot list a crawl's keys, so the long-lived ones are known by name: the
buckets of the journal's levels in use, the counters and the page budget.  While a
crawl's messages are processed (or its seeder waits), one process at a time refreshes
them all, once every quarter of ``CRAWLER_CRAWL_GRACE``: whichever first adds the
crawl's lease key, in batches of :data:`TOUCH_BATCH`.  A finished or cancelled crawl
is refreshed no more, and its keys expire a grace after.
"""

from __future__ import annotations

import time

from crawler.frontier import counters, journal, politeness
from crawler.stores.client import StoreClient

#: Keys refreshed in one call: a crawl of 10^7 URLs has some 800,000 journal buckets.
TOUCH_BATCH = 10_000


def keys(client: StoreClient, crawl_id: str) -> list[str]:
    return [
        *counters.keys(crawl_id),
        politeness.budget_key(crawl_id),
        *journal.keys(client, crawl_id),
    ]


class KeepAlive:
    """One per process: refreshes each crawl it sees at most once per quarter grace.

    Parameters:
      grace(int): Seconds a crawl's journal and counters live after their last refresh.
    """

    def __init__(self, grace: int) -> None:
        self.grace = grace
        self.period = max(grace // 4, 1)
        self._next: dict[str, float] = {}

    def __call__(self, client: StoreClient, crawl_id: str) -> None:
        now = time.monotonic()
        if self._next.get(crawl_id, 0.0) > now:
            return
        self._next[crawl_id] = now + self.period
        if client.add(counters.crawl_key(crawl_id, "lease"), 1, time=self.period):
            every = keys(client, crawl_id)
            for start in range(0, len(every), TOUCH_BATCH):
                client.touch_multi(every[start : start + TOUCH_BATCH], self.grace)
