"""A retry takes a host turn of its own: Dramatiq's ``Retries`` sends again the very
message whose attempt raised, its options kept, so the host's turn booked for that
attempt (the message's ``turn`` option) would go with it; and a retry back within the
window in which that turn is still taken (``--local`` retries after half a second, as
may workers with a short ``CRAWLER_MIN_BACKOFF_MS``) would fetch a second time in it."""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.middleware import Middleware


class RetryTurns(Middleware):
    """Drops the ``turn`` of a message whose attempt raised; below ``Retries`` in
    :data:`crawler.middleware.ORDER`, so that its after-hook runs first."""

    def after_process_message(self, broker: dramatiq.Broker, message: Any, **ended: Any) -> None:
        """``ended``: Dramatiq's ``result`` and ``exception``."""
        if ended.get("exception") is not None:
            message.options.pop("turn", None)
