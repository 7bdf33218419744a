"""What a waiting seeder must remember of a crawl, on disk: memory that stays bounded
whatever the crawl's size.

``--wait`` ends a crawl once every message it expects (the seeds, and each message a
record says was sent) has ended; a record that comes twice (sent again by a worker that
died before its acknowledgement) counts once; a URL is written to ``--output`` once.
That takes every message id of the crawl, and every URL written: kept in Python sets,
some 0.4 KB a page, 4 GB for ten million pages.  :class:`Ledger` keeps them in sets of
16-byte keys up to :data:`SPILL_AT` of them, then moves them to SQLite (the standard
library's), in a file of its own in the temporary directory, deleted when closed: the
process then holds SQLite's page cache (:data:`CACHE_KIB`) and two counts.  Nothing is
made durable (no journal, no sync): the file lives as long as the seeder.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

#: SQLite's page cache, in KiB: what the ledger holds in memory once on disk.
CACHE_KIB = 8192
#: Keys kept in memory before they all move to disk (some 10 MB of sets): a crawl of
#: fewer pages pays nothing for the disk.
SPILL_AT = 100_000
TABLES = ("expected", "ended", "written")


def _message_key(message_id: str) -> bytes:
    """A message id as 16 bytes: a UUID's own (Dramatiq's ids are UUIDs), or a digest."""
    try:
        return uuid.UUID(message_id).bytes
    except ValueError:
        return hashlib.blake2b(message_id.encode(), digest_size=16).digest()


class Ledger:
    """The messages a waiting seeder expects and has seen end, and the URLs it wrote.

    Parameters:
      directory(Path|None): Where the ledger's file goes (a temporary directory of its
        own inside it); the system's temporary directory by default.
      spill_at(int): Keys kept in memory before all move to disk.
    """

    def __init__(self, directory: Path | None = None, spill_at: int = SPILL_AT) -> None:
        self._directory = directory
        self._spill_at = spill_at
        self._sets: dict[str, set[bytes]] | None = {table: set() for table in TABLES}
        self._disk: tempfile.TemporaryDirectory[str] | None = None
        self._db: sqlite3.Connection | None = None
        #: Messages expected, and of those the ones that have not ended yet.
        self.expected = self.pending = 0

    def _spill(self, sets: dict[str, set[bytes]]) -> None:
        """Move every key to a SQLite file of the ledger's own, and keep them there."""
        self._disk = tempfile.TemporaryDirectory(prefix="crawler-ledger-", dir=self._directory)
        db = sqlite3.connect(Path(self._disk.name) / "ledger.db", isolation_level=None)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", f"cache_size = -{CACHE_KIB}"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("BEGIN")
        for table, keys in sets.items():
            db.execute(f"CREATE TABLE {table} (key BLOB PRIMARY KEY) WITHOUT ROWID")
            db.executemany(f"INSERT INTO {table} VALUES (?)", ((key,) for key in keys))
        self._sets, self._db = None, db

    def _add(self, table: str, key: bytes) -> bool:
        """Add ``key`` to ``table``: whether it was not there before."""
        if self._sets is not None:
            keys = self._sets[table]
            if key in keys:
                return False
            keys.add(key)
            if sum(len(each) for each in self._sets.values()) > self._spill_at:
                self._spill(self._sets)
            return True
        assert self._db is not None
        added = self._db.execute(f"INSERT OR IGNORE INTO {table} VALUES (?)", (key,)).rowcount
        return bool(added)

    def _has(self, table: str, key: bytes) -> bool:
        if self._sets is not None:
            return key in self._sets[table]
        assert self._db is not None
        found = self._db.execute(f"SELECT 1 FROM {table} WHERE key = ?", (key,)).fetchone()
        return found is not None

    @property
    def on_disk(self) -> bool:
        return self._db is not None

    def expect(self, message_ids: Iterable[str]) -> None:
        """Messages sent in the crawl: the crawl is not over until each has ended."""
        for message_id in message_ids:
            key = _message_key(message_id)
            if self._add("expected", key):
                self.expected += 1
                if not self._has("ended", key):
                    self.pending += 1

    def end(self, message_id: str) -> bool:
        """A message's final record came: True the first time, False for a copy."""
        key = _message_key(message_id)
        if not self._add("ended", key):
            return False
        if self._has("expected", key):
            self.pending -= 1
        return True

    def first_write(self, url: str) -> bool:
        """Whether ``url`` is written to ``--output`` now: True once per URL."""
        return self._add("written", hashlib.blake2b(url.encode(), digest_size=16).digest())

    def flush(self) -> None:
        """On disk, end the open transaction (SQLite writes pages out between two) and
        begin the next."""
        if self._db is not None:
            self._db.execute("COMMIT")
            self._db.execute("BEGIN")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        if self._disk is not None:
            self._disk.cleanup()
        self._sets = {table: set() for table in TABLES}

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
