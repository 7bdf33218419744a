"""``--local``'s retries come quickly: a page answering 503 must not hold a small crawl
in one process for minutes (workers keep the actor's backoff, 15 s and up)."""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.middleware import Middleware


class QuickRetries(Middleware):
    """Gives each message enqueued a backoff of its own, unless it has one.

    Parameters:
      min_backoff(int): Milliseconds before the first retry.
      max_backoff(int): Milliseconds before a retry at most.
    """

    def __init__(self, min_backoff: int, max_backoff: int) -> None:
        self.min_backoff, self.max_backoff = min_backoff, max_backoff

    def before_enqueue(self, broker: dramatiq.Broker, message: Any, delay: int | None) -> None:
        message.options.setdefault("min_backoff", self.min_backoff)
        message.options.setdefault("max_backoff", self.max_backoff)
