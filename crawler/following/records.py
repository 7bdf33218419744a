"""One record per crawled URL: returned by the ``crawl`` actor, gathered by a Dramatiq middleware.

The actor returns its record; Dramatiq hands that return value to every
middleware's ``after_process_message`` as ``result``, where :class:`Recorder`
picks it up.  Nothing is stored in a results backend.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import dramatiq
import requests
from dramatiq.middleware import Middleware

from crawler.archiving.warc import Stored
from crawler.errors import InvalidMessage
from crawler.outcomes import CRAWLED, DUPLICATE_CONTENT, FAILED, NOT_HTML, RETRYING, SITEMAP

Record = dict[str, Any]


def page_record(
    url: str,
    response: requests.Response,
    links: list[str] | None,
    depth: int,
    sent: list[str],
    dropped_links: int = 0,
    stored: Stored | None = None,
) -> Record:
    """The record of a page ``crawl`` fetched; ``links`` is None when it is not HTML,
    ``sent`` the ids of the messages it sent for the new URLs among them,
    ``dropped_links`` how many of its links were malformed (named only when some were),
    and ``stored`` where ``--warc`` put its response."""
    outcome = CRAWLED if links is not None else NOT_HTML
    if stored is not None and stored.revisit:
        outcome = DUPLICATE_CONTENT
    record = {
        "url": url,
        "outcome": outcome,
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "links": links if links is not None else [],
        "depth": depth,
        "sent": sent,
    }
    if dropped_links:
        record["dropped_links"] = dropped_links
    if stored is not None:
        record["warc_file"] = stored.file
        record["warc_offset"] = stored.offset
        record["payload_digest"] = stored.payload_digest
    return record


def sitemap_record(
    url: str, pages: list[str], sitemaps: list[str], depth: int, sent: list[str], dropped_links: int
) -> Record:
    """The record of a sitemap read (``--sitemaps``): the pages and sitemaps it listed
    that the crawl follows, ``sent`` the ids of the messages sent for the new ones."""
    record = {
        "url": url,
        "outcome": SITEMAP,
        "links": pages + sitemaps,
        "sitemaps": len(sitemaps),
        "depth": depth,
        "sent": sent,
    }
    if dropped_links:
        record["dropped_links"] = dropped_links
    return record


def skipped_record(url: str, outcome: str) -> Record:
    return {"url": url, "outcome": outcome}


def kwargs_of(message: Any) -> dict[str, Any]:
    """A message's keyword arguments, or none when it holds something else."""
    return message.kwargs if isinstance(message.kwargs, dict) else {}


def url_of(message: Any) -> str:
    """The URL a ``crawl`` message names, as a string that can be written out, whatever
    the message holds."""
    url = message.args[0] if message.args else kwargs_of(message).get("url")
    try:
        return url if isinstance(url, str) and url.encode("utf-8") else repr(url)
    except UnicodeEncodeError:  # a lone surrogate: no output file or terminal takes it
        return repr(url)


class Recorder(Middleware):
    """Hands a record of every processed ``crawl`` message (with the message): the
    record the actor returned, or one made of the exception it raised; and word of
    every new URL enqueued, to callbacks.  Add it *before* Dramatiq's
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
            record = dict(result) if isinstance(result, dict) else {"url": url_of(message)}
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
        record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 1)
        record["message_id"] = message.message_id
        self.on_record(record, message)


class _SaidBefore(logging.Filter):
    """Drops two of the worker's lines about ``crawl`` messages: that the actor returned
    a value with no Results middleware to store it (it returns its record for the
    Recorder), and that a message failed with an expected exception (its one line,
    "Giving up on URL ...", was logged by :mod:`crawler.failures`; this one would
    repeat the whole message, whatever a bad one holds)."""

    def filter(self, record: logging.LogRecord) -> bool:
        said = record.getMessage()
        if said.startswith("Actor 'crawl' returned a value that is not None"):
            return False
        return not (
            said.startswith("Failed to process message crawl(")
            and " with expected exception " in said
        )


logging.getLogger("dramatiq.worker.WorkerThread").addFilter(_SaidBefore())


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
