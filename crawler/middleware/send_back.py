"""Every message a worker sends reaches the broker, or the message that sent it comes back.

A ``crawl`` message is acknowledged only once what it had to send went out: its
links (sent by the actor), its retry or deferral, and its record for a waiting
seeder.  When the broker refuses one of them (it is restarting, or a worker
thread's connection went stale while idle), the message is not acknowledged as
done: :class:`SendBack` marks it, and the consumer hands it back to the queue
instead (RabbitMQ ``basic_nack(requeue=True)``; Redis moves it from the worker's
acknowledgements back to the queue, retried by Dramatiq until Redis answers).
It is then redone, and sends again what it claimed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from dramatiq.middleware import Middleware

logger = logging.getLogger(__name__)


class SendBack(Middleware):
    """Remembers the messages whose links, retry, deferral or record could not be
    sent, so that their consumer hands them back to the queue instead of
    acknowledging (or dead-lettering) them.

    A mark is kept on the delivery (the message proxy the worker holds from
    processing to acknowledgement), not on the message id, which copies share.
    """

    def __init__(self) -> None:
        self._unsent: set[int] = set()
        self._lock = threading.Lock()

    def could_not_send(self, message: Any, what: str, error: BaseException) -> None:
        logger.warning(
            "Could not send %s of URL %r (%s: %s); the message goes back to the queue.",
            what,
            message.args[0] if message.args else None,
            type(error).__name__,
            error,
        )
        with self._lock:
            self._unsent.add(id(message))

    def must_come_back(self, message: Any) -> bool:
        with self._lock:
            return id(message) in self._unsent

    def came_back(self, message: Any) -> None:
        with self._lock:
            self._unsent.discard(id(message))
