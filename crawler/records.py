"""One record per crawled URL: returned by the ``crawl`` actor, gathered by a Dramatiq middleware.

The actor returns its record; Dramatiq hands that return value to every
middleware's ``after_process_message`` as ``result``, where :class:`Recorder`
picks it up.  Nothing is stored in a results backend.

A record is a :class:`PageRecord`: a plain ``dict`` at run time, written out as JSON
as it is, whose every field mypy knows by name and type.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Protocol, TypedDict, cast

import requests

from crawler.archiving.warc import Stored
from crawler.errors import Answered
from crawler.json_array import JsonArrayFile, NotAnArray
from crawler.outcomes import ANSWERED, CRAWLED, NOT_HTML, SITEMAP


class _EveryRecord(TypedDict):
    """The fields every record holds."""

    #: The URL, canonical.
    url: str
    #: What became of it: one of :mod:`crawler.outcomes`.
    outcome: str


class PageRecord(_EveryRecord, total=False):
    """One record per crawled URL, as ``-o`` writes it (docs/output.md says what each
    field means, and which records hold it); a field a record does not have is absent,
    not null.  ``sent`` alone is the workers' word to the seeder, never written out.

    A record read back from a file (``--recrawl-from``) is checked for the fields the
    recrawl reads (:func:`crawler.frontier.recrawl.read_records`); its validators, digest
    and WARC fields may then be null, as they are typed here.
    """

    #: The HTTP status; null for a failure without an answer.
    status: int | None
    #: The ``Content-Type`` header, if the server sent one.
    content_type: str | None
    #: The absolute http(s) links found (none for an answer: its body is not parsed).
    links: list[str]
    #: Hops from a seed (seeds are 0; a sitemap's pages count from 0).
    depth: int
    #: The ids of the messages sent for its new links (to the seeder only).
    sent: list[str]
    #: The fetch alone, in milliseconds: first request to body read (or headers).
    fetch_ms: float
    #: The response's ``ETag``, what ``--recrawl-from`` asks with.
    etag: str | None
    #: The response's ``Last-Modified``, what ``--recrawl-from`` asks with.
    last_modified: str | None
    #: Links that could not be parsed, left out.
    dropped_links: int
    #: The size of the body read, in bytes (HTML pages).
    bytes: int
    #: True: the page was loaded in headless Chromium (``--render``).
    rendered: bool
    #: The render alone, in milliseconds (``--render``).
    render_ms: float
    #: The requests the browser made for the page (``--render``).
    render_requests: int
    #: Why the page was rendered or not (``--render auto``).
    render_reason: str
    #: Its kind, what ``--render auto`` learns by.
    page_kind: str
    #: Links the browser found that the static page lacks (a sample or check).
    render_new_links: int
    #: Items and requests its handler made of the rendered page beyond the static one's.
    render_new_items: int
    #: The WARC file holding the response (``--warc``).
    warc_file: str | None
    #: Where its response record starts in that file (``--warc``).
    warc_offset: int | None
    #: The ``sha1:`` digest of the body, as in ``WARC-Payload-Digest``.
    payload_digest: str | None
    #: True: the response came from ``--cache``'s directory, not from the server.
    cached: bool
    #: What the page handler returned: a JSON object, or null (``--handler``).
    data: dict[str, Any] | None
    #: The JSON objects the handler yielded, in order (``Handled(items=[...])``).
    items: list[dict[str, Any]]
    #: Why the page handler failed, one line; the page's links were still followed.
    handler_error: str
    #: The handler's requests that were refused, one line each (``request-refused:``);
    #: the rest of the page stands.
    refused_requests: list[str]
    #: Items the crawl's item pipelines dropped (``--pipeline``, a router's own).
    dropped_items: int
    #: The item pipelines' failures, one line each (``pipeline-failed:``); the items
    #: went on as they were before the pipeline that failed.
    item_errors: list[str]
    #: The request's method, when not GET (a handler's ``Request(method=...)``).
    method: str
    #: What a handler's request other than a plain GET is deduplicated by, besides its
    #: URL: its ``unique_key``, or a digest of its method and body.
    request_key: str
    #: A file's (``--files``): where it was kept, its digest, type and size, as the
    #: items naming it say (:func:`crawler.archiving.files.entry`).
    file: dict[str, Any]
    #: ``--markdown``, ``--near-duplicates``: the SHA-256 of the page's main text.
    text_digest: str
    #: ``--near-duplicates``: the page seen before whose main text this one's nearly is.
    near_duplicate_of: str
    #: ``--markdown``: the page's Markdown file, under the crawl's directory.
    markdown_file: str
    #: A recrawl's page downloaded again, whose earlier text digest is known: ``markup``
    #: (its bytes changed, its main text did not: ``unchanged``) or ``text``.
    change: str
    #: How many of ``links`` are sitemaps (a sitemap's record).
    sitemaps: int
    #: The last error, one line (a failure).
    error: str
    #: True: workers refused the message itself (``docs/security.md``).
    invalid_message: bool
    #: The message's time on the worker, in milliseconds, waits included.
    elapsed_ms: float
    #: The Dramatiq message that crawled it.
    message_id: str


Record = PageRecord


def page_record(
    url: str,
    response: requests.Response,
    links: list[str] | None,
    depth: int,
    sent: list[str],
    size: int | None = None,
) -> Record:
    """The record of a page ``crawl`` fetched, as every page has it; ``links`` is None
    when it is not HTML, ``sent`` the ids of the messages it sent for the new URLs among
    them, ``size`` the bytes of its body, when read.  The page pipeline's stages add
    their own fields (:mod:`crawler.pipeline`).  ``fetch_ms`` is the fetch's time alone,
    from its first request to its body read (to its headers when the body is not read):
    what :func:`crawler.fetching.read_body` left in ``response.elapsed``."""
    record: Record = {
        "url": url,
        "outcome": CRAWLED if links is not None else NOT_HTML,
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "links": links if links is not None else [],
        "depth": depth,
        "sent": sent,
        "fetch_ms": round(response.elapsed.total_seconds() * 1000, 1),
    }
    if size is not None:
        record["bytes"] = size
    return record


def page_name(record: Record) -> str:
    """What names a record's page, where a page is written once (the seeder's ledger of
    ``--output``) and in an item sink (``url`` in its items): its URL; for a handler's
    keyed request (a POST, a ``unique_key``...), the URL, a space and its
    ``request_key``, so that two requests for one URL are two pages (and PostgreSQL's
    key, crawl, page and index, holds each one's items once)."""
    key = record.get("request_key")
    return record["url"] if key is None else f"{record['url']} {key}"


#: The order of a page record's fields, whichever stage added them.
PAGE_FIELDS = (
    "url", "outcome", "status", "content_type", "links", "depth", "sent", "fetch_ms", "etag",
    "last_modified", "dropped_links", "bytes", "rendered", "render_ms", "render_requests",
    "render_reason", "page_kind", "render_new_links", "render_new_items", "warc_file",
    "warc_offset", "payload_digest", "cached", "data", "items", "handler_error",
    "refused_requests", "method", "request_key", "dropped_items", "item_errors", "file",
    "text_digest", "near_duplicate_of", "markdown_file", "change",
)  # fmt: skip


def in_order(record: Record) -> Record:
    """``record`` with its fields in the order of :data:`PAGE_FIELDS` (any other after
    them), so that a page's line reads the same whatever stages made it."""
    fields: Mapping[str, object] = record  # read by name from a list: no literal keys
    known = {field: fields[field] for field in PAGE_FIELDS if field in fields}
    ordered = {**known, **{field: value for field, value in fields.items() if field not in known}}
    return cast(Record, ordered)  # the same fields, in another order


def without_links(record: Record) -> Record:
    """A copy of ``record`` without its ``links``: for a seeder that only counts it."""
    rest = record.copy()
    rest.pop("links", None)
    return rest


def add_warc_fields(record: Record, stored: Stored) -> None:
    """Where ``--warc`` kept a response, added to its record: its file, offset and
    payload digest."""
    record["warc_file"] = stored.file
    record["warc_offset"] = stored.offset
    record["payload_digest"] = stored.payload_digest


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
        add_warc_fields(record, answer.kept)
    return record


def sitemap_record(
    url: str, pages: list[str], sitemaps: list[str], depth: int, sent: list[str], dropped_links: int
) -> Record:
    """The record of a sitemap read (``--sitemaps``): the pages and sitemaps it listed
    that the crawl follows, ``sent`` the ids of the messages sent for the new ones."""
    record: Record = {
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


def key_of(request: Any) -> str | None:
    """The ``key`` a message's ``request`` argument carries (None: none, a plain GET's):
    a keyed request's ``request_key``."""
    key = request.get("key") if isinstance(request, dict) else None
    return key if isinstance(key, str) else None


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
    "fetch_ms", "items", "refused_requests", "method", "request_key", "dropped_items",
    "item_errors", "cached", "file", "text_digest", "near_duplicate_of", "markdown_file",
    "change",
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
    """``--records`` (and ``-o`` without a handler): one complete line per record even
    when interrupted.  JSON lines, CSV for a ``.csv`` path (a spreadsheet's: links
    counted), one JSON array for a ``.json`` path (valid JSON after every record:
    :class:`~crawler.json_array.JsonArrayFile`); ``-`` is standard output.

    Parameters:
      path(Path): The file, made anew; ``-`` for standard output.
      append(bool): Add to the file instead (``--state``: a crawl carried on), after
        cutting off a last line that an interruption left half-written.
    """

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        suffix = path.suffix.lower()
        self._csv = suffix == ".csv"
        self._owned = str(path) != "-"
        self._array: JsonArrayFile | None = None
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        if self._owned and suffix == ".json":
            try:
                self._array = JsonArrayFile(path, append=append)
            except NotAnArray as e:
                raise OSError(errno.EINVAL, str(e)) from e
            return
        fresh = True
        if append and self._owned and path.exists():
            fresh = cut_partial_line(path) == 0
        mode = "a" if append else "w"
        self._file = path.open(mode, encoding="utf-8", newline="") if self._owned else sys.stdout
        if self._csv and fresh:
            csv.writer(self._file).writerow(RECORD_FIELDS)

    def write(self, record: Record) -> None:
        # What is written: the record's fields but ``sent``, a CSV row's cells made of them.
        public: dict[str, Any] = {key: value for key, value in record.items() if key != "sent"}
        if self._csv:
            row = io.StringIO()
            public["links"] = len(record.get("links") or [])
            public["items"] = len(record.get("items") or []) or None  # counted, as links
            data = record.get("data")
            if data is not None:  # a handler's data: one JSON cell
                public["data"] = json.dumps(data, ensure_ascii=False, allow_nan=False)
            csv.writer(row).writerow(
                ["" if public.get(c) is None else public[c] for c in RECORD_FIELDS]
            )
            line = row.getvalue()
        else:
            line = json.dumps(public, ensure_ascii=False, allow_nan=False)
        with self._lock:
            if self._array is not None:
                self._array.write([line])
            elif self._file is not None:
                self._file.write(line if self._csv else line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._array is not None:
                self._array.close()
                self._array = None
            if self._file is not None and self._owned:
                self._file.close()
            self._file = None


class RecordSink(Protocol):
    """Where records go: a :class:`RecordFile`, or :class:`RecordFiles`; :meth:`write`
    raises :class:`OSError`, :attr:`path` then naming the file."""

    path: Path

    def write(self, record: Record) -> None: ...

    def close(self) -> None: ...


class RecordFiles:
    """Several record files as one (``-o`` and ``--records`` without a handler): each
    record to each; :attr:`path` names the one a write failed in (the first before)."""

    def __init__(self, files: list[RecordFile]) -> None:
        self.files = files
        self.path = files[0].path

    def write(self, record: Record) -> None:
        for file in self.files:
            try:
                file.write(record)
            except OSError:
                self.path = file.path
                raise

    def close(self) -> None:
        failed: OSError | None = None
        for file in self.files:
            try:
                file.close()
            except OSError as e:
                self.path, failed = file.path, failed or e
        if failed is not None:
            raise failed
