"""After each ``crawl`` message: its record out, the URL marked done, the crawl's counters.

In that order, so that a worker dying in between never loses a record: until the
URL is marked done its message is redone when redelivered.  Marking it done (with
a CAS) says whether this was the message's first ending, which the counters count
once, with the journal's entry that says so, in one round trip a server; a worker
dying between the mark and the count leaves the mark without that entry, and a copy
of the message (redelivered, or sent again by its parent) then ends it in its place.
A record the broker refuses sends the message back to the queue, its counters and mark untouched, so
that it is redone and its record sent again.  When the dedup store fails right
then (a restart), each step is tried again for up to ``CRAWLER_STORE_PATIENCE``
seconds (``patience``), the
steps already done not redone: the mark's verdict is kept for the count.  A store
down for longer makes the counters miss that message (``--wait`` does not need them;
``--status`` is off by one) and the URL stays claimed rather than done.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import dramatiq
from dramatiq.middleware import CurrentMessage

from crawler import metrics
from crawler.environment import Lifetimes
from crawler.frontier import claims, counters, digests
from crawler.frontier.keep_alive import KeepAlive
from crawler.items import counting as item_counts
from crawler.middleware import Recorder, install
from crawler.options import CrawlOptions
from crawler.outcomes import CANCELLED, DUPLICATE, FAILED, NOT_FINAL, OWN_ENDINGS
from crawler.records import Record, kwargs_of, without_links
from crawler.stores import StorePool, store_errors
from crawler.stores.client import StoreClient
from crawler.tracking import figures

#: Sends a record to the crawl's seeder: its crawl id, the record, and whether the
#: seeder reads batches (:class:`crawler.tracking.record_queue.Batches`).
Publish = Callable[[str, Record, bool], None]
#: Called with each record and its message, before the bookkeeping.
OnRecord = Callable[[Record, Any], None]
#: Called with the message, what could not be sent, and the broker's error.
Unsent = Callable[[Any, str, BaseException], None]
logger = logging.getLogger(__name__)
#: Seconds between two readings of Memcached's evictions for the metric, per process.
EVICTION_CHECK = 5.0
#: Pauses between those tries: doubling from the first, at most the second.
PAUSES = (0.1, 2.0)
T = TypeVar("T")


def patiently(deadline: float) -> Callable[[Callable[[], T]], T]:
    """Run a step of the bookkeeping, tried again on store errors until ``deadline``
    (a ``time.monotonic()``); the last error is raised."""

    def run(step: Callable[[], T]) -> T:
        pause = PAUSES[0]
        while True:
            try:
                return step()
            except store_errors():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(pause, left))  # the last try comes at the deadline
                pause = min(pause * 2, PAUSES[1])

    return run


def keep_books(
    broker: dramatiq.Broker,
    pool: StorePool,
    lifetimes: Lifetimes,
    *,
    publish: Publish | None = None,
    on_unsent: Unsent | None = None,
    also: OnRecord | None = None,
    on_discover: Callable[[], None] = lambda: None,
    patience: float = 0.0,
) -> None:
    """Add what following a crawl needs to ``broker``'s middleware: Dramatiq's
    ``CurrentMessage`` (claims need it), and a :class:`Recorder` whose records go to
    ``also``, then to :func:`settle`.  The one place the stack is put together, for
    workers, ``--local`` and tests alike.

    Parameters:
      broker(dramatiq.Broker): The broker the ``crawl`` actor is declared on.
      pool(Any): The dedup store's pool (Memcached, or memory in ``--local``).
      lifetimes(Lifetimes): How long the crawl's entries live in it.
      publish(Callable): Sends a record to the crawl's waiting seeder, or None.
      on_unsent(Callable): Told of a record the broker refused.
      also(Callable): Sees each record first (``--local``'s progress and output).
      on_discover(Callable): Called once for each URL enqueued (retries aside).
      patience(float): Seconds to keep trying a dedup store that fails (see :func:`settle`).
    """
    if not any(isinstance(m, CurrentMessage) for m in broker.middleware):
        install(broker, CurrentMessage())
    settle_record = settle(pool, lifetimes, publish, on_unsent, patience)

    def on_record(record: Record, message: Any) -> None:
        if also is not None:
            also(record, message)
        settle_record(record, message)

    install(broker, Recorder(on_record, on_discover))  # its place: crawler.middleware.ORDER


def settle(
    pool: StorePool,
    lifetimes: Lifetimes,
    publish: Publish | None,
    on_unsent: Unsent | None = None,
    patience: float = 0.0,
) -> Callable[[Record, Any], None]:
    """The :class:`~crawler.records.Recorder` callback for a crawl's bookkeeping
    (:class:`Books`).

    Parameters:
      pool(StorePool): The dedup store's pool (Memcached, or memory in --local).
      lifetimes(Lifetimes): How long the crawl's entries live in it; the crawl's journal
        and counters are refreshed from here while its messages end.
      publish(Callable): Sends a record to the crawl's waiting seeder, or None.
      on_unsent(Callable): Told of a record the broker refused (with ``publish``).
      patience(float): Seconds each message's bookkeeping keeps trying a dedup store
        that fails (0: one try, as for ``--local``'s memory, which does not fail).
    """
    return Books(pool, lifetimes, publish, on_unsent, patience)


class Books:
    """A crawl's books after each message, in the order the module says: the record out
    (:meth:`send`), the ending in the store (:meth:`end`), the crawl's keys refreshed
    (:meth:`refresh`).  Parameters: as :func:`settle`'s."""

    def __init__(
        self,
        pool: StorePool,
        lifetimes: Lifetimes,
        publish: Publish | None,
        on_unsent: Unsent | None,
        patience: float,
    ) -> None:
        self.pool, self.lifetimes, self.patience = pool, lifetimes, patience
        self.publish, self.on_unsent = publish, on_unsent
        self.keep_alive = KeepAlive(lifetimes.grace)
        self.next_eviction_check = 0.0  # the metric is read from Memcached's stats now and then

    def __call__(self, record: Record, message: Any) -> None:
        # A message refused as invalid has options that may not pass their check:
        # what can be read of them still names its crawl and its waiting seeder.
        options = CrawlOptions.readable_from_message(kwargs_of(message).get("options"))
        metrics.page_ended(record["outcome"], links=len(record.get("links") or ()))
        if not self.send(record, message, options):
            return
        try:
            # --state's store writes a message's ending to disk as one transaction (a
            # kill leaves its URL marked done and counted, or neither).
            with self.pool.reserve() as client, client.together():
                self.end(client, record, message, options.crawl_id)
        except store_errors() as e:
            # The message is over either way; only its bookkeeping is lost.
            logger.warning(
                "Could not record that %r ended (%s) in the dedup store: %s",
                record["url"],
                record["outcome"],
                e,
            )
            return
        self.refresh(options.crawl_id)

    def send(self, record: Record, message: Any, options: CrawlOptions) -> bool:
        """A final record to the crawl's waiting seeder, when it asked for them; False
        when the broker refused it (the message then comes back, its books untouched)."""
        if not (self.publish and options.collect_records and record["outcome"] not in NOT_FINAL):
            return True
        assert options.crawl_id is not None
        if options.records_without_links:  # the seeder counts it, writes no --output
            record = without_links(record)
        try:
            self.publish(options.crawl_id, record, options.batched_records)
        except Exception as e:  # whatever kept the record from the broker
            if self.on_unsent is None:
                raise
            self.on_unsent(message, "the record", e)
            return False
        return True

    def end(self, client: StoreClient, record: Record, message: Any, crawl_id: str | None) -> None:
        """The message's ending: its URL's claim marked, the crawl's counters and the
        dashboard's figures, its delivery count dropped."""
        step = patiently(time.monotonic() + self.patience)
        outcome, lifetimes = record["outcome"], self.lifetimes
        url = claims.claim_name_of(message, record["url"])
        message_id = message.message_id
        # An invalid message is refused before it claims its URL: no claim to end.
        refused = bool(record.get("invalid_message"))
        ending = claims.UNKNOWN
        if outcome in OWN_ENDINGS:
            tries: list[None] = []

            def finish() -> str:
                tries.append(None)
                return claims.finish(client, url, message_id, crawl_id, lifetimes)

            ending = step(finish)
            if ending == claims.REPEAT and len(tries) > 1:
                # A try that failed may have marked the URL done, its reply lost: whether
                # this ending is the first is then asked of the message's ended mark.
                ending = claims.UNKNOWN
        elif outcome == FAILED and not refused:
            step(lambda: claims.give_up(client, url, message_id, crawl_id, lifetimes))
        elif outcome == DUPLICATE and crawl_id is not None:
            ending = step(lambda: claims.ending_of_duplicate(client, url, message_id, crawl_id))
        if crawl_id is not None:
            first = None if ending == claims.UNKNOWN else ending == claims.FIRST
            added = figures.increments(crawl_id, record, outcome)  # its host's
            added |= item_counts.counted(crawl_id, record)  # its items (crawler status)
            # A first ending is counted with the journal's "finished" in one round trip
            # a server, which no kill splits: the journal's entry says it was counted.
            together = first is True
            if together:
                amounts = counters.amounts_of(crawl_id, outcome, added)
                values = step(self.count_once(client, url, message_id, crawl_id, amounts))
            else:
                values = counters.ended(
                    client, crawl_id, message_id, outcome, lifetimes, first, step, added,
                    self.patience,
                )  # fmt: skip
            if values:
                self.note_figures(client, crawl_id, record, added, values)
            if outcome in OWN_ENDINGS and ending != claims.REPEAT and not together:
                step(lambda: claims.journal_done(client, url, message_id, crawl_id, lifetimes))
        # A message's delivery count goes with its last attempt; a retrying one may
        # still be handed back (the broker refused its retry) and must then count as
        # delivered again, to send its claimed links again.
        if outcome not in (DUPLICATE, CANCELLED, *NOT_FINAL) and not refused:
            step(lambda: claims.attempt_ended(client, message))

    def count_once(
        self, client: StoreClient, url: str, message_id: str, crawl_id: str, amounts: dict[str, int]
    ) -> Callable[[], dict[str, int]]:
        """The step that counts a first ending with its journal entry; tried again after
        a store error only if the journal does not hold the entry (a try whose reply was
        lost counted it: its values are not known, so none are returned)."""
        tries: list[None] = []
        digest, owner = digests.url_digest(url, crawl_id), digests.owner_token(message_id)

        def count() -> dict[str, int]:
            if tries and claims.ending_counted(client, crawl_id, digest, owner):
                return {}
            tries.append(None)
            return claims.journal_done(client, url, message_id, crawl_id, self.lifetimes, amounts)

        return count

    def note_figures(
        self,
        client: StoreClient,
        crawl_id: str,
        record: Record,
        added: dict[str, int],
        values: dict[str, int],
    ) -> None:
        """The dashboard's: a host seen for the first time, a failure among the latest."""
        grace = self.lifetimes.grace
        figures.note_new_host(client, crawl_id, record, added, values, grace)
        if record["outcome"] == FAILED:
            number = values[counters.crawl_key(crawl_id, FAILED)]
            figures.note_failure(client, crawl_id, record, number, grace)

    def refresh(self, crawl_id: str | None) -> None:
        """The crawl's journal and counters kept alive; now and then, the metric of
        Memcached's evictions."""
        try:
            with self.pool.reserve() as client:
                if crawl_id is not None:
                    self.keep_alive(client, crawl_id)
                if time.monotonic() >= self.next_eviction_check:
                    evictions = counters.memcached_evictions(client)
                    if evictions is not None:
                        metrics.memcached_evictions(evictions)
                    self.next_eviction_check = time.monotonic() + EVICTION_CHECK
        except store_errors() as e:  # the ending is counted; the refresh comes at its next turn
            logger.warning("Could not refresh the crawl's keys in the dedup store: %s", e)
