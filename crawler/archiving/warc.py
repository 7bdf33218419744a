"""WARC files (ISO 28500, WARC/1.1): every response a crawl fetched, kept as the web's
archives keep them, written with warcio (Webrecorder's library).

Each worker process writes its own files, one set per crawl, named so that no two
hosts, processes or restarts ever pick the same name:
``<crawl id>-<UTC start>-<host>-<pid>-<sequence>.warc.gz``, opened with ``O_EXCL``.  A
``warcinfo`` record opens each file; a file past ``CRAWLER_WARC_MAX_BYTES`` is closed and
the next one begun.  Each page's records (its ``response`` or ``revisit``, then its
``request``) are compressed as one gzip member each and appended with one ``write``
call, before its message is acknowledged (a write the disk cut short is cut off
again): a worker killed mid-page leaves at most that page's records cut short at the
very end of its file, and its message comes back to be fetched and written again.

The stored payload is the body as the crawler read it: decoded from its
``Content-Encoding`` (gzip, brotli...), which the stored headers then no longer name,
with a ``Content-Length`` of the stored bytes and no ``Transfer-Encoding`` (those two
kept as ``X-Crawler-Original-*`` headers).  Readers and replay tools then get
the page's bytes without undoing an encoding, and ``WARC-Payload-Digest`` is the
digest of those bytes, the same for the same page whatever the server's compression.

Within a crawl, a response whose payload digest was stored before (by any worker: the
digests live in the dedup store) is written as a ``revisit`` record (profile
identical-payload-digest) naming the first URI and date, as Heritrix does; not an
empty body, nor the same URL stored by an earlier try of its own.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import errno
import hashlib
import io
import os
import socket
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from crawler.environment import Limits, directory_under
from crawler.errors import TransientError
from crawler.fetching import Fetched, is_html, read_body
from crawler.fetching.bounded_fetch import RETRIED_4XX

SOFTWARE = "crawler (Dramatiq's web-crawler example), warcio"


@dataclass(frozen=True)
class Stored:
    """Where a page's response went: the file, the response record's offset in it, its
    payload digest, whether it was a revisit of a payload stored before, and the
    record's ``WARC-Record-ID``."""

    file: str
    offset: int
    payload_digest: str
    revisit: bool
    record_id: str = ""


class _File:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def gone(self) -> bool:
        """Whether the file was deleted (its directory too, say) while open."""
        return os.fstat(self.fd).st_nlink == 0

    def append(self, data: bytes) -> int:
        """Append ``data``; return the offset it starts at.  A write that fails half-way
        (the disk full) is cut off again, so the file ends with a whole record."""
        offset = self.size()  # the file's own size: right even after an interrupted call
        view = memoryview(data)
        try:
            while view:  # one write for a regular file; a short one only when the disk fills
                written = os.write(self.fd, view)
                view = view[written:]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, offset)
            raise
        return offset

    def close(self) -> None:
        os.close(self.fd)


#: Files a process keeps open at most, over its crawls: the least recently written is
#: closed past it (a crawl that writes again begins its next file).
OPEN_FILES = 16


class WarcFiles:
    """One process's WARC files, by crawl and directory; safe to share between threads.

    Parameters:
      max_bytes(int): Size past which a file is closed and the next one begun.
      root(Path): The one directory under which crawls' messages may have files
        written (a worker's ``CRAWLER_WARC_DIR``; ``--local``'s own ``--warc``), or
        None: this process writes none.
    """

    def __init__(self, max_bytes: int, root: Path | None = None) -> None:
        self.max_bytes = max_bytes
        self.root = root
        self._lock = threading.Lock()
        self._files: OrderedDict[tuple[Path, str], _File] = OrderedDict()
        self._sequence: dict[tuple[Path, str], int] = {}
        self._started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M%S")
        #: Told of a directory the disk had no room for (ENOSPC, EDQUOT) before the page's
        #: TransientError is raised: ``--local`` stops the crawl on it.
        self.on_no_room: Callable[[Path], object] | None = None

    def directory(self, name: str) -> Path:
        """Where a crawl's ``--warc`` directory ``name`` is on this machine: ``name``
        under the root (an absolute ``name``: itself), symlinks followed, which must
        still be under the root.  Raises :class:`~crawler.errors.InvalidMessage` for
        one outside it (``..``, an absolute path elsewhere, a symlink out) and for
        any, when this process has no root."""
        return directory_under("warc", self.root, name)

    def append(
        self, directory: Path, crawl_id: str, options: Mapping[str, Any], records: bytes
    ) -> tuple[str, int]:
        """Append a page's records to the crawl's current file in ``directory``; return the
        file's name and the offset they start at.  Refuses (a TransientError, so the page
        is tried again, maybe on another worker) a directory it cannot write in."""
        key = (directory, crawl_id)
        with self._lock:
            file = self._files.pop(key, None)
            try:
                if file is not None and (file.size() >= self.max_bytes or file.gone()):
                    file.close()
                    file = None
                if file is None:
                    file = self._next_file(directory, crawl_id, options)
                offset = file.append(records)
            except OSError as e:
                if file is not None:
                    file.close()
                if e.errno in (errno.ENOSPC, errno.EDQUOT) and self.on_no_room is not None:
                    self.on_no_room(directory)
                raise TransientError(
                    f"cannot write WARC files in {str(directory)!r}: {e.strerror or e}"
                ) from e
            self._files[key] = file  # the most recently written last
            while len(self._files) > OPEN_FILES:
                self._files.popitem(last=False)[1].close()
            return file.path.name, offset

    def _next_file(self, directory: Path, crawl_id: str, options: Mapping[str, Any]) -> _File:
        key = (directory, crawl_id)
        host = socket.gethostname().replace("-", "_") or "host"
        directory.mkdir(parents=True, exist_ok=True)  # under the root (see directory())
        while True:
            self._sequence[key] = sequence = self._sequence.get(key, -1) + 1
            name = f"{crawl_id}-{self._started}-{host}-{os.getpid()}-{sequence:05d}.warc.gz"
            try:
                file = _File(directory / name)
            except FileExistsError:
                continue
            try:
                file.append(warcinfo(name, crawl_id, options))
            except BaseException:
                file.close()
                with contextlib.suppress(OSError):
                    (directory / name).unlink()
                raise
            return file

    def close(self) -> None:
        with self._lock:
            for file in self._files.values():
                file.close()
            self._files.clear()


def cut_partial_records(directory: Path) -> list[Path]:
    """Cut each WARC file under ``directory`` after its last whole record: a record that a
    kill or a power cut left half-written at the end goes (``--state``: a crawl carried
    on writes files of its own beside them).  The files cut."""
    cut = []
    for path in sorted(directory.rglob("*.warc.gz")):
        whole = _whole_members(path)
        if whole != path.stat().st_size:
            os.truncate(path, whole)
            cut.append(path)
    return cut


def _whole_members(path: Path) -> int:
    """The length of the longest run of whole gzip members (a WARC record each) that the
    file at ``path`` starts with, read a megabyte at a time."""
    whole = position = 0
    member = zlib.decompressobj(wbits=31)
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            while chunk:
                try:
                    member.decompress(chunk)  # the text is not kept: only where members end
                except zlib.error:
                    return whole
                if not member.eof:
                    position += len(chunk)
                    break
                position += len(chunk) - len(member.unused_data)
                whole, chunk = position, member.unused_data
                member = zlib.decompressobj(wbits=31)
    return whole


#: zlib's own default level, as ``gzip`` uses: warcio's 9 costs twice the CPU on the
#: Python docs' pages (2.5 against 1.3 ms a page) for 1% smaller files.
GZIP_LEVEL = 6


def _gzipped(writer: WARCWriter, record: Any) -> bytes:
    """``record`` as one gzip member of its own, as the WARC standard's annex says."""
    output = writer.out
    output.seek(0)
    output.truncate()
    writer.write_record(record)
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    return compressor.compress(output.getvalue()) + compressor.flush()


def _writer() -> WARCWriter:
    return WARCWriter(io.BytesIO(), gzip=False, warc_version="WARC/1.1")


def warcinfo(filename: str, crawl_id: str, options: Mapping[str, Any]) -> bytes:
    """The ``warcinfo`` record that opens a file: the software, the crawl and its options
    (as the crawl's messages carry them)."""
    writer = _writer()
    fields = {"software": SOFTWARE, "format": "WARC File Format 1.1", "crawl-id": crawl_id}
    fields.update((f"crawl-option-{name}", str(value)) for name, value in sorted(options.items()))
    return _gzipped(writer, writer.create_warcinfo_record(filename, fields))


class Keeper:
    """What ``--warc`` keeps of one ``crawl`` message: its page, the redirects on the
    way, or its last failure (a :class:`crawler.fetching.bounded_fetch.Keeper`).

    Parameters:
      files(WarcFiles): This process's files.
      pool(Any): The dedup store's pool, where the crawl's payload digests live.
      directory(Path): Where the files go.
      crawl_id(str): The crawl, named in the files' names and records.
      options(Mapping): The crawl's options, as its messages carry them (for ``warcinfo``).
      ttl(int): How long the crawl's digests are kept (its grace).
      last_attempt(bool): Whether a failure now is final (no retry left): only then is
        a 5xx, 408 or 429 response kept; another 4xx always is (it is never retried).
    """

    def __init__(
        self,
        files: WarcFiles,
        pool: Any,
        directory: Path,
        crawl_id: str,
        options: Mapping[str, Any],
        ttl: int,
        *,
        last_attempt: bool,
    ) -> None:
        self.files, self.pool, self.directory = files, pool, directory
        self.crawl_id, self.options, self.ttl = crawl_id, options, ttl
        self.last_attempt = last_attempt

    def page(self, fetched: Fetched, body: bytes) -> Stored:
        with self.pool.reserve() as client:
            return archive(
                self.files, client, self.directory, self.crawl_id, self.options,
                fetched.response, body, fetched.address, self.ttl,
            )  # fmt: skip

    def wants(self, response: requests.Response) -> bool:
        """A redirect or error response ``fetch`` offers: a redirect or a 4xx answer
        always (never retried), a 5xx, 408 or 429 only when it gives the URL up."""
        status = response.status_code
        return not ((status in RETRIED_4XX or status >= 500) and not self.last_attempt)

    def keep(self, fetched: Fetched, body: bytes) -> Stored:
        return self.page(fetched, body)

    def not_modified(
        self, fetched: Fetched, digest: str | None, capture: tuple[str, str] | None
    ) -> Stored:
        """``--recrawl-from``: a ``304`` answer, kept as a ``revisit`` record (profile
        server-not-modified) of the earlier capture: its payload ``digest`` when known,
        its record id and date when its WARC files were given (``capture``)."""
        response = fetched.response
        records, record_id = not_modified_records(response, fetched.address, digest, capture)
        name, offset = self.files.append(self.directory, self.crawl_id, self.options, records)
        return Stored(name, offset, digest or "", revisit=True, record_id=record_id)

    def rendered(self, stored: Stored, url: str, html: str) -> None:
        """``--render``: the page's DOM as the browser left it, kept beside its response
        as a ``conversion`` record that refers to it."""
        writer = _writer()
        record = writer.create_warc_record(
            url,
            "conversion",
            payload=io.BytesIO(html.encode("utf-8")),
            length=len(html.encode("utf-8")),
            warc_content_type="text/html; charset=utf-8",
            warc_headers_dict={"WARC-Refers-To": stored.record_id},
        )
        self.files.append(self.directory, self.crawl_id, self.options, _gzipped(writer, record))


def keeper_of(
    files: WarcFiles,
    pool: Any,
    retries: tuple[int, int],
    crawl_id: str | None,
    warc: str | None,
    options: Mapping[str, Any] | None,
    ttl: int,
) -> Keeper | None:
    """With ``--warc`` (the crawl's ``warc`` directory), what keeps a message's response
    in the crawl's WARC files, under the worker's ``CRAWLER_WARC_DIR`` (raises
    :class:`~crawler.errors.InvalidMessage` for one outside it, or without it).
    ``retries``: the message's retries so far, and how many it has."""
    if warc is None:
        return None
    return Keeper(
        files,
        pool,
        files.directory(warc),
        str(crawl_id),
        options or {},
        ttl,
        last_attempt=retries[0] >= retries[1],
    )


def read_page(
    fetched: Fetched, limits: Limits, keeper: Keeper | None, *, wanted: bool = False
) -> tuple[bytes | None, Stored | None]:
    """An HTML page's body, or any response's when ``wanted`` (None for anything else),
    and where ``keeper`` stored the response when there is one (``--warc`` keeps every
    response, HTML or not)."""
    read = wanted or is_html(fetched.response)
    body = read_body(fetched, limits) if read or keeper else b""
    stored = keeper.page(fetched, body) if keeper else None
    return (body if read else None), stored


def archive(
    files: WarcFiles,
    client: Any,
    directory: Path,
    crawl_id: str,
    options: Mapping[str, Any],
    response: requests.Response,
    body: bytes,
    address: str | None,
    ttl: int,
) -> Stored:
    """Write a page's records to the crawl's WARC files in ``directory``: a ``response``,
    or a ``revisit`` when the crawl stored the same payload before (the dedup store
    ``client`` knows, for ``ttl`` seconds).  The digest is remembered only once the
    response is written, so that a revisit never names a response no file holds."""
    digest = payload_digest(body)
    key = f"w:{crawl_id}:{digest.partition(':')[2]}"
    seen = client.get(key) if body else None  # an empty body: a revisit would be larger
    first_seen = None
    if seen is not None:
        uri, _, date = bytes(seen).decode().rpartition(" ")
        # The URL's own earlier try (a retry, a redelivery) stored it: not a duplicate.
        first_seen = (uri, date) if uri != response.url else None
    records, date, record_id = page_records(response, body, address, digest, first_seen)
    name, offset = files.append(directory, crawl_id, options, records)
    if first_seen is None and body:
        client.add(key, f"{response.url} {date}".encode(), time=ttl)
    return Stored(name, offset, digest, revisit=first_seen is not None, record_id=record_id)


def payload_digest(body: bytes) -> str:
    """``sha1:`` and the base32 SHA-1 of the payload, as warcio and Heritrix write it."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


def page_records(
    response: requests.Response,
    body: bytes,
    address: str | None,
    digest: str,
    first_seen: tuple[str, str] | None,
) -> tuple[bytes, str, str]:
    """A page's records as gzip members: its ``response`` (or, when ``first_seen`` names
    the URI and date of the same payload stored before, a ``revisit``), then its
    ``request``.  Returns them, their WARC-Date and the first one's WARC-Record-ID."""
    writer = _writer()
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)  # warcio: naive UTC
    date = datetime_to_iso_date(now, use_micros=True)
    headers = _stored_headers(response, len(body))
    warc_headers = {"WARC-Date": date}
    if address:
        warc_headers["WARC-IP-Address"] = address
    if first_seen is None:
        warc_headers["WARC-Payload-Digest"] = digest  # computed once, by archive()
        record = writer.create_warc_record(
            response.url,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            http_headers=headers,
            warc_headers_dict=warc_headers,
        )
    else:
        uri, first_date = first_seen
        record = writer.create_revisit_record(  # profile identical-payload-digest
            response.url, digest, uri, first_date, http_headers=headers,
            warc_headers_dict=warc_headers,
        )  # fmt: skip
    record_id = record.rec_headers.get_header("WARC-Record-ID")
    records = _gzipped(writer, record) + _request_record(writer, response, date, record_id)
    return records, date, record_id


def _request_record(writer: WARCWriter, response: requests.Response, date: str, to: str) -> bytes:
    """The ``request`` record of ``response``, concurrent to its record ``to``."""
    request = writer.create_warc_record(
        response.url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=_request_headers(response),
        warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": to},
    )
    return _gzipped(writer, request)


#: The revisit profile of a ``304 Not Modified`` answer (WARC 1.1, section 6.7.3).
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


def not_modified_records(
    response: requests.Response,
    address: str | None,
    digest: str | None,
    capture: tuple[str, str] | None,
) -> tuple[bytes, str]:
    """A ``304``'s ``revisit`` record (its headers only) and its ``request``, as gzip
    members, and the revisit's WARC-Record-ID."""
    writer = _writer()
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    warc_headers = {
        "WARC-Date": datetime_to_iso_date(now, use_micros=True),
        "WARC-Profile": SERVER_NOT_MODIFIED,
        "WARC-Refers-To-Target-URI": response.url,
    }
    if address:
        warc_headers["WARC-IP-Address"] = address
    if digest:
        warc_headers["WARC-Payload-Digest"] = digest
    if capture is not None:
        warc_headers["WARC-Refers-To"], warc_headers["WARC-Refers-To-Date"] = capture
    record = writer.create_warc_record(
        response.url,
        "revisit",
        http_headers=_stored_headers(response, 0),
        warc_headers_dict=warc_headers,
    )
    record_id = record.rec_headers.get_header("WARC-Record-ID")
    request = _request_record(writer, response, warc_headers["WARC-Date"], record_id)
    return _gzipped(writer, record) + request, record_id


def _stored_headers(response: requests.Response, length: int) -> StatusAndHeaders:
    """The response's headers as stored with its decoded body: ``Content-Encoding``
    (when urllib3 decoded it: not one it does not know) and ``Transfer-Encoding`` renamed
    ``X-Crawler-Original-*``, ``Content-Length`` that of the stored bytes."""
    decoded = getattr(response.raw, "_decoder", None) is not None
    headers: list[tuple[str, str]] = []
    for name, value in response.raw.headers.items():
        lower = name.lower()
        if lower == "content-encoding" and not decoded:
            headers.append((name, value))  # still encoded: stored as it came
        elif lower in ("content-encoding", "transfer-encoding"):
            headers.append((f"X-Crawler-Original-{name}", value))
        elif lower != "content-length":
            headers.append((name, value))
    headers.append(("Content-Length", str(length)))
    version = {10: "HTTP/1.0", 11: "HTTP/1.1"}.get(response.raw.version, "HTTP/1.1")
    return StatusAndHeaders(f"{response.status_code} {response.reason}", headers, protocol=version)


def _request_headers(response: requests.Response) -> StatusAndHeaders:
    request = response.request
    url = urlsplit(str(request.url))
    target = url.path or "/"
    if url.query:
        target += "?" + url.query
    host = url.netloc.rpartition("@")[2]
    if (url.scheme, url.port) in (("http", 80), ("https", 443)):
        host = host.rpartition(":")[0]  # as http.client sends it: no default port
    headers = [("Host", host)]
    headers += [(name, str(value)) for name, value in request.headers.items()]
    # warcio keeps the request line whole (its protocol argument is for responses).
    return StatusAndHeaders(f"{request.method} {target} HTTP/1.1", headers, is_http_request=True)
