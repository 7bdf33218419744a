"""Records travel from the workers to a waiting seeder on the crawl's own broker.

On Redis a list, on RabbitMQ a durable queue, named after the crawl.  The seeder
creates it before seeding and deletes it on any exit it lives through; one killed
outright leaves it for :data:`~crawler.brokers.record_transport.READER_GONE_MS` at most, after
which workers stop publishing into it (RabbitMQ deletes an unused queue; on Redis the
seeder's presence key expires).  Both ends ride out broker restarts: a worker's record
that cannot be published (on RabbitMQ: confirmed) sends its message back (see
:mod:`crawler.brokers.returning`),
and the seeder reconnects.  A worker's threads send the records that end together
as one message (:class:`Batches`); the seeder reads a message of one record too.

How each broker carries them is its own: :class:`crawler.brokers.record_transport.RecordTransport`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Generator

import dramatiq

from crawler.brokers.record_transport import (
    TAKE_RECORDS,
    RecordSender,
    name,
    taken_key,
    transport,
)
from crawler.records import Record

__all__ = ["Batches", "Reader", "RecordNotSent", "name"]

# Redis's, under the names the tests know them by.
_TAKE = TAKE_RECORDS
_taken_key = taken_key


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
        self.sender = transport(broker).record_sender()
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


def _send(sender: RecordSender, crawl_id: str, body: bytes) -> None:
    sender.send(crawl_id, body)


class Reader:
    """The seeder's end: :meth:`read` yields records as they come, waiting at most ``timeout``.

    A broker error leaves :meth:`read` as it is raised; the next :meth:`read` opens a
    new connection, so the caller may keep reading once the broker is back.
    """

    def __init__(self, broker: dramatiq.Broker, crawl_id: str) -> None:
        self.broker = transport(broker)
        self.crawl_id = crawl_id
        self.queue = name(crawl_id)
        self.broker.declare_records(crawl_id)

    def reconnect(self) -> None:
        """Drop this thread's broker connection; the next read opens a new one."""
        self.broker.reconnect_reader()

    def read(self, timeout: float) -> Generator[Record, None, None]:
        """Records for up to ``timeout`` seconds, or fewer once none is waiting.  The
        caller may stop early once it needs no more: on RabbitMQ the messages it read
        are acknowledged and the rest goes back to the queue (a message of several
        records read in part too); on Redis the batch taken comes again, first, at the
        next read.

        Fetched and acknowledged in batches: one round trip per batch, not per record;
        once none is left, the next ones are left to gather for a moment.
        """
        # Declared again: the broker may have restarted since, and Redis keeps it alive.
        self.broker.declare_records(self.crawl_id)
        yield from self.broker.read_records(self.crawl_id, timeout)

    def close(self) -> None:
        """Delete the records queue, so workers stop publishing into it; a broker that
        does not answer is left to expire it."""
        with contextlib.suppress(Exception):
            self.broker.delete_records(self.crawl_id)
