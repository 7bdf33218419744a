"""Where a crawl's items go (``--items``): a JSON lines file, a CSV file (``FILE.csv``),
or a PostgreSQL table (``postgresql://user@host:port/db?table=NAME``).

Each item written says where it comes from: the crawl's id, its page's URL, and its
``index`` (its place among the page's items, from 0).  In a JSON lines file, one line
an item: ``{"crawl_id": ..., "url": ..., "index": 0, "item": {...}}`` (the item under
``item``, so no key of the handler's clashes with those).  In a CSV file, the columns
``_crawl_id``, ``_url``, ``_index``, then the keys of the first item written, in its
order, then ``_extra``: a JSON object of the keys an item has that the first did not
(and of an item's key named as one of the underscored columns); a string as it is,
any other value as JSON, a missing key or null an empty cell.  In PostgreSQL, a row an
item (:data:`TABLE`), written once per crawl, URL and index: a page whose record
comes twice (a worker died before its message was acknowledged, and the page was
fetched again) adds nothing.  An item is strict JSON (the handler step saw to that:
no NaN, no lone surrogate, 100 levels deep at most); of that, ``jsonb`` refuses only
U+0000 in a string or a key, which would stop the crawl for one item: the PostgreSQL
sink stores U+FFFD in its place (:func:`jsonb_storable`).  The files keep every item
as it is.

The crawl's feed (``-o FILE`` with a handler) is such a sink without the envelope
(``envelope=False``): each item as the handler made it, a JSON line each (``-``:
standard output), one JSON array for ``FILE.json`` (:class:`JsonArraySink`), CSV
columns of the first item's keys and ``_extra``; a PostgreSQL table is the same table
either way, its key in columns of their own.

A sink that cannot write raises :class:`ItemSinkError`, one line saying why: the crawl
stops (:mod:`crawler.embedded.one_process`, :mod:`crawler.tracking.seeder`).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import threading
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crawler.items.addresses import is_database, table_of
from crawler.items.files import Facts, FileJoin
from crawler.json_array import JsonArrayFile, NotAnArray
from crawler.records import Record, cut_partial_line, page_name

#: The PostgreSQL table's definition (``{table}``: its name, quoted).
TABLE = """CREATE TABLE IF NOT EXISTS {table} (
    crawl_id text NOT NULL,
    url text NOT NULL,
    "index" integer NOT NULL,
    item jsonb NOT NULL,
    fetched_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (crawl_id, url, "index")
)"""
#: The CSV sink's columns before and after the first item's keys.
CSV_FIRST, CSV_EXTRA = ("_crawl_id", "_url", "_index"), "_extra"
INSTALL = "pip install 'crawler[postgresql]'"
#: What PostgreSQL's ``jsonb`` cannot hold in a string or a key (``\u0000 cannot be
#: converted to text``), and what the PostgreSQL sink stores in its place: the
#: replacement character, which says a character was there that could not be kept.
NUL, REPLACEMENT = "\x00", "\ufffd"


class ItemSinkError(Exception):
    """A sink that could not write: one line, naming the sink and why."""


class ItemSink(Protocol):
    """Where items go: :meth:`write` a page's items (from any thread; raises
    :class:`ItemSinkError`), :meth:`close` once the crawl ended."""

    #: What the sink is, as a message says it (no password).
    name: str

    def write(self, url: str, items: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


def shown_address(address: str) -> str:
    """``address`` without a password, to be said."""
    if not is_database(address):
        return address
    split = urlsplit(address)
    if split.password is None:
        return address
    netloc = split.netloc.rpartition("@")[2]
    return urlunsplit(split._replace(netloc=f"{split.username}:***@{netloc}"))


def open_sink(
    address: str, crawl_id: str, *, append: bool = False, envelope: bool = True
) -> ItemSink:
    """The sink ``address`` names, open for the crawl ``crawl_id`` (a file added to with
    ``append``: a crawl carried on); :class:`ItemSinkError` when it cannot be opened.
    With ``envelope`` (``--items``) each item in a file says where it came from; without
    (the feed, ``-o``) it is written as the handler made it, and ``FILE.json`` is one
    JSON array, ``-`` standard output."""
    if is_database(address):
        return PostgresSink(address, crawl_id)
    path = Path(address)
    if path.suffix.lower() == ".csv":
        return CsvSink(path, crawl_id, append=append, envelope=envelope)
    if not envelope and path.suffix.lower() == ".json":
        return JsonArraySink(path, crawl_id, append=append)
    return JsonLinesSink(path, crawl_id, append=append, envelope=envelope)


class ItemSinks:
    """The sinks of a crawl as one (``-o`` and ``--items``), written in order: a page's
    items go to each; the first that fails raises its error, naming it.  Counts the
    items all took (:attr:`written`), and whether one failed (:attr:`failed`).  Items
    waiting for their files (``--files``) are held (:class:`~crawler.items.files.FileJoin`),
    kept in ``saved`` for a ``--local --state`` crawl."""

    def __init__(self, sinks: list[ItemSink], saved: Facts | None = None) -> None:
        self.sinks = sinks
        self.name = " and ".join(sink.name for sink in sinks)
        self.written, self.failed = 0, False
        self.files = FileJoin(saved)
        self._lock = threading.Lock()

    def take(self, record: Record, *, written: bool = True) -> None:
        """What a final ``record`` brings: its items written when it is ``written`` (the
        first record of its page), held while files they name are fetched
        (``--files``, :class:`~crawler.items.files.FileJoin`); and a file's record, the
        items that waited for it."""
        with self._lock:
            ready = self.files.arrived(record)
            if written and record.get("items"):
                page = page_name(record)
                items = self.files.hold(page, record["items"])
                if items is not None:
                    ready.append((page, items))
        for page, items in ready:
            self.write(page, items)
            with self._lock:
                self.files.written(page)

    def write(self, url: str, items: list[dict[str, Any]]) -> None:
        try:
            for sink in self.sinks:
                sink.write(url, items)
        except ItemSinkError:
            self.failed = True
            raise
        self.written += len(items)

    def close(self) -> None:
        """Write the items still waiting for files (their fetches never ended: a crawl
        stopped, say), unless a sink failed, and close every sink."""
        failed: ItemSinkError | None = None
        with self._lock:
            rest = [] if self.failed else self.files.rest()
        try:
            for page, items in rest:
                self.write(page, items)
        except ItemSinkError as e:
            failed = e
        for sink in self.sinks:
            try:
                sink.close()
            except ItemSinkError as e:
                failed = failed or e
        if failed is not None:
            raise failed


def _file(path: Path, append: bool) -> tuple[IO[str], bool]:
    """``path`` opened to write (after its last whole line, with ``append``), and
    whether it is empty; ``-``: standard output."""
    if str(path) == "-":
        return sys.stdout, True
    try:
        fresh = not (append and path.exists()) or cut_partial_line(path) == 0
        return path.open("a" if append else "w", encoding="utf-8", newline=""), fresh
    except OSError as e:
        raise ItemSinkError(f"cannot write items to {str(path)!r}: {e.strerror or e}") from e


class _FileSink:
    """A file of items, a whole line (or CSV row) each, written and flushed a page at
    a time under a lock."""

    def __init__(self, path: Path, crawl_id: str, *, append: bool) -> None:
        self.path, self.crawl_id, self.name = path, crawl_id, str(path)
        self._file, self.fresh = _file(path, append)
        self._lock = threading.Lock()

    def _lines(self, url: str, items: list[dict[str, Any]]) -> str:
        raise NotImplementedError

    def write(self, url: str, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        with self._lock:
            try:
                self._file.write(self._lines(url, items))
                self._file.flush()
            except (OSError, ValueError) as e:  # ValueError: closed
                raise ItemSinkError(
                    f"cannot write items to {self.name!r}: {getattr(e, 'strerror', None) or e}"
                ) from e

    def close(self) -> None:
        with self._lock:
            if self._file is sys.stdout:
                return
            try:
                self._file.close()
            except OSError as e:
                raise ItemSinkError(f"cannot write items to {self.name!r}: {e}") from e


def _json(value: Any) -> str:
    """``value`` as strict JSON text, on one line."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


class JsonLinesSink(_FileSink):
    """``--items FILE``: a JSON object a line, the item under ``item`` (strict JSON);
    without ``envelope`` (``-o FILE``, ``-o -``), the item itself."""

    def __init__(self, path: Path, crawl_id: str, *, append: bool, envelope: bool = True) -> None:
        super().__init__(path, crawl_id, append=append)
        self.envelope = envelope

    def _lines(self, url: str, items: list[dict[str, Any]]) -> str:
        if not self.envelope:
            return "".join(_json(item) + "\n" for item in items)
        return "".join(
            _json({"crawl_id": self.crawl_id, "url": url, "index": index, "item": item}) + "\n"
            for index, item in enumerate(items)
        )


class JsonArraySink:
    """``-o FILE.json`` with a handler: one JSON array of the items as the handler made
    them, valid JSON after each page's write (:class:`~crawler.json_array.JsonArrayFile`),
    added to when carried on.  Under a lock."""

    def __init__(self, path: Path, crawl_id: str, *, append: bool) -> None:
        self.path, self.crawl_id, self.name = path, crawl_id, str(path)
        try:
            self._array: JsonArrayFile | None = JsonArrayFile(path, append=append)
        except NotAnArray as e:
            raise ItemSinkError(f"cannot write items to {self.name!r}: {e}") from e
        except OSError as e:
            raise ItemSinkError(f"cannot write items to {self.name!r}: {e.strerror or e}") from e
        self._lock = threading.Lock()

    def write(self, url: str, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        values = [_json(item) for item in items]
        with self._lock:
            try:
                if self._array is None:
                    raise ValueError("closed")
                self._array.write(values)
            except (OSError, ValueError) as e:
                raise ItemSinkError(
                    f"cannot write items to {self.name!r}: {getattr(e, 'strerror', None) or e}"
                ) from e

    def close(self) -> None:
        with self._lock:
            if self._array is not None:
                self._array.close()
                self._array = None


class CsvSink(_FileSink):
    """``--items FILE.csv``: the columns the module says, the first item's keys among
    them (read back from the header of a file carried on); without ``envelope``
    (``-o FILE.csv``), the first item's keys and ``_extra`` alone."""

    def __init__(self, path: Path, crawl_id: str, *, append: bool, envelope: bool = True) -> None:
        super().__init__(path, crawl_id, append=append)
        self.first: tuple[str, ...] = CSV_FIRST if envelope else ()
        self.keys: list[str] | None = None
        if not self.fresh:
            with path.open(encoding="utf-8", newline="") as file:
                header = next(csv.reader(file), [])
            self.keys = header[len(self.first) : -1]

    def _lines(self, url: str, items: list[dict[str, Any]]) -> str:
        reserved = {*self.first, CSV_EXTRA}
        row = io.StringIO()
        writer = csv.writer(row)
        if self.keys is None:
            self.keys = [key for key in items[0] if key not in reserved]
            writer.writerow([*self.first, *self.keys, CSV_EXTRA])
        for index, item in enumerate(items):
            extra = {key: value for key, value in item.items() if key not in self.keys}
            cells = [_cell(item.get(key)) for key in self.keys]
            where = [self.crawl_id, url, index] if self.first else []
            writer.writerow([*where, *cells, _cell(extra or None)])
        return row.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


class PostgresSink:
    """``--items postgresql://...?table=NAME``: a row an item in the table (made when
    missing: :data:`TABLE`), each page's rows in one transaction, ``ON CONFLICT DO
    NOTHING``: exactly once per crawl, URL and index.  One connection, under a lock."""

    def __init__(self, address: str, crawl_id: str) -> None:
        try:
            import psycopg
            from psycopg import sql
        except ImportError:
            raise ItemSinkError(
                f"--items {shown_address(address)}: psycopg is not installed: {INSTALL}"
            ) from None
        self._psycopg, self.crawl_id = psycopg, crawl_id
        self.name = shown_address(address)
        split = urlsplit(address)
        query = [(k, v) for k, v in parse_qsl(split.query) if k != "table"]
        self._conninfo = urlunsplit(split._replace(query=urlencode(query)))
        table = sql.Identifier(*table_of(address))
        self._insert = sql.SQL(
            'INSERT INTO {table} (crawl_id, url, "index", item) VALUES (%s, %s, %s, %s)'
            ' ON CONFLICT (crawl_id, url, "index") DO NOTHING'
        ).format(table=table)
        self._lock = threading.Lock()
        self._connection: Any = None
        with self._lock:
            self._connect()
            self._do(lambda c: c.execute(sql.SQL(TABLE).format(table=table)))

    def _connect(self) -> None:
        try:
            self._connection = self._psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=10
            )
        except self._psycopg.Error as e:
            raise self._failed(e) from e

    def _failed(self, error: BaseException) -> ItemSinkError:
        why = " ".join(str(error).split()) or type(error).__name__
        return ItemSinkError(f"cannot write items to {self.name}: {why}")

    def _do(self, work: Any) -> None:
        """``work`` on a cursor, in one transaction."""
        try:
            with self._connection.transaction(), self._connection.cursor() as cursor:
                work(cursor)
        except self._psycopg.Error as e:
            raise self._failed(e) from e

    def write(self, url: str, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        from psycopg.types.json import Jsonb  # imported when opened: it is there

        rows = [
            (self.crawl_id, url, index, Jsonb(jsonb_storable(item)))
            for index, item in enumerate(items)
        ]
        with self._lock:
            if self._connection is None or self._connection.closed:
                raise ItemSinkError(f"cannot write items to {self.name}: its connection is closed")
            self._do(lambda cursor: cursor.executemany(self._insert, rows))

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()


def jsonb_storable(value: Any) -> Any:
    """A JSON value as PostgreSQL's ``jsonb`` stores it: each U+0000 of its strings and
    keys replaced by U+FFFD (:data:`REPLACEMENT`); a key that would then be another key
    of its object gets one more U+FFFD until it is none's, so no value is lost.  An
    item nests 100 levels at most (:data:`crawler.handlers.MAX_DEPTH`): recursion is
    safe."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, list):
        return [jsonb_storable(child) for child in value]
    if not isinstance(value, dict):
        return value
    taken = {key for key in value if NUL not in key}
    stored = {}
    for key, child in value.items():
        if NUL in key:
            key = key.replace(NUL, REPLACEMENT)
            while key in taken:
                key += REPLACEMENT
            taken.add(key)
        stored[key] = jsonb_storable(child)
    return stored
