"""After each ``crawl`` message: its record out, the crawl's counters, the URL marked done.

In that order, so that a worker dying in between never loses a record: until the
URL is marked done its message is redone when redelivered.  A record the broker
refuses sends the message back to the queue, its counters and mark untouched, so
that it is redone and its record sent again.  When Memcached fails right then,
the counters miss that message (``--wait`` does not need them; ``--status`` is
off by one) and the URL stays claimed rather than done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pylibmc

from crawler import claims, counters, metrics
from crawler.options import CrawlOptions
from crawler.records import (
    CRAWLED,
    DEFERRED,
    DISALLOWED,
    NOT_HTML,
    OVER_BUDGET,
    RETRYING,
    Record,
)
from crawler.sending import BROKER_ERRORS

#: Outcomes after which the URL's claim is finished: its own message ended it.
OWN_ENDINGS = (CRAWLED, NOT_HTML, OVER_BUDGET, DISALLOWED)

Publish = Callable[[str, Record], None]
#: Called with the message, what could not be sent, and the broker's error.
Unsent = Callable[[Any, str, BaseException], None]
logger = logging.getLogger("example")


def settle(
    pool: Callable[[], Any], publish: Publish | None, on_unsent: Unsent | None = None
) -> Callable[[Record, Any], None]:
    """The :class:`~crawler.records.Recorder` callback for a crawl's bookkeeping.

    Parameters:
      pool(Callable): Returns the dedup store's pool (Memcached, or memory in --local).
      publish(Callable): Sends a record to the crawl's waiting seeder, or None.
      on_unsent(Callable): Told of a record the broker refused (with ``publish``).
    """

    def on_record(record: Record, message: Any) -> None:
        options = CrawlOptions.from_message(message.kwargs.get("options"))
        outcome = record["outcome"]
        metrics.page_ended(outcome, links=len(record.get("links") or ()))
        if publish and options.collect_records and outcome not in (RETRYING, DEFERRED):
            assert options.crawl_id is not None
            try:
                publish(options.crawl_id, record)
            except BROKER_ERRORS as e:
                if on_unsent is None:
                    raise
                on_unsent(message, "the record", e)
                return
        try:
            with pool().reserve() as client:
                if options.crawl_id is not None:
                    counters.ended(client, options.crawl_id, message.message_id, outcome)
                if outcome in OWN_ENDINGS:
                    claims.finish(client, claims.url_hash(record["url"]))
        except pylibmc.Error as e:
            # The message is over either way; only its bookkeeping is lost.
            logger.warning(
                "Could not record that %r ended (%s) in Memcached: %s", record["url"], outcome, e
            )

    return on_record
