"""``--local``'s broker: Dramatiq's ``StubBroker`` in this process, with priorities, its
messages kept on disk too with ``--state`` (:class:`crawler.stores.saved.SavedState`)."""

from __future__ import annotations

import itertools
import queue
import threading
from typing import Any

import dramatiq
from dramatiq.brokers.stub import StubBroker, _StubConsumer, _StubMessageProxy
from dramatiq.common import current_millis, dq_name
from dramatiq.errors import QueueNotFound
from dramatiq.middleware import CurrentMessage

from crawler.brokers.hooks import QuickHooks
from crawler.middleware import CurrentBroker, RetryTurns, install
from crawler.stores.saved import SavedState

#: The option naming a message's row in the state file.
SAVED_ROW = "saved_row"


class PriorityStubBroker(QuickHooks, StubBroker):
    """Dramatiq's ``StubBroker``, its queues handing out the message of highest
    ``broker_priority`` first (``--breadth-first``), as RabbitMQ's do; then in order.

    With a ``saved`` state, each message enqueued is written to it first, under a row of
    its own, and deleted when acknowledged (or dead-lettered): a retry or a deferral,
    enqueued before the attempt it follows is acknowledged, has a row of its own.  A
    message whose very attempt waits already is not enqueued again: a crawl carried on
    puts back the messages that were queued, and a page that was in hand, crawled
    again, sends its links again (as a retried page does), the same messages.
    """

    def __init__(self, saved: SavedState | None = None) -> None:
        super().__init__()
        self.saved = saved
        #: What its messages are crawled with (:func:`serve`'s ``parts``: the crawl's own
        #: stores, handlers, browser and pipeline, read by the actors' bodies through
        #: :func:`crawler.middleware.parts_for`); None: the process's.
        self.crawl_parts: Any = None
        #: Messages enqueued and not yet acknowledged (or dead-lettered), on any of its
        #: queues: a delayed one due is put on its queue before it leaves the delay
        #: queue, and a retry is enqueued before its attempt ends, so never 0 between.
        self.outstanding = 0
        self._counting = threading.Lock()

    def enqueue(
        self, message: dramatiq.Message[Any], *, delay: int | None = None
    ) -> dramatiq.Message[Any]:
        """As ``StubBroker.enqueue`` does, the message kept as it is rather than encoded
        (the process that sends it reads it: three JSON passes a message saved)."""
        if self.saved is not None:
            # A delayed message due, moved to its queue, leaves its row in the delay
            # queue once it is on the queue: not a copy of itself.
            moving = message.options.get(SAVED_ROW) if delay is None else None
            row = self.saved.new_row()
            message = message.copy(options={SAVED_ROW: row})
            # Delayed or not, one attempt: a link resent after an interrupted try
            # (:func:`crawler.frontier.claims.send_claimed`, delayed) is not kept beside
            # its message queued or in hand, which would fetch the page beside it.
            counts = [message.options.get(n, 0) for n in ("retries", "deferrals", "pauses")]
            attempt = f"{message.message_id} {message.queue_name} {counts}"
            if not self.saved.put_message(row, attempt, message.encode(), moving):
                return message  # that attempt waits already: once is enough
        return self._put(message, delay)

    def _put(self, message: dramatiq.Message[Any], delay: int | None) -> dramatiq.Message[Any]:
        queue_name = message.queue_name
        if delay is not None:
            queue_name = dq_name(queue_name)
            eta = current_millis() + delay
            message = message.copy(queue_name=queue_name, options={"eta": eta})
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        self.emit_before("enqueue", message, delay)
        self.settled(-1)
        self.queues[queue_name].put(message)
        self.emit_after("enqueue", message, delay)
        return message

    def settled(self, count: int = 1) -> None:
        """``count`` messages acknowledged or dead-lettered (a negative one: enqueued)."""
        with self._counting:
            self.outstanding -= count

    def kept(self) -> list[dramatiq.Message[Any]]:
        """The messages the state file holds, in the order they were enqueued."""
        assert self.saved is not None
        return [dramatiq.Message.decode(body) for body in self.saved.messages()]

    def restore(self, messages: list[dramatiq.Message[Any]] | None = None) -> int:
        """Put back the messages the state file holds (:meth:`kept`), as they were: how many."""
        kept = self.kept() if messages is None else messages
        for message in kept:
            self._put(message, None)  # under its row already
        return len(kept)

    def declare_queue(self, queue_name: str) -> None:
        if queue_name not in self.queues:
            super().declare_queue(queue_name)
            self.queues[queue_name] = _Priorities()

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 100) -> Any:
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        messages, dead_letters = self.queues[queue_name], self.dead_letters_by_queue[queue_name]
        if self.saved is None:
            return _Consumer(self, messages, dead_letters, prefetch, timeout)
        return _SavedConsumer(self.saved, self, messages, dead_letters, prefetch, timeout)


class _Consumer(_StubConsumer):
    """Dramatiq's stub consumer of a queue of messages kept as they are: each given out a
    copy of its own (its options changed by the worker are that attempt's)."""

    def __init__(
        self,
        broker: PriorityStubBroker,
        messages: queue.Queue[Any],
        dead_letters: list[Any],
        prefetch: int,
        timeout: int,
    ) -> None:
        super().__init__(messages, dead_letters, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.broker = broker

    def ack(self, message: Any) -> None:
        super().ack(message)  # type: ignore[no-untyped-call]
        self.broker.settled()

    def nack(self, message: Any) -> None:
        super().nack(message)  # type: ignore[no-untyped-call]
        self.broker.settled()

    def __next__(self) -> Any:
        if not self.prefetch_semaphore.acquire(timeout=self.timeout / 1000):
            return None  # no slot free
        try:
            message: dramatiq.Message[Any] = self.queue.get(timeout=self.timeout / 1000)
        except queue.Empty:
            self.prefetch_semaphore.release()
            return None
        return _StubMessageProxy(message.copy())


class _SavedConsumer(_Consumer):
    """Deletes an acknowledged (or dead-lettered) message's row from the state file."""

    def __init__(self, saved: SavedState, *args: Any) -> None:
        super().__init__(*args)
        self.saved = saved

    def ack(self, message: Any) -> None:
        self._done(message)
        super().ack(message)

    def nack(self, message: Any) -> None:
        self._done(message)
        super().nack(message)

    def _done(self, message: Any) -> None:
        row = message.options.get(SAVED_ROW)
        if row is not None:
            self.saved.drop_message(row)


class _Priorities(queue.PriorityQueue):  # type: ignore[type-arg]
    """Messages, by priority, then in the order they came."""

    def __init__(self) -> None:
        super().__init__()
        self._order = itertools.count()

    def put(
        self, item: dramatiq.Message[Any], block: bool = True, timeout: float | None = None
    ) -> None:
        priority = item.options.get("broker_priority") or 0
        super().put((-priority, next(self._order), item), block, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> dramatiq.Message[Any]:
        item: dramatiq.Message[Any] = super().get(block, timeout)[2]
        return item


def serve(
    actor: dramatiq.Actor[Any, Any],
    parts: Any,
    saved: SavedState | None = None,
    broker: PriorityStubBroker | None = None,
) -> PriorityStubBroker:
    """A :class:`PriorityStubBroker` with actors of its own: for ``actor`` (``crawl``) and
    each actor declared with it on its queue (its sitemaps' actor), one of the same
    function, name, queue and options (``broker.get_actor(actor.actor_name)``), whose
    messages are crawled with ``parts`` (a :class:`~crawler.worker_parts.WorkerParts`:
    the crawl's own); its messages kept in ``saved`` too, when given.  ``actor`` and its
    broker are left as they are: the actors' bodies send to the broker of the message
    they process, and crawl with its parts (:class:`~crawler.middleware.CurrentBroker`,
    :func:`~crawler.middleware.actor_for`, :func:`~crawler.middleware.parts_for`).
    ``broker``, when given, is the one to serve on (a shard's, with ``--processes``)."""
    broker = PriorityStubBroker(saved) if broker is None else broker
    broker.crawl_parts = parts
    install(broker, CurrentMessage(), CurrentBroker(), RetryTurns())
    for each in actors_of_queue(actor):
        dramatiq.Actor(
            each.fn,
            broker=broker,
            actor_name=each.actor_name,
            queue_name=each.queue_name,
            priority=each.priority,
            options=dict(each.options),
        )
    return broker


def actors_of_queue(actor: dramatiq.Actor[Any, Any]) -> list[dramatiq.Actor[Any, Any]]:
    """``actor`` and the others its broker has on its queue (``crawl`` and its sitemaps'
    actor, :data:`crawler.frontier.scope.SITEMAP_ACTOR`)."""
    others = (
        each
        for name in actor.broker.get_declared_actors()
        if (each := actor.broker.get_actor(name)) is not actor
        and each.queue_name == actor.queue_name
    )
    return [actor, *others]
