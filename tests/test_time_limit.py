"""Dramatiq's time limit covers the actor, not the after-hooks that send its follow-ups."""

from __future__ import annotations

import time
from typing import Any

import dramatiq
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Middleware, TimeLimit

from crawler.brokers.returning import middleware
from crawler.middleware import SendBack, TimeLimitOver


class SlowFollowUp(Middleware):
    """An after-hook that takes longer than the time limit, as a publish that reconnects can."""

    def __init__(self) -> None:
        self.finished: list[str] = []
        self.interrupted: list[str] = []

    def after_process_message(
        self, broker: dramatiq.Broker, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        if exception is not None:
            self.interrupted.append(type(exception).__name__)
            return
        try:
            for _ in range(30):
                time.sleep(0.01)
        except BaseException as e:
            self.interrupted.append(type(e).__name__)
            raise
        self.finished.append(message.message_id)


def test_an_after_hook_longer_than_the_time_limit_is_not_interrupted() -> None:
    broker = StubBroker(middleware=middleware(SendBack()))
    slow = SlowFollowUp()
    broker.add_middleware(slow)
    time_limit = next(m for m in broker.middleware if isinstance(m, TimeLimit))
    watchdog: Any = time_limit.manager
    watchdog.interval = 0.01  # seconds between its looks at the deadlines (default 1)
    broker.add_middleware(TimeLimitOver(time_limit))  # last, as make_broker adds it

    @dramatiq.actor(broker=broker, time_limit=100, max_retries=0)
    def quick() -> None:
        pass

    broker.emit_after("process_boot")
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=1)
    worker.start()
    try:
        message = quick.send()
        broker.join(quick.queue_name)
        worker.join()
    finally:
        worker.stop()
        broker.close()

    assert slow.interrupted == []
    assert slow.finished == [message.message_id]
    assert broker.dead_letters == []
