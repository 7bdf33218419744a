"""A record of every processed ``crawl`` message, from the value the actor returns."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

import dramatiq
from dramatiq.middleware import Middleware

from crawler.errors import InvalidMessage
from crawler.outcomes import CRAWLED, FAILED, RETRYING
from crawler.records import Record, key_of, kwargs_of, url_of

#: A message's options that say it is one sent again (retried, deferred, or put back
#: while its crawl is paused), whose URL was counted when first sent.
_AGAIN = frozenset({"retries", "deferrals", "pauses"})


class Recorder(Middleware):
    """Hands a record of every processed ``crawl`` message (with the message): the
    record the actor returned, or one made of the exception it raised; and word of
    every new URL enqueued, to callbacks.  Add it *before* Dramatiq's
    ``Retries``: after-hooks run in reverse order, so it then sees which failures
    ``Retries`` made final.

    Parameters:
      on_record(Callable): Called with each record, from worker threads.
      on_discover(Callable): Called once for each URL enqueued (retries, deferrals and
        a paused crawl's messages put back aside; a message delayed, to its host's
        turn, once: not again when it is put back on its queue when due).
    """

    def __init__(
        self,
        on_record: Callable[[Record, Any], None],
        on_discover: Callable[[], None] = lambda: None,
    ) -> None:
        self.on_record = on_record
        self.on_discover = on_discover
        self._started: dict[str, float] = {}
        #: Delayed messages taken in by this process's delay queue, to be put back.
        self._due: set[str] = set()

    def before_delay_message(self, broker: dramatiq.Broker, message: Any) -> None:
        self._due.add(message.message_id)

    def after_enqueue(self, broker: dramatiq.Broker, message: Any, delay: int | None) -> None:
        if delay is None and message.message_id in self._due:
            self._due.discard(message.message_id)  # back on its queue, counted when sent
            return
        if not _AGAIN.intersection(message.options):
            self.on_discover()

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        self._started[message.message_id] = time.monotonic()

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        started = self._started.pop(message.message_id, time.monotonic())
        kwargs = kwargs_of(message)
        if exception is None:
            # What the actor returned, as Dramatiq hands it on (Any): its record, when a dict.
            if isinstance(result, dict):
                record = cast(Record, dict(result))
            else:
                record = {"url": url_of(message), "outcome": CRAWLED}
            record.setdefault("outcome", CRAWLED)
            record.setdefault("depth", kwargs.get("depth", 0))
        else:
            record = {
                "url": url_of(message),
                "outcome": FAILED if message.failed else RETRYING,
                "status": getattr(exception, "status", None),
                "error": str(exception) or type(exception).__name__,
                "depth": kwargs.get("depth", 0),
            }
            if isinstance(exception, InvalidMessage):  # refused before any claim or fetch
                record["invalid_message"] = True
        key = key_of(kwargs.get("request"))
        if key is not None:  # a keyed request's (a file's, a POST's): its page's name, always
            record.setdefault("request_key", key)
        record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 1)
        record["message_id"] = message.message_id
        self.on_record(record, message)


#: Dramatiq's line on a value returned by the ``crawl`` actor or its sitemaps' actor.
ACTORS_RETURNED = tuple(
    f"Actor {name!r} returned a value that is not None" for name in ("crawl", "crawl_sitemap")
)


class _SaidBefore(logging.Filter):
    """Drops two of the worker's lines about ``crawl`` messages: that the actor returned
    a value with no Results middleware to store it (it returns its record for the
    Recorder), and that a message failed with an expected exception (its one line,
    "Giving up on URL ...", was logged by :mod:`crawler.failure_reports`; this one would
    repeat the whole message, whatever a bad one holds)."""

    def filter(self, record: logging.LogRecord) -> bool:
        said = record.getMessage()
        if said.startswith(ACTORS_RETURNED):
            return False
        return not (
            said.startswith(
                ("Failed to process message crawl(", "Failed to process message crawl_sitemap(")
            )
            and " with expected exception " in said
        )


logging.getLogger("dramatiq.worker.WorkerThread").addFilter(_SaidBefore())
