"""``--recrawl-from FILE``: a crawl that downloads only what changed since an earlier one.

FILE holds the records (``-o``, JSON lines) of an earlier crawl of the same site.  The
seeder reads it whole before it sends anything (a line that is no crawler record stops
it, naming the line), and keeps what a recrawl needs of each page that had a validator
(its ``etag``, its ``last_modified``) in the dedup store, under the crawl's id, for the
crawl's lifetime: those validators, the page's links, its payload digest and, when
the earlier crawl's WARC files are given (``--recrawl-warc DIR``), where its capture
is.  A worker reads a page's entry before fetching it (one more round trip, only in a
recrawl) and sends ``If-None-Match`` / ``If-Modified-Since``; a ``304 Not Modified``
is an unchanged page: its record says ``unchanged``, and the earlier record's links
are followed without the page being downloaded or parsed, so the recrawl reaches
every page a full crawl would.  A page the store no longer holds (evicted, or never
seen) is fetched in full: an entry lost costs a download, never a page.

Why the store rather than the messages: a page's message is sent by whichever page
links to it first, and that page cannot know another's validators; the store is
where every worker looks already.  Measured in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crawler.frontier.digests import url_digest
from crawler.options import canonical_http_url
from crawler.outcomes import CRAWLED, DUPLICATE_CONTENT, NOT_HTML, UNCHANGED

#: The outcomes of a record whose page a recrawl may ask "changed since?".
PAGES = (CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED)
#: Entries written to the store in one round trip.
BATCH = 500


class RecrawlFileError(ValueError):
    """``--recrawl-from``'s file is not an earlier crawl's records: why, and on which line."""


@dataclass(frozen=True)
class Capture:
    """Where the earlier crawl's WARC files hold a page: its record's id and date."""

    record_id: str
    date: str


@dataclass(frozen=True)
class Earlier:
    """What an earlier crawl saw of a page.

    Parameters:
      etag(str): Its ``ETag``.
      last_modified(str): Its ``Last-Modified``.
      links(tuple): The links its record listed, followed again when it is unchanged.
      payload_digest(str): Its ``WARC-Payload-Digest`` when it was kept in WARC files.
      capture(Capture): Its WARC record, when the earlier WARC files were given.
    """

    etag: str | None = None
    last_modified: str | None = None
    links: tuple[str, ...] = ()
    payload_digest: str | None = None
    capture: Capture | None = None

    def conditions(self) -> dict[str, str]:
        """The conditional request's headers."""
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers

    def encoded(self) -> bytes:
        value: dict[str, Any] = {"e": self.etag, "m": self.last_modified, "l": list(self.links)}
        value["d"] = self.payload_digest
        if self.capture is not None:
            value["c"] = [self.capture.record_id, self.capture.date]
        return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)

    @classmethod
    def decoded(cls, data: bytes) -> Earlier:
        value = json.loads(zlib.decompress(data))
        capture = None if value.get("c") is None else Capture(*value["c"])
        return cls(value["e"], value["m"], tuple(value["l"]), value["d"], capture)


def key(crawl_id: str, url: str) -> str:
    """The store key of a page's earlier entry in a crawl."""
    return "e:" + url_digest(url, crawl_id).hex()


def earlier_of(client: Any, crawl_id: str | None, url: str) -> Earlier | None:
    """The earlier entry of ``url`` in the crawl ``crawl_id``, if the store holds one."""
    data = client.get(key(str(crawl_id), url))
    return None if data is None else Earlier.decoded(bytes(data))


def unchanged(earlier: Earlier | None, status: int) -> Earlier | None:
    """``earlier``, when the answer's ``status`` to the request it made conditional says
    the page was not modified (``304``); else None."""
    return earlier if status == 304 else None


def read_records(
    path: Path, seeds: Iterable[str], warc: Path | None = None
) -> Iterator[tuple[str, Earlier]]:
    """The pages of ``path`` (an earlier crawl's records) that a recrawl can ask about,
    with what it needs of each; checked whole first: a :class:`RecrawlFileError` names
    the first line that is not a crawler record, or says the file holds no record of
    the seeds' hosts (another site's).  ``warc``: the earlier crawl's WARC files."""
    entries, hosts, records = [], set(), 0
    try:
        lines = path.open(encoding="utf-8")
    except OSError as e:
        raise RecrawlFileError(f"--recrawl-from {str(path)!r}: {e.strerror or e}") from e
    with lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = _record(path, number, line)
            records += 1
            hosts.add(urlsplit(record["url"]).hostname)
            if record["outcome"] in PAGES and (record.get("etag") or record.get("last_modified")):
                entries.append((record["url"], _earlier(record)))
    seed_hosts = {urlsplit(seed).hostname for seed in seeds}
    if records and not hosts & seed_hosts:
        raise RecrawlFileError(
            f"--recrawl-from {str(path)!r}: none of its {records} records is of the seeds'"
            f" hosts ({', '.join(sorted(str(h) for h in seed_hosts))}): another site's records?"
        )
    captures = _captures(warc) if warc is not None else {}
    for url, earlier in entries:
        capture = captures.get(url)
        yield url, earlier if capture is None else dataclasses.replace(earlier, capture=capture)


#: The fields a record of the crawler has, and their types.
_FIELDS: Mapping[str, type | tuple[type, ...]] = {
    "url": str,
    "outcome": str,
    "links": list,
    "etag": (str, type(None)),
    "last_modified": (str, type(None)),
    "payload_digest": (str, type(None)),
    "warc_file": (str, type(None)),
    "warc_offset": (int, type(None)),
}


def _record(path: Path, number: int, line: str) -> dict[str, Any]:
    where = f"--recrawl-from {str(path)!r}, line {number}"
    try:
        record = json.loads(line)
    except ValueError as e:
        raise RecrawlFileError(f"{where}: not JSON ({e})") from None
    if not isinstance(record, dict) or "url" not in record or "outcome" not in record:
        raise RecrawlFileError(f"{where}: not a crawler record (it needs a url and an outcome)")
    for name, kind in _FIELDS.items():
        if name in record and not isinstance(record[name], kind):
            raise RecrawlFileError(f"{where}: its {name} is not what a crawler record holds")
    try:
        record["url"] = canonical_http_url(record["url"], sendable=False)
        record["links"] = [str(link) for link in record.get("links", [])]
    except ValueError as e:
        raise RecrawlFileError(f"{where}: its url {e}") from None
    return record


def _earlier(record: Mapping[str, Any]) -> Earlier:
    return Earlier(
        etag=record.get("etag"),
        last_modified=record.get("last_modified"),
        links=tuple(record["links"]),
        payload_digest=record.get("payload_digest"),
    )


def _captures(directory: Path) -> dict[str, Capture]:
    """Where the earlier crawl's WARC files hold each page it fetched: its ``response``
    record, or what its ``revisit`` record refers to (a page unchanged then too)."""
    from warcio.archiveiterator import ArchiveIterator

    captures: dict[str, Capture] = {}
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                headers = record.rec_headers
                if record.rec_type == "response":
                    capture = Capture(
                        headers.get_header("WARC-Record-ID"), headers.get_header("WARC-Date")
                    )
                elif record.rec_type == "revisit" and headers.get_header("WARC-Refers-To"):
                    capture = Capture(
                        headers.get_header("WARC-Refers-To"),
                        headers.get_header("WARC-Refers-To-Date"),
                    )
                else:
                    continue
                url = canonical_http_url(headers.get_header("WARC-Target-URI"), sendable=False)
                captures.setdefault(url, capture)
    return captures


def load(client: Any, crawl_id: str, entries: Iterable[tuple[str, Earlier]], ttl: int) -> int:
    """Keep ``entries`` in the store under the crawl (for ``ttl`` seconds): how many.
    An entry there already (a carried-on crawl) is left as it is."""
    batch: dict[str, bytes] = {}
    count = 0
    for url, earlier in entries:
        batch[key(crawl_id, url)] = earlier.encoded()
        count += 1
        if len(batch) >= BATCH:
            client.add_multi(batch, time=ttl)
            batch = {}
    if batch:
        client.add_multi(batch, time=ttl)
    return count
