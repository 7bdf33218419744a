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

Beside it, ``DIR/lock`` is held (``flock``) by the one process running the crawl, its
PID written in it: a second process on the same directory is refused, naming it; the
kernel lets go of the lock when its process dies, however it dies.  ``DIR/crashes.log``
gets a traceback (Python's :mod:`faulthandler`) when the process dies of a fatal signal
raised inside it (a crash: ``SIGSEGV``, ``SIGABRT``, ``SIGBUS``, ``SIGFPE``, ``SIGILL``),
and not on a kill: the next run tells the two apart by its size.

A write the disk has no room for (SQLite's ``SQLITE_FULL``, ``ENOSPC``, ``EDQUOT``)
raises :class:`DiskFull`, and every write after it too: the file stays as a kill at
that moment would have left it, and the same command carries on once there is room.
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawler.stores.memory import MemoryClient

FILE_NAME = "crawl.sqlite3"
#: The lock a running crawl holds on its directory, with its PID in it.
LOCK_NAME = "lock"
#: Where :mod:`faulthandler` writes when the process crashes.
CRASH_LOG_NAME = "crashes.log"
#: SQLite's result code for a write the disk had no room for.
SQLITE_FULL = 13
_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, kind TEXT, value BLOB, expires REAL);
CREATE TABLE IF NOT EXISTS messages (row INTEGER PRIMARY KEY, attempt TEXT, body BLOB);
CREATE INDEX IF NOT EXISTS messages_by_attempt ON messages (attempt);
CREATE TABLE IF NOT EXISTS facts (name TEXT PRIMARY KEY, value TEXT);
"""


class DiskFull(Exception):
    """No room left on the device of ``path`` (a disk or a quota full): the crawl stops,
    and the same command carries on once there is room.

    Parameters:
      path(Path | str): The directory or file that could not be written.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        super().__init__(f"no room left on the device of {self.path}")


def no_room(error: BaseException | None) -> bool:
    """Whether ``error`` is a write the disk (or a quota) had no room for."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
        return code == SQLITE_FULL or "database or disk is full" in str(error)
    return False


class StateInUse(Exception):
    """Another process runs the crawl kept in ``directory``: its PID (None when unknown)."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        self.directory, self.pid = directory, pid
        holder = "another process" if pid is None else f"another crawler (PID {pid})"
        super().__init__(
            f"{str(directory)!r} is in use by {holder}: wait for it to end, or give"
            " another --state directory"
        )


class SavedState:
    """The state file of a local crawl, shared by its store and its broker; thread-safe.

    Parameters:
      directory(Path): Where the file is (made when missing).

    Raises :class:`StateInUse` when another process holds the directory, and
    :class:`DiskFull` when it has no room to start.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        self._lock = threading.RLock()
        #: Told once of the first write the disk had no room for.
        self.on_full: Callable[[DiskFull], object] | None = None
        self.full: DiskFull | None = None
        self._crash_log: Any = None
        self._faulthandler_was: bool | None = None
        self._held = _hold(directory)
        try:
            # Autocommit: each statement is a transaction, written before it returns.
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_SCHEMA)
                self._rows = self._next_rows()
            except BaseException:
                self._db.close()
                raise
        except (OSError, sqlite3.Error) as e:
            os.close(self._held)
            if no_room(e):
                raise DiskFull(directory) from e
            raise
        except BaseException:
            os.close(self._held)
            raise

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write: refused once one found no room (the file stays as it was then),
        :class:`DiskFull` when this one finds none."""
        if self.full is not None:
            raise DiskFull(self.full.path)
        try:
            yield
        except (OSError, sqlite3.Error) as e:
            if not no_room(e):
                raise
            raise self.stop_writing(self.path.parent) from e

    def stop_writing(self, path: Path | str) -> DiskFull:
        """No more writes: the device of ``path`` is full (told to :attr:`on_full` once)."""
        with self._lock:
            first = self.full is None
            if self.full is None:
                self.full = DiskFull(path)
        if first and self.on_full is not None:
            self.on_full(self.full)
        return DiskFull(self.full.path)

    def _next_rows(self) -> Iterator[int]:
        (last,) = self._db.execute("SELECT COALESCE(MAX(row), 0) FROM messages").fetchone()
        return iter(range(int(last) + 1, 2**62))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The changes made in the block (by this thread; others wait) written as one:
        a kill leaves all of them or none."""
        with self._lock:
            with self._writing():
                self._db.execute("BEGIN")
            try:
                yield
                with self._writing():
                    self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # none left after a failed COMMIT
                    self._db.execute("ROLLBACK")
                raise

    def fact(self, name: str) -> Any:
        """A fact saved with :meth:`set_fact`; None when there is none."""
        with self._lock:
            found = self._db.execute("SELECT value FROM facts WHERE name = ?", (name,)).fetchone()
        return None if found is None else json.loads(found[0])

    def set_fact(self, name: str, value: Any) -> None:
        with self._lock, self._writing():
            self._db.execute(
                "INSERT OR REPLACE INTO facts VALUES (?, ?)", (name, json.dumps(value))
            )

    def facts(self, prefix: str) -> dict[str, Any]:
        """The facts whose names begin with ``prefix``, by name."""
        with self._lock:
            rows = self._db.execute(
                "SELECT name, value FROM facts WHERE substr(name, 1, ?) = ?", (len(prefix), prefix)
            ).fetchall()
        return {name: json.loads(value) for name, value in rows}

    def drop_fact(self, name: str) -> None:
        with self._lock, self._writing():
            self._db.execute("DELETE FROM facts WHERE name = ?", (name,))

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
        with self._lock, self._writing():
            self._db.execute(
                "INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", (key, kind, stored, expires)
            )

    def drop_item(self, key: str) -> None:
        with self._lock, self._writing():
            self._db.execute("DELETE FROM items WHERE key = ?", (key,))

    # The broker's messages.

    def new_row(self) -> int:
        with self._lock:
            return next(self._rows)

    def put_message(self, row: int, attempt: str, body: bytes, moving: int | None = None) -> bool:
        """Keep a message under ``row``, unless one of the same ``attempt`` (its id, queue
        and retry, deferral and pause counts) waits already, other than the row it is
        ``moving`` from (a delayed message put on its queue): whether it was kept."""
        with self._lock, self._writing():
            kept = self._db.execute(
                "INSERT INTO messages SELECT ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM messages WHERE attempt = ? AND row != ?)",
                (row, attempt, body, attempt, -1 if moving is None else moving),
            )
            return kept.rowcount == 1

    def drop_message(self, row: int) -> None:
        with self._lock, self._writing():
            self._db.execute("DELETE FROM messages WHERE row = ?", (row,))

    def messages(self) -> list[bytes]:
        """The messages not acknowledged yet, in the order they were enqueued."""
        with self._lock:
            rows = self._db.execute("SELECT body FROM messages ORDER BY row").fetchall()
        return [bytes(body) for (body,) in rows]

    # Crashes.

    def watch_crashes(self) -> int:
        """Have :mod:`faulthandler` write to ``DIR/crashes.log`` if the process crashes,
        until :meth:`close`; the log's size before (it grew: an earlier run crashed)."""
        path = self.path.parent / CRASH_LOG_NAME
        self._crash_log = path.open("ab")
        self._faulthandler_was = faulthandler.is_enabled()
        faulthandler.enable(self._crash_log, all_threads=True)
        return os.fstat(self._crash_log.fileno()).st_size

    def close(self) -> None:
        with self._lock:
            self._db.close()
            if self._crash_log is not None:
                faulthandler.disable()
                if self._faulthandler_was:  # as Python's -X faulthandler, or pytest, had it
                    with contextlib.suppress(Exception):
                        faulthandler.enable(all_threads=True)
                self._crash_log.close()
                self._crash_log = None
            if self._held >= 0:
                os.close(self._held)  # the lock goes with it
                self._held = -1


def _hold(directory: Path) -> int:
    """Take ``directory``'s lock, for as long as the file it returns stays open, and
    write this process's PID in it; :class:`StateInUse` when another process holds it."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder(fd)
        os.close(fd)
        raise StateInUse(directory, pid) from None
    mine = f"{os.getpid()}\n".encode()
    try:  # over what was there, in place: no room needed beyond the block it has
        os.pwrite(fd, mine, 0)
        os.ftruncate(fd, len(mine))
    except OSError as e:
        os.close(fd)
        if no_room(e):
            raise DiskFull(directory) from e
        raise
    return fd


def _holder(fd: int) -> int | None:
    """The PID the process holding the lock wrote (it may be writing it right now)."""
    for _ in range(100):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        time.sleep(0.01)
    return None


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
