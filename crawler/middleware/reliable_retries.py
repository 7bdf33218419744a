"""Dramatiq's ``Retries``, with a retry the broker refused sent back rather than lost."""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.middleware import Retries

from crawler.middleware.send_back import SendBack


class ReliableRetries(Retries):
    """Dramatiq's ``Retries``, except that a retry the broker refused sends the
    message back instead of losing it (Dramatiq logs the error and acknowledges)."""

    def __init__(self, send_back: SendBack, **options: Any) -> None:
        super().__init__(**options)
        self.send_back = send_back

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        try:
            Retries.after_process_message(self, broker, message, result=result, exception=exception)
        except Exception as e:  # whatever kept the retry from the broker: it must not be lost
            self.send_back.could_not_send(message, "the retry", e)
