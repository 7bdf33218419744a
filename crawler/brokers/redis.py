"""Dramatiq's Redis broker, prompt on an idle queue and handing back unsent messages."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import redis
from dramatiq.brokers.redis import RedisBroker

from crawler.brokers.hooks import QuickHooks
from crawler.brokers.record_transport import (
    BATCH,
    READER_GONE_MS,
    TAKE_RECORDS,
    gather,
    name,
    records_of,
    taken_key,
)
from crawler.brokers.returning import ReturningConsumer, middleware
from crawler.middleware import SendBack

if TYPE_CHECKING:
    from crawler.records import Record

#: Push a record only while a seeder is there to read it (its presence key lives).
PUSH_RECORD_IF_READ = """
if redis.call('exists', KEYS[1]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[1])
    redis.call('pexpire', KEYS[2], ARGV[2])
end
"""


def reader_key(crawl_id: str) -> str:
    """The waiting seeder's presence: workers push its records only while it lives."""
    return f"crawler.reader.{crawl_id}"


class PromptRedisBroker(QuickHooks, RedisBroker):
    """Dramatiq's ``RedisBroker``, with idle polls capped at ``poll_ms``, its
    consumers handing back the messages ``send_back`` marks.

    Redis has no push: a consumer that finds its queue empty polls again after a
    growing pause, up to the worker's timeout (1 s by default).  A crawl's queue runs
    dry while its first pages are fetched and again near its end, so without the cap
    a page could wait a second for an idle worker.

    A worker whose Redis command fails on the connection takes a new identity (the
    ``broker_id`` its acknowledgements are kept under).  Dramatiq's Redis consumer keeps
    the messages it fetched in its process (prefetched, or delayed until their eta) while
    their ids sit in the worker's acknowledgement set, and drops them from memory when
    its connection fails; a fetch whose reply was lost (Redis killed after applying it)
    puts ids there that the worker never received.  Under the old identity they would
    wait for good, since the worker's heartbeat goes on; a new identity leaves the old
    one's heartbeat to expire, and Redis's maintenance then puts every message it held
    back on the queue.  Those still in hand are delivered once more and skip as
    duplicates of themselves (their claim says so).

    Parameters:
      send_back(SendBack): Marks the messages whose follow-ups the broker refused.
      poll_ms(int): The longest pause between two polls of an empty queue.
    """

    def __init__(self, *, send_back: SendBack, poll_ms: int, **parameters: Any) -> None:
        RedisBroker.__init__(self, middleware=middleware(send_back), **parameters)
        self.send_back = send_back
        self.poll_ms = poll_ms

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        consumer = super().consume(queue_name, prefetch, min(timeout, self.poll_ms))
        return ReturningConsumer(consumer, self.send_back)

    def _dispatch(self, command: str) -> Callable[..., Any]:
        dispatch: Callable[..., Any] = RedisBroker._dispatch(self, command)

        def dispatch_or_renew(*args: Any) -> Any:
            try:
                return dispatch(*args)
            except (redis.ConnectionError, redis.TimeoutError):
                self.broker_id = str(uuid.uuid4())
                raise

        return dispatch_or_renew

    def record_sender(self) -> PushedRecordSender:
        return PushedRecordSender(self)

    def declare_records(self, crawl_id: str) -> None:
        self.client.set(reader_key(crawl_id), 1, px=READER_GONE_MS)

    def read_records(self, crawl_id: str, timeout: float) -> Generator[Record, None, None]:
        """The crawl's records for up to ``timeout`` seconds, or fewer once none is
        waiting: moved, not popped, to the crawl's list of records taken, and dropped
        from there once the caller saw them, so that a reply Redis applied and never
        delivered (it stopped right then) is not a record lost: the next read gives the
        records still taken first (the seeder skips what it saw).  So does a read the
        caller stopped early.

        Taken in batches (:data:`BATCH`): one round trip per batch, not per record;
        once none is left, the next ones are left to gather for a moment.
        """
        deadline = time.monotonic() + timeout
        client: Any = self.client
        take = client.register_script(TAKE_RECORDS)
        queue, taken = name(crawl_id), taken_key(crawl_id)
        bodies = client.lrange(taken, 0, -1)
        while True:
            for body in bodies:
                yield from records_of(body)
            if bodies:
                client.delete(taken)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if 0 < len(bodies) < BATCH:
                gather(deadline)
            bodies = take(keys=[queue, taken], args=[BATCH, READER_GONE_MS])
            if not bodies:
                first = client.blmove(queue, taken, max(remaining, 0.01), "LEFT", "RIGHT")
                if first is None:
                    return
                bodies = [first, *take(keys=[queue, taken], args=[BATCH - 1, READER_GONE_MS])]

    def reconnect_reader(self) -> None:
        """Nothing to drop: the client's next command opens a new connection."""

    def delete_records(self, crawl_id: str) -> None:
        self.client.delete(reader_key(crawl_id), name(crawl_id), taken_key(crawl_id))


class PushedRecordSender:
    """A worker's records pushed to the crawl's list, only while its seeder is there.

    Parameters:
      broker(PromptRedisBroker): The crawl's broker, whose client pushes.
    """

    def __init__(self, broker: PromptRedisBroker) -> None:
        self.broker = broker

    def send(self, crawl_id: str, body: bytes) -> None:
        """Send ``body`` to the crawl's seeder; raise a broker error if it cannot be sent."""
        push = self.broker.client.register_script(PUSH_RECORD_IF_READ)  # EVALSHA: sent once
        push(keys=[reader_key(crawl_id), name(crawl_id)], args=[body, READER_GONE_MS])

    def close(self) -> None:
        """Nothing to close: the broker's client is the broker's."""
