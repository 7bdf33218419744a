"""A crawl's items counted in the dedup store, by the bookkeeping as each message ends
(in the round trip that counts the ending: once a message), for ``crawler status`` and
the dashboard."""

from __future__ import annotations

from crawler.frontier import counters
from crawler.records import Record
from crawler.stores.client import StoreClient

#: The counter's name among the crawl's keys.
ITEMS = "items"


def items_key(crawl_id: str) -> str:
    return counters.crawl_key(crawl_id, ITEMS)


def counted(crawl_id: str, record: Record) -> dict[str, int]:
    """What a message's ending adds to the crawl's items counter (nothing for none)."""
    items = len(record.get("items") or ())
    return {items_key(crawl_id): items} if items else {}


def read(client: StoreClient, crawl_id: str) -> int:
    """How many items the crawl's pages yielded so far (0 when none, or unknown)."""
    return int(client.get(items_key(crawl_id)) or 0)
