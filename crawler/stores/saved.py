"""``--local --state DIR``: a local crawl kept on disk, to carry on after an interruption.

One SQLite file, ``DIR/crawl.sqlite3``, holds what a ``--local`` crawl otherwise keeps in
its memory:

* ``items``: the dedup store (claims, the journal, counters, robots.txt rules), each
  change written as it is made, by :class:`SavedClient`;
* ``messages``: every message enqueued and not yet acknowledged, by the local broker
  (:class:`crawler.brokers.local.PriorityStubBroker`): the frontier, the messages in
  hand and those waiting for a retry;
* ``facts``: the crawl's id and the command that started it.

SQLite comes with Python, survives a ``kill -9`` of the process at any point (each
change is a transaction of its own, in write-ahead-log mode, and a message's ending one
transaction: :meth:`SavedClient.together`) and, on a power cut, loses
at most the last changes before it, never its consistency (``synchronous=NORMAL``:
no ``fsync`` a change, which would cost a disk flush a page).  The messages are
acknowledged after their store changes, so a crawl carried on after any interruption
fetches again only the pages that were in hand (at most ``--threads``), and loses none.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawler.stores.memory import MemoryClient

FILE_NAME = "crawl.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, kind TEXT, value BLOB, expires REAL);
CREATE TABLE IF NOT EXISTS messages (row INTEGER PRIMARY KEY, attempt TEXT, body BLOB);
CREATE INDEX IF NOT EXISTS messages_by_attempt ON messages (attempt);
CREATE TABLE IF NOT EXISTS facts (name TEXT PRIMARY KEY, value TEXT);
"""


class SavedState:
    """The state file of a local crawl, shared by its store and its broker; thread-safe.

    Parameters:
      directory(Path): Where the file is (made when missing).
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        self._lock = threading.RLock()
        # Autocommit: each statement is a transaction, written before it returns.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._rows = self._next_rows()

    def _next_rows(self) -> Iterator[int]:
        (last,) = self._db.execute("SELECT COALESCE(MAX(row), 0) FROM messages").fetchone()
        return iter(range(int(last) + 1, 2**62))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The changes made in the block (by this thread; others wait) written as one:
        a kill leaves all of them or none."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def fact(self, name: str) -> Any:
        """A fact saved with :meth:`set_fact`; None when there is none."""
        with self._lock:
            found = self._db.execute("SELECT value FROM facts WHERE name = ?", (name,)).fetchone()
        return None if found is None else json.loads(found[0])

    def set_fact(self, name: str, value: Any) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO facts VALUES (?, ?)", (name, json.dumps(value))
            )

    # The dedup store's items.

    def items(self) -> dict[str, tuple[Any, float]]:
        """The store's items that have not expired."""
        now = time.time()
        with self._lock:
            rows = self._db.execute("SELECT key, kind, value, expires FROM items").fetchall()
        return {
            key: (_value(kind, value), expires)
            for key, kind, value, expires in rows
            if not expires or expires > now
        }

    def put_item(self, key: str, value: Any, expires: float) -> None:
        kind, stored = _stored(value)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", (key, kind, stored, expires)
            )

    def drop_item(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM items WHERE key = ?", (key,))

    # The broker's messages.

    def new_row(self) -> int:
        with self._lock:
            return next(self._rows)

    def put_message(self, row: int, attempt: str, body: bytes) -> bool:
        """Keep a message under ``row``, unless one of the same ``attempt`` (its id, queue
        and retry, deferral and pause counts) waits already: whether it was kept."""
        with self._lock:
            kept = self._db.execute(
                "INSERT INTO messages SELECT ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM messages WHERE attempt = ?)",
                (row, attempt, body, attempt),
            )
            return kept.rowcount == 1

    def drop_message(self, row: int) -> None:
        with self._lock:
            self._db.execute("DELETE FROM messages WHERE row = ?", (row,))

    def messages(self) -> list[bytes]:
        """The messages not acknowledged yet, in the order they were enqueued."""
        with self._lock:
            rows = self._db.execute("SELECT body FROM messages ORDER BY row").fetchall()
        return [bytes(body) for (body,) in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _stored(value: Any) -> tuple[str, Any]:
    if isinstance(value, bool | int):
        return "i", int(value)
    if isinstance(value, bytes | bytearray):
        return "b", bytes(value)
    if isinstance(value, str):
        return "s", value
    raise TypeError(f"the saved store keeps numbers, bytes and text, not {type(value).__name__}")


def _value(kind: str, value: Any) -> Any:
    if kind == "i":
        return int(value)
    if kind == "b":
        return bytes(value)
    return str(value)


class SavedClient(MemoryClient):
    """The in-memory store, each change also written to the state file: reads cost
    what they cost in memory."""

    def __init__(self, state: SavedState) -> None:
        super().__init__(state.items())
        self._state = state

    def _put(self, key: str, value: Any, expires: float) -> None:
        super()._put(key, value, expires)
        self._state.put_item(key, value, expires)

    def _drop(self, key: str) -> bool:
        self._state.drop_item(key)
        return super()._drop(key)

    @contextmanager
    def together(self) -> Iterator[None]:
        """A message's ending (its URL marked done, its count) written to disk as one;
        the store's lock first, as each change takes it, then the file's."""
        with self._lock, self._state.transaction():
            yield
