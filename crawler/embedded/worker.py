"""``--local``'s worker: threads that each take a message off the queue and process it as
Dramatiq's ``Worker`` does (the same middleware hooks in the same order, the same
acknowledgement or rejection), without the consumer thread and the work queue that
Dramatiq puts between a broker and its worker threads.  A page crossed three threads
(consumer, worker, consumer again for the acknowledgement); here it stays on one.  On a
fast site in one process those hand-offs cost a fifth of a page's CPU
(``docs/benchmarks.md``).  Delayed messages (retries, deferrals) wait in a thread of
their own until they are due, then go back on their queue, as Dramatiq's do.

Its threads take turns (:class:`Concurrency`): while the process is CPU-bound, a thread
more only adds GIL hand-offs, so fewer of them hold a page at once, and all of them
again once the process waits on the network."""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from dramatiq.common import current_millis, dq_name
from dramatiq.errors import RateLimitExceeded, Retry
from dramatiq.middleware import SkipMessage

from crawler.brokers.local import PriorityStubBroker
from crawler.middleware.prompt_delays import DELAY_POLL_MS

# the module's name before embedded/, kept: users filter the log on it
logger = logging.getLogger("crawler.brokers.local_worker")


#: Seconds between two looks at the process's CPU (:class:`Concurrency`).
LOOK = 0.1


class Concurrency:
    """How many of a worker's ``most`` threads may hold a message at once.

    Every ``every`` seconds it looks at the CPU the whole process used since the last
    look (``cpu``, against ``clock``): above ``busy`` of one core, the process is
    CPU-bound and half as many threads hold a message (one at least); at or below it,
    one more (``most`` at most): additive increase, multiplicative decrease.  The GIL
    runs one thread's Python at a time: on a fast site, threads that wait on the
    network for microseconds only take turns, and each turn costs a hand-off.  On a
    slow one the process idles, and every thread works.  A waiting thread looks too,
    so a crawl whose only page in hand stalls gets its threads back.  With ``busy``
    infinite, every thread always."""

    def __init__(
        self,
        most: int,
        busy: float,
        *,
        every: float = LOOK,
        cpu: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.most = self.allowed = max(1, most)
        self.busy, self.every = busy, every
        self._cpu, self._clock = cpu, clock
        self._held = 0
        self._turns = threading.Condition()
        self._looked, self._used = clock(), cpu()

    def enter(self, running: threading.Event, timeout: float) -> bool:
        """Wait for a place (looking again every ``timeout`` seconds); False once
        ``running`` is cleared."""
        with self._turns:
            while self._held >= self.allowed:
                if not running.is_set():
                    return False
                self._turns.wait(timeout)
                self._look()
            self._held += 1
            return True

    def leave(self) -> None:
        """A place freed: the thread that leaves it takes it again at once if it may,
        and no other is woken for it (a wake-up a page is what this saves)."""
        with self._turns:
            self._held -= 1
            self._look()

    def _look(self) -> None:
        now = self._clock()
        if now - self._looked < self.every:
            return
        used = self._cpu()
        share = (used - self._used) / (now - self._looked)
        self._looked, self._used = now, used
        if share > self.busy:
            self.allowed = max(1, self.allowed // 2)
        elif self.allowed < self.most:
            self.allowed += 1
            self._turns.notify()


class LocalWorker:
    """``threads`` threads processing ``queue_name``'s messages of ``broker``, and one
    moving its delayed messages back when due; ``start`` and ``stop`` as Dramatiq's
    ``Worker``'s (``timeout`` in milliseconds: how long ``stop`` waits for the messages
    in hand).  Messages not taken yet, and delayed ones not due, stay in the broker
    unacknowledged (``--state`` keeps them)."""

    def __init__(
        self,
        broker: PriorityStubBroker,
        queue_name: str,
        threads: int,
        *,
        poll_ms: int = 100,
        busy: float = math.inf,
    ) -> None:
        self.broker = broker
        self.queue_name = queue_name
        self.threads = threads
        self.poll_ms = poll_ms
        #: How many threads hold a message at once (fewer while the process is CPU-bound).
        self.concurrency = Concurrency(threads, busy)
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
        while self.concurrency.enter(self._running, self.poll_ms / 1000):
            try:
                if not self._running.is_set():
                    return
                message = next(consumer)
                if message is not None:
                    self._process(message)
                    self._settle(consumer, message)
            finally:
                self.concurrency.leave()

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
        consumer = self.broker.consume(  # looks as often as a worker's (PromptDelays)
            dq_name(self.queue_name), prefetch=1_000_000, timeout=min(self.poll_ms, DELAY_POLL_MS)
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
