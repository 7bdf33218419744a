"""``--files``: a page's items wait for the files they name, and are written once each
file's fetch has ended (:class:`FileJoin`), with what became of it.

A file is fetched by a message of its own (a request the files stage of the page's
pipeline adds, :mod:`crawler.pipeline.files`), claimed apart from the page at its URL
(its ``request_key`` is :data:`FILE_REQUEST_KEY`), so each file is fetched once a crawl
however many items name it, under the crawl's scope, politeness, retries and budgets.
Each fetch ends in one final record, as every message's does: a file's record says
where it was kept (``file``), a failure's why it was not.  The crawl's item sinks
(:class:`~crawler.items.sinks.ItemSinks`) hold a page's items while an entry of their
``files`` is :data:`PENDING`, and write them, whole, once the records of those files
have come (in any order: a file's record may come before its page's).  Nothing is
lost: at the end of the crawl the items still waiting are written, each file whose
fetch never ended in it said ``not downloaded``.
"""

from __future__ import annotations

from typing import Any, Protocol

from crawler.outcomes import ANSWERED, DUPLICATE, FAILED, NOT_FINAL
from crawler.records import Record

#: The field of an item that names the files to download (``--files``), as Scrapy's.
FILE_URLS = "file_urls"
#: The field the crawl fills with what became of each (:mod:`crawler.archiving.files`).
FILES = "files"
#: The label and ``unique_key`` of a file's request: a file is claimed apart from a page
#: at its URL, and given to no handler.
FILE_LABEL = "crawler:file"
FILE_KEY = "file"
#: What an item's entry of a file says while its fetch has not ended.
PENDING = "pending"
#: The ``request_key`` of a file's message (:func:`crawler.frontier.scope.request_key`).
FILE_REQUEST_KEY = f"key:{FILE_KEY}"


def entry_of(record: Record) -> dict[str, Any] | None:
    """What a final record of a file's message says of the file, for the items naming
    it: its ``file`` entry, or the URL and why it was not downloaded; None for a record
    that is not a file's, or does not end its fetch (a retry, a duplicate claim)."""
    if record.get("request_key") != FILE_REQUEST_KEY:
        return None
    outcome = record.get("outcome")
    if outcome in NOT_FINAL or outcome == DUPLICATE:
        return None
    kept = record.get("file")
    if isinstance(kept, dict):
        return kept
    url = record["url"]
    if outcome == ANSWERED:
        return {"url": url, "status": f"failed: HTTP {record.get('status')}"}
    if outcome == FAILED:
        return {"url": url, "status": f"failed: {record.get('error') or 'given up'}"}
    return {"url": url, "status": f"not downloaded: {outcome}"}


class Facts(Protocol):
    """Where a crawl carried on (``--state``) keeps what the join knows
    (:class:`~crawler.stores.saved.SavedState`'s facts)."""

    def facts(self, prefix: str) -> dict[str, Any]: ...

    def set_fact(self, name: str, value: Any) -> None: ...

    def drop_fact(self, name: str) -> None: ...


#: The names of the join's facts: a file's entry, a page waiting.
KNOWN, WAITING = "files-known:", "files-waiting:"


class FileJoin:
    """The pages whose items wait for files: each page's items are held, in one piece,
    until none of their ``files`` entries is :data:`PENDING`.  Not thread-safe: its
    callers (the item sinks) hold a lock.

    Parameters:
      saved(Facts|None): A ``--local --state`` crawl's state, where the pages waiting
        and the files known are kept as they change, and read back when the crawl
        carries on: a crawl killed while items wait for files loses none of them.
    """

    def __init__(self, saved: Facts | None = None) -> None:
        self.saved = saved
        #: The entry of each file whose fetch ended, by URL.
        self.known: dict[str, dict[str, Any]] = {}
        #: The pages waiting, by name: their items.
        self.waiting: dict[str, list[dict[str, Any]]] = {}
        #: The pages waiting for each file, by its URL.
        self.waiting_for: dict[str, set[str]] = {}
        if saved is not None:  # carried on: what the crawl had before
            for name, entry in saved.facts(KNOWN).items():
                self.known[name[len(KNOWN) :]] = entry
            for name, items in saved.facts(WAITING).items():
                self._wait(name[len(WAITING) :], items, self._fill(items))

    def hold(self, page: str, items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The page's items to write now (their files known, filled in), or None: held
        till the files they wait for have come."""
        missing = self._fill(items)
        if not missing:
            return items
        self._wait(page, items, missing)
        if self.saved is not None:
            self.saved.set_fact(WAITING + page, items)
        return None

    def _wait(self, page: str, items: list[dict[str, Any]], missing: set[str]) -> None:
        self.waiting[page] = items
        for url in missing:
            self.waiting_for.setdefault(url, set()).add(page)

    def arrived(self, record: Record) -> list[tuple[str, list[dict[str, Any]]]]:
        """The pages (name, items) a file's final ``record`` makes whole."""
        entry = entry_of(record)
        if entry is None:
            return []
        url = record["url"]
        self.known[url] = entry
        if self.saved is not None:
            self.saved.set_fact(KNOWN + url, entry)
        whole = []
        for page in sorted(self.waiting_for.pop(url, ())):
            items = self.waiting.get(page)
            if items is not None and not self._fill(items):
                whole.append((page, self.waiting.pop(page)))
        return whole

    def written(self, page: str) -> None:
        """A page :meth:`arrived` made whole is written: no longer kept as waiting."""
        if self.saved is not None:
            self.saved.drop_fact(WAITING + page)

    def rest(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """The pages still waiting at the end of the crawl, each file not known said
        ``not downloaded``; none is held after."""
        pages = list(self.waiting.items())
        self.waiting.clear()
        self.waiting_for.clear()
        for page, items in pages:
            self.written(page)
            for item in items:
                for entry in _entries(item):
                    if entry.get("status") == PENDING:
                        entry["status"] = "not downloaded: its fetch did not end in this crawl"
        return pages

    def _fill(self, items: list[dict[str, Any]]) -> set[str]:
        """Fill in the entries of ``items`` whose files are known; the URLs still missing."""
        missing = set()
        for item in items:
            files = item.get(FILES)
            if not isinstance(files, list):
                continue
            for i, entry in enumerate(files):
                if not isinstance(entry, dict) or entry.get("status") != PENDING:
                    continue
                known = self.known.get(entry.get("url", ""))
                if known is None:
                    missing.add(entry["url"])
                else:
                    files[i] = dict(known)
        return missing


def _entries(item: dict[str, Any]) -> list[dict[str, Any]]:
    files = item.get(FILES)
    return [e for e in files if isinstance(e, dict)] if isinstance(files, list) else []
