"""Records travel from the workers to a waiting seeder on the crawl's own broker.

On Redis a list, on RabbitMQ a durable queue, named after the crawl.  The seeder
creates it before seeding and deletes it on any exit it lives through; one killed
outright leaves it for :data:`READER_GONE_MS` at most, after which workers stop
publishing into it (RabbitMQ deletes an unused queue; on Redis the seeder's
presence key expires).  Both ends ride out broker restarts: a worker's record
that cannot be published sends its message back (see :mod:`crawler.brokers.send_back`),
and the seeder reconnects.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from crawler.brokers.send_back import publish_to_queue
from crawler.following.records import Record

#: How long the records of a crawl are kept once no seeder reads them (killed, or
#: cut off by an outage longer than this).
READER_GONE_MS = 10 * 60 * 1000
#: Records the seeder takes (Redis) or acknowledges (RabbitMQ) at once.
BATCH = 100
#: Seconds the seeder lets records gather once it has read every waiting one.
GATHER = 0.05

#: Push a record only while a seeder is there to read it (its presence key lives).
_PUSH_IF_READ = """
if redis.call('exists', KEYS[1]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[1])
    redis.call('pexpire', KEYS[2], ARGV[2])
end
"""


def name(crawl_id: str) -> str:
    return f"crawler.records.{crawl_id}"


def _reader_key(crawl_id: str) -> str:
    return f"crawler.reader.{crawl_id}"


def _is_redis(broker: dramatiq.Broker) -> bool:
    return isinstance(broker, RedisBroker)


def publish(broker: dramatiq.Broker, crawl_id: str, record: Record) -> None:
    """Send ``record`` to the crawl's seeder; raise a broker error if it cannot be sent."""
    body = json.dumps(record, ensure_ascii=False).encode()
    if _is_redis(broker):
        client: Any = broker.client  # type: ignore[attr-defined]
        push = client.register_script(_PUSH_IF_READ)  # EVALSHA: the script is sent once
        push(keys=[_reader_key(crawl_id), name(crawl_id)], args=[body, READER_GONE_MS])
    else:
        publish_to_queue(broker, name(crawl_id), body)


def _gather(deadline: float) -> None:
    time.sleep(max(min(GATHER, deadline - time.monotonic()), 0))


class Reader:
    """The seeder's end: :meth:`read` yields records as they come, waiting at most ``timeout``.

    A broker error leaves :meth:`read` as it is raised; the next :meth:`read` opens a
    new connection, so the caller may keep reading once the broker is back.
    """

    def __init__(self, broker: dramatiq.Broker, crawl_id: str) -> None:
        self.broker = broker
        self.crawl_id = crawl_id
        self.queue = name(crawl_id)
        self._declare()

    def _declare(self) -> None:
        if _is_redis(self.broker):
            client: Any = self.broker.client  # type: ignore[attr-defined]
            client.set(_reader_key(self.crawl_id), 1, px=READER_GONE_MS)
        else:
            self.broker.channel.queue_declare(  # type: ignore[attr-defined]
                self.queue, durable=True, arguments={"x-expires": READER_GONE_MS}
            )

    def reconnect(self) -> None:
        """Drop this thread's broker connection; the next read opens a new one."""
        if not _is_redis(self.broker):
            del self.broker.connection  # type: ignore[attr-defined]

    def read(self, timeout: float) -> Generator[Record, None, None]:
        """Records for up to ``timeout`` seconds, or fewer once none is waiting.  The
        caller may stop early once it needs no more: on RabbitMQ what it read is
        acknowledged and the rest goes back to the queue; on Redis the rest of the
        batch already taken is dropped.

        Fetched and acknowledged in batches: one round trip per batch, not per record;
        once none is left, the next ones are left to gather for a moment.
        """
        self._declare()  # again: the broker may have restarted since, and Redis keeps it alive
        deadline = time.monotonic() + timeout
        if _is_redis(self.broker):
            client: Any = self.broker.client  # type: ignore[attr-defined]
            while (remaining := deadline - time.monotonic()) > 0:
                first = client.blpop([self.queue], timeout=max(remaining, 0.01))
                if first is None:
                    return
                yield json.loads(first[1])
                bodies = client.lpop(self.queue, BATCH) or []
                yield from map(json.loads, bodies)
                if len(bodies) < BATCH:
                    _gather(deadline)
            return
        channel = self.broker.channel  # type: ignore[attr-defined]
        unacknowledged = None

        def acknowledge_and_cancel() -> None:
            if unacknowledged is not None:
                channel.basic_ack(unacknowledged, multiple=True)
            channel.cancel()

        try:
            for method, _properties, body in channel.consume(
                self.queue, inactivity_timeout=timeout, auto_ack=False
            ):
                if method is None:
                    break
                unacknowledged = method.delivery_tag
                yield json.loads(body)
                if unacknowledged % BATCH == 0:
                    channel.basic_ack(unacknowledged, multiple=True)
                    unacknowledged = None
                if time.monotonic() >= deadline:
                    break
                if not channel.get_waiting_message_count():
                    _gather(deadline)
        except GeneratorExit:  # the caller read all it needed; Ctrl-C and errors pass untouched
            acknowledge_and_cancel()
            raise
        acknowledge_and_cancel()

    def close(self) -> None:
        """Delete the records queue, so workers stop publishing into it; a broker that
        does not answer is left to expire it."""
        try:
            if _is_redis(self.broker):
                client: Any = self.broker.client  # type: ignore[attr-defined]
                client.delete(_reader_key(self.crawl_id), self.queue)
            else:
                self.broker.channel.queue_delete(self.queue)  # type: ignore[attr-defined]
        except Exception:
            pass
