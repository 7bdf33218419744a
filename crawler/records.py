"""One record per crawled URL, gathered by a Dramatiq middleware from the actor's results."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import dramatiq
import requests
from dramatiq.middleware import Middleware

#: What a record says happened to its URL.
CRAWLED = "crawled"
NOT_HTML = "not-html"
FAILED = "failed"
#: Skipped without a fetch: claimed by another message, over ``--max-pages``, or
#: disallowed by robots.txt.
DUPLICATE, OVER_BUDGET, DISALLOWED = "duplicate", "over-budget", "disallowed"
#: An attempt that did not end its URL: failed but will be retried, or rate-limited.
RETRYING, DEFERRED = "retrying", "deferred"
#: Outcomes that go into an output file: the URLs a crawl fetched or gave up.
WRITTEN = (CRAWLED, NOT_HTML, FAILED)

Record = dict[str, Any]


_noted = threading.local()


def note(record: Record) -> None:
    """Leave ``record`` for the :class:`Recorder`: it picks it up in this same thread
    once the actor returns (an actor's return value is for Dramatiq's Results)."""
    _noted.record = record


def _take_noted() -> Record | None:
    record: Record | None = getattr(_noted, "record", None)
    _noted.record = None
    return record


def page_record(
    url: str,
    response: requests.Response,
    links: list[str] | None,
    depth: int,
    sent: list[str],
    dropped_links: int = 0,
) -> Record:
    """The record of a page ``crawl`` fetched; ``links`` is None when it is not HTML,
    ``sent`` the ids of the messages it sent for the new URLs among them, and
    ``dropped_links`` how many of its links were malformed (named only when some were)."""
    record = {
        "url": url,
        "outcome": CRAWLED if links is not None else NOT_HTML,
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "links": links if links is not None else [],
        "depth": depth,
        "sent": sent,
    }
    if dropped_links:
        record["dropped_links"] = dropped_links
    return record


def skipped_record(url: str, outcome: str) -> Record:
    return {"url": url, "outcome": outcome}


class Recorder(Middleware):
    """Hands a record of every processed ``crawl`` message (with the message), and
    word of every new URL enqueued, to callbacks.  Add it *before* Dramatiq's
    ``Retries``: after-hooks run in reverse order, so it then sees which failures
    ``Retries`` made final.

    Parameters:
      on_record(Callable): Called with each record, from worker threads.
      on_discover(Callable): Called once for each URL enqueued (retries aside).
    """

    def __init__(
        self,
        on_record: Callable[[Record, Any], None],
        on_discover: Callable[[], None] = lambda: None,
    ) -> None:
        self.on_record = on_record
        self.on_discover = on_discover
        self._started: dict[str, float] = {}

    def after_enqueue(self, broker: dramatiq.Broker, message: Any, delay: int | None) -> None:
        if "retries" not in message.options and "deferrals" not in message.options:
            self.on_discover()

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        _take_noted()
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
        noted = _take_noted()
        if exception is None:
            record = noted if noted is not None else {"url": message.args[0], "outcome": CRAWLED}
            record.setdefault("depth", message.kwargs.get("depth", 0))
        else:
            record = {
                "url": message.args[0],
                "outcome": FAILED if message.failed else RETRYING,
                "status": getattr(exception, "status", None),
                "error": str(exception) or type(exception).__name__,
                "depth": message.kwargs.get("depth", 0),
            }
        record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 1)
        record["message_id"] = message.message_id
        self.on_record(record, message)


class RecordFile:
    """JSON lines, one complete line per record even when interrupted."""

    def __init__(self, path: Path) -> None:
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: Record) -> None:
        public = {key: value for key, value in record.items() if key != "sent"}
        line = json.dumps(public, ensure_ascii=False) + "\n"
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
