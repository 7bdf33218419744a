"""``--local``'s retries come quickly: a page answering 503 must not hold a small crawl
in one process for minutes (workers keep the actor's backoff, 15 s and up).  So quickly
that a retry could come back within the window in which its host's turn, booked for
the attempt that failed (the message's ``turn`` option), is still taken: a retry goes
without it, and takes a turn of its own."""

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

    def after_process_message(self, broker: dramatiq.Broker, message: Any, **ended: Any) -> None:
        """An attempt that raised (``ended``: Dramatiq's ``result`` and ``exception``)
        leaves its turn behind: Dramatiq's ``Retries``, whose after-hook runs after this
        one, sends the same message again."""
        if ended.get("exception") is not None:
            message.options.pop("turn", None)
