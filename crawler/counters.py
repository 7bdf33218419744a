"""Per-crawl counters that every worker updates and the seeder reads, kept in Memcached.

``outstanding`` is the heart of "finished": it grows by each new URL before its
message is sent and shrinks once when a message ends for good, so it is 0 only
when nothing is queued, in flight or waiting for a retry.
"""

from __future__ import annotations

from typing import Any

import pylibmc

from crawler.records import (
    CRAWLED,
    DEFERRED,
    DISALLOWED,
    DUPLICATE,
    FAILED,
    NOT_HTML,
    OVER_BUDGET,
    RETRYING,
)

#: How long a crawl's counters are kept after their last change, in seconds.
COUNTER_TTL = 7 * 24 * 3600
OUTSTANDING, DISCOVERED = "outstanding", "discovered"
#: The outcomes that end a message, each counted once per message.
ENDINGS = (CRAWLED, NOT_HTML, DUPLICATE, OVER_BUDGET, DISALLOWED, FAILED)
#: Every counter a crawl has.
NAMES = (OUTSTANDING, DISCOVERED, *ENDINGS, RETRYING, DEFERRED)


def _key(crawl_id: str, name: str) -> str:
    return f"crawl:{crawl_id}:{name}"


def _add(client: Any, key: str, amount: int) -> None:
    """Add ``amount`` to a counter: one round trip once the counter exists."""
    if not amount:
        return
    try:
        client.incr(key, amount)
    except (pylibmc.NotFound, KeyError):  # KeyError: the in-memory store of --local
        if not client.add(key, amount, time=COUNTER_TTL):
            client.incr(key, amount)


def start(client: Any, crawl_id: str, seeds: int) -> None:
    """Count the seeds as discovered and outstanding, before they are sent."""
    _add(client, _key(crawl_id, DISCOVERED), seeds)
    _add(client, _key(crawl_id, OUTSTANDING), seeds)


def discovered(client: Any, crawl_id: str, new_urls: int) -> None:
    """Count newly claimed links, before their messages are sent."""
    start(client, crawl_id, new_urls)


def ended(client: Any, crawl_id: str, message_id: str, outcome: str) -> None:
    """Count a message's outcome; a final one ends the message, once even if redelivered."""
    if outcome in (RETRYING, DEFERRED):
        _add(client, _key(crawl_id, outcome), 1)
    elif client.add(f"ended:{message_id}", 1, time=COUNTER_TTL):
        _add(client, _key(crawl_id, outcome), 1)
        client.decr(_key(crawl_id, OUTSTANDING), 1)


def read(client: Any, crawl_id: str) -> dict[str, int] | None:
    """Every counter of the crawl, or None when the crawl is unknown."""
    found = client.get_multi([_key(crawl_id, name) for name in NAMES])
    if not found:
        return None
    return {name: int(found.get(_key(crawl_id, name), 0)) for name in NAMES}
