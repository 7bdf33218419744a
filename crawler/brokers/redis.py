"""Dramatiq's Redis broker, prompt on an idle queue and handing back unsent messages."""

from __future__ import annotations

from typing import Any

from dramatiq.brokers.redis import RedisBroker

from crawler.brokers.send_back import ReturningConsumer, SendBack, middleware


class PromptRedisBroker(RedisBroker):
    """Dramatiq's ``RedisBroker``, with idle polls capped at ``poll_ms``, its
    consumers handing back the messages ``send_back`` marks.

    Redis has no push: a consumer that finds its queue empty polls again after a
    growing pause, up to the worker's timeout (1 s by default).  A crawl's queue runs
    dry while its first pages are fetched and again near its end, so without the cap
    a page could wait a second for an idle worker.

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
