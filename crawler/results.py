"""Records travel from the workers to a waiting seeder on the crawl's own broker.

On Redis a list, on RabbitMQ a queue, named after the crawl.  The seeder creates it
before seeding; a worker that finds none (nobody waits) publishes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from crawler.records import Record

#: A results queue nobody reads for a day is deleted by RabbitMQ.
EXPIRES_MS = 24 * 3600 * 1000
#: Records the seeder takes (Redis) or acknowledges (RabbitMQ) at once.
BATCH = 100
#: Seconds the seeder lets records gather once it has read every waiting one.
GATHER = 0.05


def name(crawl_id: str) -> str:
    return f"crawler.records.{crawl_id}"


def _is_redis(broker: dramatiq.Broker) -> bool:
    return isinstance(broker, RedisBroker)


def publish(broker: dramatiq.Broker, crawl_id: str, record: Record) -> None:
    body = json.dumps(record, ensure_ascii=False).encode()
    if _is_redis(broker):
        client: Any = broker.client  # type: ignore[attr-defined]
        pipeline = client.pipeline(transaction=False)  # one round trip
        pipeline.rpush(name(crawl_id), body).expire(name(crawl_id), EXPIRES_MS // 1000)
        pipeline.execute()
    else:
        broker.channel.basic_publish(exchange="", routing_key=name(crawl_id), body=body)  # type: ignore[attr-defined]


def _gather(deadline: float) -> None:
    time.sleep(max(min(GATHER, deadline - time.monotonic()), 0))


class Reader:
    """The seeder's end: :meth:`read` yields records as they come, waiting at most ``timeout``."""

    def __init__(self, broker: dramatiq.Broker, crawl_id: str) -> None:
        self.broker = broker
        self.queue = name(crawl_id)
        if not _is_redis(broker):
            channel = broker.channel  # type: ignore[attr-defined]
            channel.queue_declare(self.queue, arguments={"x-expires": EXPIRES_MS})

    def read(self, timeout: float) -> Generator[Record, None, None]:
        """Records for up to ``timeout`` seconds, or fewer once none is waiting.  The
        caller may stop early once it needs no more: on RabbitMQ what it read is
        acknowledged and the rest goes back to the queue; on Redis the rest of the
        batch already taken is dropped.

        Fetched and acknowledged in batches: one round trip per batch, not per record;
        once none is left, the next ones are left to gather for a moment.
        """
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
        if not _is_redis(self.broker):
            self.broker.channel.queue_delete(self.queue)  # type: ignore[attr-defined]
