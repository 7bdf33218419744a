"""A crawl's items counted in the dedup store, by the bookkeeping as each message ends
(in the round trip that counts the ending: once a message), for ``crawler status`` and
the dashboard."""

from __future__ import annotations

from crawler.frontier import counters
from crawler.records import Record
from crawler.stores.client import StoreClient

#: The counters' names among the crawl's keys: items kept, items the item pipelines
#: dropped.
ITEMS, DROPPED = "items", "items_dropped"


def items_key(crawl_id: str) -> str:
    return counters.crawl_key(crawl_id, ITEMS)


def dropped_key(crawl_id: str) -> str:
    return counters.crawl_key(crawl_id, DROPPED)


def counted(crawl_id: str, record: Record) -> dict[str, int]:
    """What a message's ending adds to the crawl's items counters (nothing for none)."""
    added = {}
    items, dropped = len(record.get("items") or ()), record.get("dropped_items") or 0
    if items:
        added[items_key(crawl_id)] = items
    if dropped:
        added[dropped_key(crawl_id)] = dropped
    return added


def read(client: StoreClient, crawl_id: str) -> int:
    """How many items the crawl's pages yielded so far (0 when none, or unknown)."""
    return int(client.get(items_key(crawl_id)) or 0)


def read_dropped(client: StoreClient, crawl_id: str) -> int:
    """How many items the crawl's item pipelines dropped so far (0 when none, or unknown)."""
    return int(client.get(dropped_key(crawl_id)) or 0)
