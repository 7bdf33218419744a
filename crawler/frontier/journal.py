"""A crawl's journal: every URL it claimed and which message claimed it, 16 bytes a URL,
for as long as the crawl lives.

A claim (:mod:`crawler.frontier.claims`) is a store item of its own, some 80 bytes, that
lasts ``CRAWLER_CLAIM_TTL`` (an hour) and that Memcached drops first when its memory is
full.  The journal is what answers for a URL once its claim is gone: one entry per
claimed URL, 8 bytes of the URL's digest and 8 of its owner's (the message id's),
appended to a bucket item chosen by the digest.  A lookup reads one bucket, so what a
lookup costs is the size of a bucket, and that stays flat as the crawl grows.

**Levels.**  The buckets form levels, as in linear hashing: level ``L`` has
``BASE * 2**L`` buckets, and a URL's bucket at level ``L`` is the low bits of its
digest, so bucket ``j`` of level ``L`` splits into buckets ``j`` and ``j + BASE * 2**L``
of level ``L + 1``.  The crawl's journal counter (entries written, ``jcount``) says
which level is current: level ``L`` from ``SPAN * 2**L`` entries on (level 0 from the
start), so a bucket read holds 32 to 64 entries, 0.5 to 1 KB, at any size of crawl.

* **Writes** go to the level looked up and the one above it (:class:`Layout`), so that
  the level above holds every entry written since it was started.
* **Migration** copies what the level above lacks: the entries written before it was
  started.  Each bucket of level ``L`` is copied into its two children by the writer
  whose counter increment crosses that bucket's point (one bucket every ``STEP``
  entries, from ``SPAN * 2**L * 9/8`` on), after checking which entries the children
  hold already.  The writer that copies the last bucket marks level ``L + 1`` complete
  (``jlevel``); from then on lookups read it, and the grandparent level is deleted
  bucket by bucket as the next migration goes.
* **Stale layouts.**  A writer learns the counter's new value in the round trip that
  writes its entries; when the level moved under it, it writes them to the new levels
  too, so an entry is never only in a level nobody will read.  A lookup made with a
  layout read a moment before a level completed reads the level below, which holds
  every entry too.

**Finished URLs.**  A message that finishes its URL writes a second entry, under the
URL's :func:`done_digest`: a copy of the message that comes back once the URL's claim
is gone (a redelivery after its worker was killed, a parent's resend) learns from it
that the URL was finished, and is a repeat, neither fetched nor counted again.

A worker killed while copying a bucket leaves its level incomplete: lookups then stay a
level lower, still correct, with buckets that grow until the next level completes
(each later migration checks that the level it copies from is complete).

The buckets of the levels in use are refreshed, with the crawl's counters, while the
crawl goes on (:func:`keys`); a finished crawl's expire ``CRAWLER_CRAWL_GRACE`` after
their last refresh.  Memcached's LRU promises nothing: when a bucket is evicted,
Memcached's eviction count says so, and the crawl says that count
(:func:`crawler.frontier.counters.evicted_during`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from crawler.errors import TransientError
from crawler.frontier import counters
from crawler.stores.client import StoreClient

#: Buckets of level 0.
BASE = 256
#: Entries per bucket when a level starts being read: it is read until it holds twice as many.
PER_BUCKET = 32
#: Entries at which level 1 is current; level ``L`` is from ``SPAN * 2**L`` on.
SPAN = BASE * PER_BUCKET
#: Entries between two buckets' migrations, from ``SPAN * 2**L * 9/8`` on: level ``L``
#: is copied by ``SPAN * 2**L * 7/4``, before level ``L + 1`` is current.
STEP = 20
#: Bytes of an entry: the URL's digest, then its owner's.
DIGEST, OWNER = 8, 8
ENTRY = DIGEST + OWNER


def level_of(count: int) -> int:
    """The current level of a journal of ``count`` entries."""
    return max(0, (count // SPAN).bit_length() - 1)


def buckets(level: int) -> int:
    return BASE << level


def _bucket(digest: bytes, level: int) -> int:
    """A digest's bucket at ``level``: the low bits of its first four bytes, which every
    entry stores, so a migration can tell where an entry goes."""
    return int.from_bytes(digest[:4], "big") & (buckets(level) - 1)


def _bucket_key(crawl_id: str, level: int, bucket: int) -> str:
    return f"crawl:{crawl_id}:j{level}:{bucket:x}"


def count_key(crawl_id: str) -> str:
    """Entries written to the journal (an entry written twice counts twice)."""
    return counters.crawl_key(crawl_id, "jcount")


def complete_key(crawl_id: str) -> str:
    """The highest level that holds every entry (absent: level 0)."""
    return counters.crawl_key(crawl_id, "jlevel")


def _copied_key(crawl_id: str, level: int) -> str:
    """Buckets of ``level`` copied into the level above."""
    return counters.crawl_key(crawl_id, f"jcopied{level}")


def state_keys(crawl_id: str) -> list[str]:
    """What :func:`layout` reads: fetch them with the other keys of a round trip."""
    return [count_key(crawl_id), complete_key(crawl_id)]


@dataclass(frozen=True)
class Layout:
    """Where the journal is read (``read``) and written (``read`` to ``top``)."""

    read: int
    top: int

    @property
    def written(self) -> range:
        return range(self.read, self.top + 1)


def layout(crawl_id: str, found: Mapping[str, Any]) -> Layout:
    """The layout, from the values of :func:`state_keys` in ``found``."""
    current = level_of(int(found.get(count_key(crawl_id)) or 0))
    complete = int(found.get(complete_key(crawl_id)) or 0)
    return Layout(read=min(current + 1, complete), top=current + 1)


def read_layout(client: StoreClient, crawl_id: str) -> Layout:
    return layout(crawl_id, client.get_multi(state_keys(crawl_id)))


def keys(client: StoreClient, crawl_id: str) -> list[str]:
    """The journal's keys to refresh: its figures and the buckets of the levels in use."""
    now = read_layout(client, crawl_id)
    figures = [*state_keys(crawl_id), *(_copied_key(crawl_id, level) for level in now.written)]
    return figures + [
        _bucket_key(crawl_id, level, bucket)
        for level in now.written
        for bucket in range(buckets(level))
    ]


def appends(
    crawl_id: str, levels: Iterable[int], claimed: Mapping[bytes, bytes]
) -> dict[str, bytes]:
    """The entries of each URL ``digest -> owner`` just claimed, by the bucket they go
    to, at each of ``levels``."""
    entries: dict[str, bytearray] = defaultdict(bytearray)
    for level in levels:
        for digest, owner in claimed.items():
            entries[_bucket_key(crawl_id, level, _bucket(digest, level))] += (
                digest[:DIGEST] + owner[:OWNER]
            )
    return {key: bytes(data) for key, data in entries.items()}


def start_bucket(client: StoreClient, key: str, data: bytes, ttl: int) -> None:
    """Create the bucket ``key`` with its first entries ``data``: of two workers creating
    it, the loser's ``add`` fails and it appends after all."""
    if not (client.add(key, data, time=ttl) or client.append(key, data)):
        raise TransientError("the store did not keep the crawl's journal entries")


def record(
    client: StoreClient,
    crawl_id: str,
    now: Layout,
    claimed: Mapping[bytes, bytes],
    ttl: int,
    counted: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Write an entry for each URL ``digest -> owner`` just claimed, at the levels of
    ``now``, and add to the counters ``counted`` and the journal's own count, in one
    round trip a server (``incr_and_append``); create what was not there; then catch up
    with a level that moved meanwhile and copy the buckets whose turn it is.  The
    counters' new values."""
    if not claimed:
        return {}
    increments = {count_key(crawl_id): len(claimed), **(counted or {})}
    entries = appends(crawl_id, now.written, claimed)
    # The counters not there are made in the same round trip: what the entries say was
    # counted was counted, whatever kill follows.
    answers, no_buckets = client.incr_and_append(increments, entries, ttl)
    values = counters.started(client, answers, increments, ttl)
    for key in no_buckets:
        start_bucket(client, key, entries[key], ttl)
    count = values[count_key(crawl_id)]
    moved = range(now.top + 1, level_of(count) + 2)
    if moved:  # the level moved since ``now`` was read: the entries go there too
        _append(client, appends(crawl_id, moved, claimed), ttl)
    _migrate(client, crawl_id, count - len(claimed), count, ttl)
    return values


def write(client: StoreClient, crawl_id: str, claimed: Mapping[bytes, bytes], ttl: int) -> None:
    """Write an entry for each URL ``digest -> owner`` just claimed, the layout read first."""
    record(client, crawl_id, read_layout(client, crawl_id), claimed, ttl)


def _append(client: StoreClient, entries: Mapping[str, bytes], ttl: int) -> None:
    _, no_buckets = client.incr_and_append({}, entries)
    for key in no_buckets:
        start_bucket(client, key, entries[key], ttl)


def _copy_point(level: int) -> int:
    """The count at which bucket 0 of ``level`` is copied into the level above."""
    return SPAN * 9 // 8 << level


def _migrate(client: StoreClient, crawl_id: str, before: int, after: int, ttl: int) -> None:
    """Copy each bucket whose point lies in the counts ``(before, after]``."""
    for level in range(level_of(before), level_of(after) + 1):
        start = _copy_point(level)
        first = max(0, -(-(before + 1 - start) // STEP))
        last = min(buckets(level) - 1, (after - start) // STEP)
        for bucket in range(first, last + 1):
            _copy(client, crawl_id, level, bucket, ttl)


def _copy(client: StoreClient, crawl_id: str, level: int, bucket: int, ttl: int) -> None:
    """Copy bucket ``bucket`` of ``level`` into its two children, each entry the child
    lacks; count it copied, and mark the level above complete after its last bucket."""
    source = _bucket_key(crawl_id, level, bucket)
    children = [bucket, bucket + buckets(level)]
    child_keys = [_bucket_key(crawl_id, level + 1, child) for child in children]
    found = client.get_multi([source, *child_keys, complete_key(crawl_id)])
    if int(found.get(complete_key(crawl_id)) or 0) < level:
        return  # the level is incomplete itself: copying it would not complete the next
    data = found.get(source) or b""
    missing: dict[str, bytearray] = defaultdict(bytearray)
    for start in range(0, len(data) - len(data) % ENTRY, ENTRY):
        entry = data[start : start + ENTRY]
        key = _bucket_key(crawl_id, level + 1, _bucket(entry, level + 1))
        if _find(found.get(key) or b"", entry[:DIGEST]) is None:
            missing[key] += entry
    _append(client, {key: bytes(entries) for key, entries in missing.items()}, ttl)
    if level > 0 and bucket < buckets(level - 1):
        client.delete(_bucket_key(crawl_id, level - 1, bucket))  # read by nobody now
    copied = counters.add_to(client, _copied_key(crawl_id, level), 1, ttl)
    if copied == buckets(level):
        client.set(complete_key(crawl_id), level + 1, time=ttl)


def _find(data: bytes, digest: bytes) -> bytes | None:
    """The owner of the first entry of ``digest`` in a bucket's ``data``."""
    start = data.find(digest)  # a C search of one bucket, at most some 1 KB
    while start != -1 and start % ENTRY:
        start = data.find(digest, start + 1)
    return None if start == -1 else bytes(data[start + DIGEST : start + ENTRY])


def done_digest(digest: bytes) -> bytes:
    """The journal's digest for "the URL of ``digest`` was finished" (its owner, the
    message that finished it): in the URL's own bucket at every level (the first four
    bytes are kept), and an entry of its own, which a migration copies as any."""
    digest = digest[:DIGEST]
    return digest[:-1] + bytes([digest[-1] ^ 0xFF])


def owners(
    client: StoreClient, crawl_id: str, digests: Iterable[bytes], now: Layout | None = None
) -> dict[bytes, bytes]:
    """The owner the journal holds for each digest it holds: the first claim's.  One
    bucket a digest, at the level ``now`` reads (read first when not given)."""
    digests = list(digests)
    if not digests:
        return {}
    level = (now or read_layout(client, crawl_id)).read
    wanted: dict[str, list[bytes]] = defaultdict(list)
    for digest in digests:
        wanted[_bucket_key(crawl_id, level, _bucket(digest, level))].append(digest)
    found: dict[bytes, bytes] = {}
    for key, data in client.get_multi(list(wanted)).items():
        for digest in wanted[key]:
            owner = _find(data, digest[:DIGEST])
            if owner is not None:
                found[digest] = owner
    return found
