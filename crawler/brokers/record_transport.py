"""The records queue's transport: what a broker does to carry a crawl's records from the
workers to its waiting seeder (:mod:`crawler.tracking.record_queue`).

Each of the crawler's brokers implements :class:`RecordTransport`: RabbitMQ with a
durable queue named after the crawl (:class:`crawler.brokers.rabbitmq.ReturningRabbitmqBroker`),
Redis with a list of the crawl's own (:class:`crawler.brokers.redis.PromptRedisBroker`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

import dramatiq

if TYPE_CHECKING:
    from crawler.records import Record

#: How long the records of a crawl are kept once no seeder reads them (killed, or
#: cut off by an outage longer than this).
READER_GONE_MS = 10 * 60 * 1000
#: Records the seeder takes (Redis) or acknowledges (RabbitMQ) at once.
BATCH = 100
#: Seconds the seeder lets records gather once it has read every waiting one.
GATHER = 0.05


#: Redis's: move up to ARGV[1] records from the crawl's list to its list of records taken (kept as
#: long as the records), and return them.
TAKE_RECORDS = """
local taken = redis.call('lrange', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #taken > 0 then
    redis.call('ltrim', KEYS[1], #taken, -1)
    redis.call('rpush', KEYS[2], unpack(taken))
    redis.call('pexpire', KEYS[2], ARGV[2])
end
return taken
"""


def taken_key(crawl_id: str) -> str:
    """The records the seeder took and has not yet seen through."""
    return f"crawler.records.{crawl_id}.taken"


def name(crawl_id: str) -> str:
    """The crawl's records queue (RabbitMQ) or list (Redis)."""
    return f"crawler.records.{crawl_id}"


def records_of(body: bytes) -> list[Record]:
    """The records of one message: a batch (a JSON list), or one record."""
    records = json.loads(body)
    # Decoded JSON: the records the crawl's workers wrote (crawler.tracking.record_queue).
    return cast("list[Record]", records if isinstance(records, list) else [records])


def gather(deadline: float) -> None:
    """Let records gather for :data:`GATHER` seconds, never past ``deadline``."""
    time.sleep(max(min(GATHER, deadline - time.monotonic()), 0))


class RecordSender(Protocol):
    """A worker's way to send records: one at a time (not thread-safe)."""

    def send(self, crawl_id: str, body: bytes) -> None:
        """Send ``body`` (a record, or a JSON list of them) to the crawl's seeder; raise
        a broker error if it cannot be sent."""

    def close(self) -> None:
        """Let go of what the sender holds (a connection of its own); a later
        :meth:`send` opens what it needs again."""


@runtime_checkable
class RecordTransport(Protocol):
    """A broker that carries a crawl's records from its workers to its waiting seeder."""

    def record_sender(self) -> RecordSender:
        """A new sender of records, for one worker's batches."""

    def declare_records(self, crawl_id: str) -> None:
        """Create the crawl's records queue, or keep it alive: workers publish into it
        only while it is there."""

    def read_records(self, crawl_id: str, timeout: float) -> Generator[Record, None, None]:
        """The crawl's records for up to ``timeout`` seconds, or fewer once none is
        waiting.  The caller may stop early: the records it was not given come again."""

    def reconnect_reader(self) -> None:
        """Drop this thread's connection, if the broker keeps one: the next
        :meth:`read_records` opens a new one."""

    def delete_records(self, crawl_id: str) -> None:
        """Delete the crawl's records queue, so that workers stop publishing into it."""


def transport(broker: dramatiq.Broker) -> RecordTransport:
    """``broker`` as the carrier of a crawl's records, which each of the crawler's
    brokers is (:func:`crawler.brokers.make_broker`)."""
    if not isinstance(broker, RecordTransport):
        raise TypeError(f"{type(broker).__name__} does not carry a crawl's records")
    return broker
