"""The time limit of a message ends as soon as its actor returned."""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.middleware import Middleware, TimeLimit


class TimeLimitOver(Middleware):
    """Ends Dramatiq's time limit for a message as soon as its actor has returned.

    ``TimeLimit`` stops the clock in its own after-hook, which runs after every
    middleware added later; until then the publishes of those after-hooks (a retry,
    a record, with their reconnects) could be interrupted half-way.  Added last, its
    after-hook runs first.

    Parameters:
      time_limit(TimeLimit): The broker's ``TimeLimit`` middleware.
    """

    def __init__(self, time_limit: TimeLimit) -> None:
        self.time_limit = time_limit

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        self.time_limit.after_process_message(broker, message, result=result, exception=exception)

    after_skip_message = after_process_message
