"""Records travel from the workers to a waiting seeder on the crawl's own broker.

On Redis a list, on RabbitMQ a durable queue, named after the crawl.  The seeder
creates it before seeding and deletes it on any exit it lives through; one killed
outright leaves it for :data:`READER_GONE_MS` at most, after which workers stop
publishing into it (RabbitMQ deletes an unused queue; on Redis the seeder's
presence key expires).  Both ends ride out broker restarts: a worker's record
that cannot be published (on RabbitMQ: confirmed) sends its message back (see
:mod:`crawler.brokers.returning`),
and the seeder reconnects.  A worker's threads send the records that end together
as one message (:class:`Batches`); the seeder reads a message of one record too.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Generator
from typing import Any

import dramatiq
import pika
import pika.exceptions
from dramatiq.brokers.redis import RedisBroker
from dramatiq.errors import ConnectionClosed

from crawler.brokers.returning import PUBLISH_ATTEMPTS
from crawler.records import Record

#: How long the records of a crawl are kept once no seeder reads them (killed, or
#: cut off by an outage longer than this).
READER_GONE_MS = 10 * 60 * 1000
#: Records the seeder takes (Redis) or acknowledges (RabbitMQ) at once.
BATCH = 100
#: Seconds the seeder lets records gather once it has read every waiting one.
GATHER = 0.05

#: Move up to ARGV[1] records from the crawl's list to its list of records taken (kept as
#: long as the records), and return them.
_TAKE = """
local taken = redis.call('lrange', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #taken > 0 then
    redis.call('ltrim', KEYS[1], #taken, -1)
    redis.call('rpush', KEYS[2], unpack(taken))
    redis.call('pexpire', KEYS[2], ARGV[2])
end
return taken
"""

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


def _taken_key(crawl_id: str) -> str:
    """Redis: the records the seeder took and has not yet seen through."""
    return f"crawler.records.{crawl_id}.taken"


def _is_redis(broker: dramatiq.Broker) -> bool:
    return isinstance(broker, RedisBroker)


class Sender:
    """Where a worker's records go: on Redis the crawl's list, on RabbitMQ the crawl's
    queue through a channel of the records' own in confirm mode, so that a record
    counts as sent only once RabbitMQ holds it.  Without the confirm, a record
    written to a connection that RabbitMQ drops (a restart) is lost while its message
    is marked done: the message's redelivery then ends as a duplicate and the page
    is missing from ``--output``.  Not thread-safe: :class:`Batches` sends one batch
    at a time.

    Parameters:
      broker(dramatiq.Broker): The crawl's broker.
    """

    def __init__(self, broker: dramatiq.Broker) -> None:
        self.broker = broker
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None

    def send(self, crawl_id: str, body: bytes) -> None:
        """Send ``body`` to the crawl's seeder; raise a broker error if it cannot be sent."""
        if _is_redis(self.broker):
            client: Any = self.broker.client  # type: ignore[attr-defined]
            push = client.register_script(_PUSH_IF_READ)  # EVALSHA: the script is sent once
            push(keys=[_reader_key(crawl_id), name(crawl_id)], args=[body, READER_GONE_MS])
            return
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                if self._channel is None:
                    parameters = self.broker.parameters  # type: ignore[attr-defined]
                    self._connection = pika.BlockingConnection(parameters)
                    self._channel = self._connection.channel()
                    self._channel.confirm_delivery()
                # Not mandatory: once the seeder is gone (its queue with it), RabbitMQ
                # confirms and drops the record, as the seeder wants.
                self._channel.basic_publish(
                    exchange="",
                    routing_key=name(crawl_id),
                    body=body,
                    properties=pika.BasicProperties(delivery_mode=2),
                )
                return
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError) as e:
                self.close()  # the next attempt opens a fresh connection and channel
                if attempt == PUBLISH_ATTEMPTS:
                    raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]

    def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(pika.exceptions.AMQPError):
                connection.close()


class RecordNotSent(Exception):
    """A record that another thread's batch was to carry, and did not."""


class _Pending:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent = False
        self.error: BaseException | None = None


class Batches:
    """:func:`publish` for many worker threads at once: records that end together go
    to the seeder as one message (a JSON list), which costs the worker, the broker
    and the seeder about what one record does.  Only for a seeder that asked for
    batches (``batched``: its crawl's ``batched_records`` option); an older one gets
    one record a message.

    A group commit, with no thread or timer of its own: a thread with a record
    appends it, then takes the send lock; if the thread that held the lock sent its
    record already, it returns; else it sends every record waiting for that crawl.
    Each call returns once its own record is on the broker, or raises: the sender
    its own error, the others a :class:`RecordNotSent` made of it (so that one
    thread's time limit is not another's), and a thread whose record was taken by a
    sender interrupted before it could say so, a :class:`RecordNotSent` too.  Each
    message's bookkeeping then goes on as with :func:`publish` (a record not sent
    sends its message back).
    """

    def __init__(self, broker: dramatiq.Broker) -> None:
        self.sender = Sender(broker)
        self._waiting: dict[str, list[_Pending]] = {}
        self._waiting_lock = threading.Lock()
        self._sending = threading.Lock()

    def __call__(self, crawl_id: str, record: Record, batched: bool = True) -> None:
        if not batched:
            with self._sending:
                _send(self.sender, crawl_id, json.dumps(record, ensure_ascii=False).encode())
            return
        pending = _Pending(json.dumps(record, ensure_ascii=False).encode())
        with self._waiting_lock:
            self._waiting.setdefault(crawl_id, []).append(pending)
        with self._sending:
            if not pending.sent:
                self._send_waiting(crawl_id, pending)
        if pending.error is not None:
            raise RecordNotSent(f"its batch was not sent: {pending.error!r}") from pending.error

    def _send_waiting(self, crawl_id: str, pending: _Pending) -> None:
        """Send every record waiting for ``crawl_id``, ``pending``'s among them."""
        batch: list[_Pending] = []
        try:
            with self._waiting_lock:
                if not any(each is pending for each in self._waiting.get(crawl_id, ())):
                    raise RecordNotSent("the thread sending its batch was interrupted")
                batch = self._waiting.pop(crawl_id)
            bodies = [each.body for each in batch]
            _send(self.sender, crawl_id, b"[" + b",".join(bodies) + b"]")
        except BaseException as e:
            for each in batch:
                if each is not pending:
                    each.error = e
            raise
        finally:
            for each in batch:
                each.sent = True

    def close(self) -> None:
        with self._sending:
            self.sender.close()


def _send(sender: Sender, crawl_id: str, body: bytes) -> None:
    sender.send(crawl_id, body)


def _records(body: bytes) -> list[Record]:
    """The records of one message: a batch (a JSON list), or one record."""
    records = json.loads(body)
    return records if isinstance(records, list) else [records]


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
        caller may stop early once it needs no more: on RabbitMQ the messages it read
        are acknowledged and the rest goes back to the queue (a message of several
        records read in part too); on Redis the batch taken comes again, first, at the
        next read.

        Fetched and acknowledged in batches: one round trip per batch, not per record;
        once none is left, the next ones are left to gather for a moment.
        """
        self._declare()  # again: the broker may have restarted since, and Redis keeps it alive
        deadline = time.monotonic() + timeout
        if _is_redis(self.broker):
            yield from self._read_redis(deadline)
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
                records = _records(body)
                yield from records[:-1]
                # Acknowledged once its last record is read: a message read in part
                # comes back (the seeder skips the records it saw).
                unacknowledged = method.delivery_tag
                yield from records[-1:]
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

    def _read_redis(self, deadline: float) -> Generator[Record, None, None]:
        """Redis's records: moved, not popped, to the crawl's list of records taken, and
        dropped from there once the caller saw them, so that a reply Redis applied and
        never delivered (it stopped right then) is not a record lost: the next read
        gives the records still taken first (the seeder skips what it saw)."""
        client: Any = self.broker.client  # type: ignore[attr-defined]
        take = client.register_script(_TAKE)
        taken = _taken_key(self.crawl_id)
        bodies = client.lrange(taken, 0, -1)
        while True:
            for body in bodies:
                yield from _records(body)
            if bodies:
                client.delete(taken)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if 0 < len(bodies) < BATCH:
                _gather(deadline)
            bodies = take(keys=[self.queue, taken], args=[BATCH, READER_GONE_MS])
            if not bodies:
                first = client.blmove(self.queue, taken, max(remaining, 0.01), "LEFT", "RIGHT")
                if first is None:
                    return
                bodies = [first, *take(keys=[self.queue, taken], args=[BATCH - 1, READER_GONE_MS])]

    def close(self) -> None:
        """Delete the records queue, so workers stop publishing into it; a broker that
        does not answer is left to expire it."""
        try:
            if _is_redis(self.broker):
                client: Any = self.broker.client  # type: ignore[attr-defined]
                client.delete(_reader_key(self.crawl_id), self.queue, _taken_key(self.crawl_id))
            else:
                self.broker.channel.queue_delete(self.queue)  # type: ignore[attr-defined]
        except Exception:
            pass
