"""One record per crawled URL: returned by the ``crawl`` actor, gathered by a Dramatiq middleware.

The actor returns its record; Dramatiq hands that return value to every
middleware's ``after_process_message`` as ``result``, where :class:`Recorder`
picks it up.  Nothing is stored in a results backend.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import threading
from pathlib import Path
from typing import IO, Any

import requests

from crawler.archiving.warc import Stored
from crawler.errors import Answered
from crawler.frontier.recrawl import Earlier
from crawler.handlers import Outcome
from crawler.outcomes import ANSWERED, CRAWLED, DUPLICATE_CONTENT, NOT_HTML, SITEMAP, UNCHANGED

Record = dict[str, Any]


def page_record(
    url: str,
    response: requests.Response,
    links: list[str] | None,
    depth: int,
    sent: list[str],
    dropped_links: int = 0,
    stored: Stored | None = None,
    handled: Outcome | None = None,
    size: int | None = None,
    render_ms: float | None = None,
    earlier: Earlier | None = None,
) -> Record:
    """The record of a page ``crawl`` fetched; ``links`` is None when it is not HTML,
    ``sent`` the ids of the messages it sent for the new URLs among them,
    ``dropped_links`` how many of its links were malformed (named only when some were),
    ``stored`` where ``--warc`` put its response, ``handled`` what the crawl's page
    handler made of it (``data`` and its ``items`` when it yielded some, or
    ``handler_error``), ``size`` the bytes of its body, when read, and ``render_ms``
    the time headless Chromium took when it rendered the page (``--render``).
    ``earlier``: what an earlier crawl saw of it (``--recrawl-from``): a ``304`` answer
    makes it ``unchanged``, its validators and digest the earlier ones.
    ``fetch_ms`` is the fetch's time alone, from its first
    request to its body read (to its headers when the body is not read): what
    :func:`crawler.fetching.read_body` left in ``response.elapsed``."""
    outcome = CRAWLED if links is not None else NOT_HTML
    if stored is not None and stored.revisit:
        outcome = DUPLICATE_CONTENT
    unchanged = earlier is not None and response.status_code == 304
    if unchanged:
        outcome = UNCHANGED
    record = {
        "url": url,
        "outcome": outcome,
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "links": links if links is not None else [],
        "depth": depth,
        "sent": sent,
        "fetch_ms": round(response.elapsed.total_seconds() * 1000, 1),
    }
    for field, header, before in (
        ("etag", "ETag", earlier and earlier.etag),
        ("last_modified", "Last-Modified", earlier and earlier.last_modified),
    ):  # the validators a recrawl asks with (--recrawl-from)
        value = response.headers.get(header) or (before if unchanged else None)
        if value:
            record[field] = value
    if dropped_links:
        record["dropped_links"] = dropped_links
    if size is not None:
        record["bytes"] = size
    if render_ms is not None:
        record["rendered"] = True
        record["render_ms"] = round(render_ms, 1)
    if stored is not None:
        record["warc_file"] = stored.file
        record["warc_offset"] = stored.offset
        record["payload_digest"] = stored.payload_digest
    if unchanged and earlier is not None and earlier.payload_digest and stored is None:
        record["payload_digest"] = earlier.payload_digest
    if handled is not None:
        record["data"] = handled.data
        if handled.items:  # for the crawl's item sink (--items)
            record["items"] = handled.items
        if handled.error is not None:
            record["handler_error"] = handled.error
    return record


def answered_record(url: str, answer: Answered) -> Record:
    """The record of a URL the server answered with a 4xx (not 408 nor 429): its
    status and type, no links (its body is not parsed), where ``--warc`` kept it."""
    record: Record = {
        "url": url,
        "outcome": ANSWERED,
        "status": answer.status,
        "content_type": answer.content_type,
        "links": [],
        "sent": [],
    }
    if isinstance(answer.kept, Stored):
        record["warc_file"] = answer.kept.file
        record["warc_offset"] = answer.kept.offset
        record["payload_digest"] = answer.kept.payload_digest
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


#: Every field a record of ``--output`` may hold (docs/output.md says what each means).
RECORD_FIELDS = (
    "url", "outcome", "status", "content_type", "links", "depth", "dropped_links",
    "sitemaps", "error", "invalid_message", "elapsed_ms", "message_id", "warc_file",
    "warc_offset", "payload_digest", "data", "handler_error", "bytes",
    "fetch_ms", "items",
)  # fmt: skip


def cut_partial_line(path: Path) -> int:
    """Cut ``path`` after its last newline (a line cut short by a kill or a power cut
    goes); its size then."""
    with path.open("r+b") as file:
        end = file.seek(0, 2)
        position = end
        while position > 0:
            start = max(0, position - 65536)
            file.seek(start)
            newline = file.read(position - start).rfind(b"\n")
            if newline != -1:
                whole = start + newline + 1
                if whole != end:
                    file.truncate(whole)
                return whole
            position = start
        file.truncate(0)
        return 0


class RecordFile:
    """``--output``: one complete line per record even when interrupted.  JSON lines, or
    CSV for a ``.csv`` path (a spreadsheet's: links counted); ``-`` is standard output.

    Parameters:
      path(Path): The file, made anew; ``-`` for standard output.
      append(bool): Add to the file instead (``--state``: a crawl carried on), after
        cutting off a last line that an interruption left half-written.
    """

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        self._csv = path.suffix.lower() == ".csv"
        self._owned = str(path) != "-"
        fresh = True
        if append and self._owned and path.exists():
            fresh = cut_partial_line(path) == 0
        mode = "a" if append else "w"
        self._file: IO[str] | None = (
            path.open(mode, encoding="utf-8", newline="") if self._owned else sys.stdout
        )
        self._lock = threading.Lock()
        if self._csv and self._file is not None and fresh:
            csv.writer(self._file).writerow(RECORD_FIELDS)

    def write(self, record: Record) -> None:
        public = {key: value for key, value in record.items() if key != "sent"}
        if self._csv:
            row = io.StringIO()
            public["links"] = len(public.get("links") or [])
            public["items"] = len(public.get("items") or []) or None  # counted, as links
            if public.get("data") is not None:  # a handler's data: one JSON cell
                public["data"] = json.dumps(public["data"], ensure_ascii=False, allow_nan=False)
            csv.writer(row).writerow(
                ["" if public.get(c) is None else public[c] for c in RECORD_FIELDS]
            )
            line = row.getvalue()
        else:
            line = json.dumps(public, ensure_ascii=False, allow_nan=False) + "\n"
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None and self._owned:
                self._file.close()
            self._file = None
