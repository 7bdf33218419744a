"""``--local``'s worker (:class:`crawler.brokers.local_worker.LocalWorker`): Dramatiq's
semantics (retries through the delay queue, dead letters, middleware hooks) with each
message processed on the thread that took it."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import dramatiq

from crawler.brokers.local import PriorityStubBroker
from crawler.brokers.local_worker import LocalWorker


def test_a_failing_message_is_retried_when_due_and_one_that_gives_up_is_dead_lettered() -> None:
    broker = PriorityStubBroker()
    attempts: Counter[str] = Counter()
    threads: set[str] = set()

    @dramatiq.actor(broker=broker, queue_name="q", max_retries=2, min_backoff=10, max_backoff=20)
    def flaky(name: str) -> None:
        attempts[name] += 1
        threads.add(threading.current_thread().name)
        if name == "never" or attempts[name] < 3:
            raise RuntimeError(f"attempt {attempts[name]} of {name}")

    worker = LocalWorker(broker, "q", threads=2, poll_ms=10)
    broker.emit_after("process_boot")
    worker.start()
    try:
        flaky.send("twice")
        flaky.send("never")
        broker.join("q", timeout=10_000, fail_fast=False)
    finally:
        worker.stop(timeout=5_000)

    assert attempts == {"twice": 3, "never": 3}  # the first attempt and two retries
    assert [m.args for m in broker.dead_letters] == [("never",)]
    assert threads <= {"crawler-worker-0", "crawler-worker-1"}
    assert broker.outstanding == 0


def test_stop_leaves_what_was_not_taken_in_the_broker() -> None:
    broker = PriorityStubBroker()
    started, release = threading.Event(), threading.Event()

    @dramatiq.actor(broker=broker, queue_name="q")
    def slow(number: int) -> Any:
        started.set()
        release.wait(10)

    worker = LocalWorker(broker, "q", threads=1, poll_ms=10)
    worker.start()
    for number in range(3):
        slow.send(number)
    assert started.wait(10)
    worker.stop(timeout=0)  # told to stop, not waiting for the message in hand
    release.set()  # it ends; the two others are not taken
    worker.stop(timeout=10_000)
    assert broker.outstanding == 2 and broker.queues["q"].qsize() == 2
