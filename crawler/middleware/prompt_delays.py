"""Delayed messages back on their queue within 50 ms of their time."""

from __future__ import annotations

import dramatiq
from dramatiq.middleware import Middleware

#: How often, in milliseconds, a worker's consumers look for delayed messages that are
#: due (Dramatiq's own ``worker_timeout``: a second unless ``dramatiq_worker_timeout``
#: says otherwise).
DELAY_POLL_MS = 50


class PromptDelays(Middleware):
    """Has a worker look for due delayed messages every :data:`DELAY_POLL_MS`.

    Dramatiq's worker puts a delayed message back on its queue when its consumer wakes,
    on a message or after ``worker_timeout`` (a second): a page deferred to its host's
    turn (``--max-rate``, ``Crawl-delay``, ``--auto-throttle``) would come back up to a
    second late, and the turns of a second would come back together.  Set before the
    worker's consumers start (its worker threads keep Dramatiq's wait); a consumer with
    nothing to do wakes 20 times a second (at 10, a page delayed to its host's turn had
    to come 0.15 s early, and the threads held waiting for their turns could not keep
    100 hosts at their rate: :data:`crawler.frontier.politeness.TURN_EARLY`).
    """

    def __init__(self) -> None:
        self._timeout: int | None = None

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._timeout = worker.worker_timeout  # the consumers, made next, take the short one
        worker.worker_timeout = min(worker.worker_timeout, DELAY_POLL_MS)

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """The worker threads, made with the consumers, wait for work as long as before:
        only the consumers look for due messages more often."""
        if self._timeout is None:
            return
        worker.worker_timeout = self._timeout
        for thread in worker.workers:
            thread.timeout = self._timeout / 1000
