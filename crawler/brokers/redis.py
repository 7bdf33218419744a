"""Dramatiq's Redis broker, prompt on an idle queue and handing back unsent messages."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import redis
from dramatiq.brokers.redis import RedisBroker

from crawler.brokers.returning import ReturningConsumer, middleware
from crawler.middleware import SendBack


class PromptRedisBroker(RedisBroker):
    """Dramatiq's ``RedisBroker``, with idle polls capped at ``poll_ms``, its
    consumers handing back the messages ``send_back`` marks.

    Redis has no push: a consumer that finds its queue empty polls again after a
    growing pause, up to the worker's timeout (1 s by default).  A crawl's queue runs
    dry while its first pages are fetched and again near its end, so without the cap
    a page could wait a second for an idle worker.

    A worker whose Redis command fails on the connection takes a new identity (the
    ``broker_id`` its acknowledgements are kept under).  Dramatiq's Redis consumer keeps
    the messages it fetched in its process (prefetched, or delayed until their eta) while
    their ids sit in the worker's acknowledgement set, and drops them from memory when
    its connection fails; a fetch whose reply was lost (Redis killed after applying it)
    puts ids there that the worker never received.  Under the old identity they would
    wait for good, since the worker's heartbeat goes on; a new identity leaves the old
    one's heartbeat to expire, and Redis's maintenance then puts every message it held
    back on the queue.  Those still in hand are delivered once more and skip as
    duplicates of themselves (their claim says so).

    Parameters:
      send_back(SendBack): Marks the messages whose follow-ups the broker refused.
      poll_ms(int): The longest pause between two polls of an empty queue.
    """

    def __init__(self, *, send_back: SendBack, poll_ms: int, **parameters: Any) -> None:
        super().__init__(middleware=middleware(send_back), **parameters)  # type: ignore[no-untyped-call]
        self.send_back = send_back
        self.poll_ms = poll_ms

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        consumer = super().consume(queue_name, prefetch, min(timeout, self.poll_ms))
        return ReturningConsumer(consumer, self.send_back)

    def _dispatch(self, command: str) -> Callable[..., Any]:
        dispatch: Callable[..., Any] = super()._dispatch(command)  # type: ignore[no-untyped-call]

        def dispatch_or_renew(*args: Any) -> Any:
            try:
                return dispatch(*args)
            except (redis.ConnectionError, redis.TimeoutError):
                self.broker_id = str(uuid.uuid4())
                raise

        return dispatch_or_renew
