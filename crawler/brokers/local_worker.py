"""``--local``'s worker: threads that each take a message off the queue and process it as
Dramatiq's ``Worker`` does (the same middleware hooks in the same order, the same
acknowledgement or rejection), without the consumer thread and the work queue that
Dramatiq puts between a broker and its worker threads.  A page crossed three threads
(consumer, worker, consumer again for the acknowledgement); here it stays on one.  On a
fast site in one process those hand-offs cost a fifth of a page's CPU
(``docs/benchmarks.md``).  Delayed messages (retries, deferrals) wait in a thread of
their own until they are due, then go back on their queue, as Dramatiq's do."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from typing import Any

from dramatiq.common import current_millis, dq_name
from dramatiq.errors import RateLimitExceeded, Retry
from dramatiq.middleware import SkipMessage

from crawler.brokers.local import PriorityStubBroker

logger = logging.getLogger(__name__)


class LocalWorker:
    """``threads`` threads processing ``queue_name``'s messages of ``broker``, and one
    moving its delayed messages back when due; ``start`` and ``stop`` as Dramatiq's
    ``Worker``'s (``timeout`` in milliseconds: how long ``stop`` waits for the messages
    in hand).  Messages not taken yet, and delayed ones not due, stay in the broker
    unacknowledged (``--state`` keeps them)."""

    def __init__(
        self, broker: PriorityStubBroker, queue_name: str, threads: int, *, poll_ms: int = 100
    ) -> None:
        self.broker = broker
        self.queue_name = queue_name
        self.threads = threads
        self.poll_ms = poll_ms
        self._running = threading.Event()
        self._workers: list[threading.Thread] = []
        self._delays: threading.Thread | None = None

    def start(self) -> None:
        self._running.set()
        for number in range(self.threads):
            thread = threading.Thread(
                target=self._work, name=f"crawler-worker-{number}", daemon=True
            )
            thread.start()
            self._workers.append(thread)
        self._delays = threading.Thread(target=self._move_due, name="crawler-delays", daemon=True)
        self._delays.start()

    def stop(self, timeout: int = 600_000) -> None:
        self._running.clear()
        for thread in self._workers:
            thread.join(timeout / 1000)
        if self._delays is not None:
            self._delays.join(timeout / 1000)

    def _work(self) -> None:
        consumer = self.broker.consume(self.queue_name, prefetch=1, timeout=self.poll_ms)
        while self._running.is_set():
            message = next(consumer)
            if message is not None:
                self._process(message)
                self._settle(consumer, message)

    def _process(self, message: Any) -> None:
        """As ``dramatiq.worker.WorkerThread.process_message``: the middleware's hooks
        around the actor's call, the exception kept in the message."""
        broker, actor = self.broker, None
        try:
            broker.emit_before("process_message", message)
            result = None
            if not message.failed:
                actor = broker.get_actor(message.actor_name)
                result = actor(*message.args, **message.kwargs)
            broker.emit_after("process_message", message, result=result)
        except SkipMessage as e:
            if message.failed:
                message.stuff_exception(e)
            broker.emit_after("skip_message", message)
        except BaseException as e:
            message.stuff_exception(e)
            throws = message.options.get("throws") or (actor and actor.options.get("throws"))
            expected = throws and isinstance(e, throws)
            if not (expected or isinstance(e, (RateLimitExceeded, Retry))):
                logger.error(
                    "Failed to process message %s with unhandled exception.", message, exc_info=True
                )
            broker.emit_after("process_message", message, exception=e)

    def _settle(self, consumer: Any, message: Any) -> None:
        """Acknowledge the message, or reject it (dead-lettered) when it failed.  An
        error doing so is logged, as Dramatiq's worker logs it (``--state`` with its
        disk full: the message stays in the state file, done again when carried on)."""
        outcome = "nack" if message.failed else "ack"
        try:
            self.broker.emit_before(outcome, message)
            if message.failed:
                consumer.nack(message)
            else:
                consumer.ack(message)
            self.broker.emit_after(outcome, message)
        except Exception:
            logger.exception("Could not %s message %s.", outcome, message)
        finally:
            message.clear_exception()

    def _move_due(self) -> None:
        """Take the delayed messages in as they come; put each back on its queue when
        due (then acknowledge it on the delay queue, so that it is never in neither)."""
        consumer = self.broker.consume(
            dq_name(self.queue_name), prefetch=1_000_000, timeout=self.poll_ms
        )
        waiting: list[tuple[float, int, Any]] = []
        order = itertools.count()
        while self._running.is_set():
            message = next(consumer)
            if message is not None:
                self.broker.emit_before("delay_message", message)
                eta = message.options.get("eta")
                eta = eta if isinstance(eta, (int, float)) else current_millis()
                heapq.heappush(waiting, (eta, next(order), message))
            while waiting and waiting[0][0] <= current_millis():
                _, _, due = heapq.heappop(waiting)
                back = due.copy(queue_name=self.queue_name)
                back.options.pop("eta", None)
                self.broker.enqueue(back)
                self._settle(consumer, due)
