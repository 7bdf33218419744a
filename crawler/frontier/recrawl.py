"""``--recrawl-from FILE``: a crawl that downloads only what changed since an earlier one.

FILE holds the records (``-o``, JSON lines) of an earlier crawl of the same site.  The
seeder reads it whole before it sends anything (a line that is no crawler record, or
not UTF-8, stops it, naming the line; a validator no request can carry is left out,
with one warning, and its page fetched in full), and keeps what a recrawl needs of
each page that had a validator (its ``etag``, its ``last_modified``) in the dedup
store, under the crawl's id, for the crawl's lifetime: those validators, the page's
links, its payload digest and, when the earlier crawl's WARC files are given
(``--recrawl-warc DIR``), where its capture is.  A worker reads a page's entry before
fetching it (one more round trip, only in a recrawl) and sends ``If-None-Match`` /
``If-Modified-Since``; a ``304 Not Modified`` is an unchanged page: its record says
``unchanged``, and the earlier record's links are followed without the page being
downloaded or parsed (the first ``CRAWLER_MAX_LINKS_PER_PAGE`` of them, the worker's,
as a page's), so the recrawl reaches every page a full crawl would.  A page the store
no longer holds (evicted, never seen, or too large to keep: :data:`MAX_ENTRY_BYTES`)
is fetched in full: an entry lost costs a download, never a page.

Why the store rather than the messages: a page's message is sent by whichever page
links to it first, and that page cannot know another's validators; the store is
where every worker looks already.  Measured in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from crawler.environment import limits_from_environment
from crawler.frontier.digests import url_digest
from crawler.local_files import InputError, open_input
from crawler.option_rules import canonical_http_url
from crawler.outcomes import CRAWLED, DUPLICATE_CONTENT, NOT_HTML, UNCHANGED
from crawler.records import Record

#: The outcomes of a record whose page a recrawl may ask "changed since?".
PAGES = (CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED)
#: Entries written to the store in one round trip.
BATCH = 500
#: An entry's size at most, compressed: Memcached refuses a value over 1 MiB (its
#: default ``-I``); a page whose entry is larger is fetched in full.
MAX_ENTRY_BYTES = 512 * 1024
#: A validator a request can carry back (RFC 9110's field value: visible ASCII and
#: Latin-1's upper half, spaces and tabs inside; no CR, LF, NUL or other control), of
#: :data:`MAX_VALIDATOR` characters at most: else requests refuses the header, or a
#: server the request (``431``), and the page would be lost rather than fetched.
_SENDABLE = re.compile(r"[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?")
MAX_VALIDATOR = 1024
#: The validators of a record, and the header each is sent back in.
VALIDATORS: dict[Literal["etag", "last_modified"], str] = {
    "etag": "If-None-Match",
    "last_modified": "If-Modified-Since",
}

logger = logging.getLogger(__name__)


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
      text_digest(str): The digest of its main text (``--markdown``,
        ``--near-duplicates``): the same text again is the page unchanged.
    """

    etag: str | None = None
    last_modified: str | None = None
    links: tuple[str, ...] = ()
    payload_digest: str | None = None
    capture: Capture | None = None
    text_digest: str | None = None

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
        if self.text_digest is not None:
            value["t"] = self.text_digest
        if self.capture is not None:
            value["c"] = [self.capture.record_id, self.capture.date]
        return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)

    @classmethod
    def decoded(cls, data: bytes) -> Earlier:
        value = json.loads(zlib.decompress(data))
        capture = None if value.get("c") is None else Capture(*value["c"])
        return cls(value["e"], value["m"], tuple(value["l"]), value["d"], capture, value.get("t"))


def key(crawl_id: str, url: str) -> str:
    """The store key of a page's earlier entry in a crawl."""
    return "e:" + url_digest(url, crawl_id).hex()


def earlier_of(client: Any, crawl_id: str | None, url: str) -> Earlier | None:
    """The earlier entry of ``url`` in the crawl ``crawl_id``, if the store holds one,
    its links cut to the first ``CRAWLER_MAX_LINKS_PER_PAGE``, as a page's are."""
    data = client.get(key(str(crawl_id), url))
    if data is None:
        return None
    earlier = Earlier.decoded(bytes(data))
    most = _max_links()
    if len(earlier.links) <= most:
        return earlier
    logger.warning("Taking only the first %d links of %r.", most, url)
    return dataclasses.replace(earlier, links=earlier.links[:most])


@functools.cache
def _max_links() -> int:
    """``CRAWLER_MAX_LINKS_PER_PAGE`` of this process (a worker: what its pages' links
    are capped at), read once."""
    return limits_from_environment().max_links_per_page


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
    try:  # a regular file: a FIFO nobody writes to would be waited on for ever
        lines = io.TextIOWrapper(open_input(path), encoding="utf-8", errors="surrogateescape")
    except InputError as e:
        raise RecrawlFileError(f"--recrawl-from {str(path)!r}: {e}") from e
    unsendable: list[str] = []  # the validators left out, as "line N's etag"
    with lines:
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if text in ("", "[", "]"):  # a JSON array's brackets (--records FILE.json)
                continue
            record = _record(path, number, text.removesuffix(","))
            records += 1
            hosts.add(urlsplit(record["url"]).hostname)
            if record["outcome"] not in PAGES:
                continue
            unsendable += _without_unsendable(record, number)
            if record.get("etag") or record.get("last_modified") or record.get("text_digest"):
                entries.append((record["url"], _earlier(record)))  # a validator, or its text
    if unsendable:
        logger.warning(
            "--recrawl-from %r: %d validator(s) no request can carry (a CR, LF or other control,"
            " a character outside Latin-1, over %d characters), %s first: left out, their"
            " pages fetched in full.",
            str(path), len(unsendable), MAX_VALIDATOR, unsendable[0],
        )  # fmt: skip
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


def _record(path: Path, number: int, line: str) -> Record:
    where = f"--recrawl-from {str(path)!r}, line {number}"
    if number == 1:
        line = line.removeprefix("\ufeff")  # a byte-order mark, as some editors write
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as e:  # a byte the reading escaped (surrogateescape)
        byte = ord(line[e.start]) - 0xDC00
        raise RecrawlFileError(
            f"{where}: not UTF-8 (byte 0x{byte:02x} at character {e.start + 1})"
        ) from None
    try:
        decoded = json.loads(line)
    except ValueError as e:
        raise RecrawlFileError(f"{where}: not JSON ({e})") from None
    if not isinstance(decoded, dict) or "url" not in decoded or "outcome" not in decoded:
        raise RecrawlFileError(f"{where}: not a crawler record (it needs a url and an outcome)")
    for name, kind in _FIELDS.items():
        if name in decoded and not isinstance(decoded[name], kind):
            raise RecrawlFileError(f"{where}: its {name} is not what a crawler record holds")
    # Decoded JSON, the fields read here checked (links' items below): typed as a record.
    record = cast(Record, decoded)
    try:
        record["url"] = canonical_http_url(record["url"], sendable=False)
        # Absolute http(s) links only, as a page's (the others are not followed).
        record["links"] = [
            link
            for link in record.get("links", [])
            if isinstance(link, str) and link.startswith(("http://", "https://"))
        ]
    except ValueError as e:
        raise RecrawlFileError(f"{where}: its url {e}") from None
    return record


def _without_unsendable(record: Record, number: int) -> list[str]:
    """Leave out the validators of ``record`` no request can carry (:data:`_SENDABLE`);
    which they were, as ``line N's etag``."""
    left_out = []
    for name in VALIDATORS:
        value = record.get(name)
        if value and (len(value) > MAX_VALIDATOR or not _SENDABLE.fullmatch(value)):
            record[name] = None
            left_out.append(f"line {number}'s {name}")
    return left_out


def _earlier(record: Record) -> Earlier:
    return Earlier(
        etag=record.get("etag"),
        last_modified=record.get("last_modified"),
        links=tuple(record["links"]),
        payload_digest=record.get("payload_digest"),
        text_digest=record.get("text_digest"),
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
    An entry there already (a carried-on crawl) is left as it is; one over
    :data:`MAX_ENTRY_BYTES` is not kept (a warning says how many): its page is fetched
    in full."""
    batch: dict[str, bytes] = {}
    count = too_large = 0
    for url, earlier in entries:
        encoded = earlier.encoded()
        if len(encoded) > MAX_ENTRY_BYTES:
            too_large += 1
            continue
        batch[key(crawl_id, url)] = encoded
        count += 1
        if len(batch) >= BATCH:
            client.add_multi(batch, time=ttl)
            batch = {}
    if batch:
        client.add_multi(batch, time=ttl)
    if too_large:
        logger.warning(
            "--recrawl-from: %d page(s) of the earlier crawl list too many links to keep"
            " (over %d bytes compressed): fetched in full.",
            too_large, MAX_ENTRY_BYTES,
        )  # fmt: skip
    return count
