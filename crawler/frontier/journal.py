"""A crawl's journal: every URL it claimed and which message claimed it, 16 bytes a URL,
for as long as the crawl lives.

A claim (:mod:`crawler.frontier.claims`) is a Memcached item of its own, some 80 bytes,
that lasts ``CRAWLER_CLAIM_TTL`` (an hour) and that Memcached drops first when its memory
is full.  The journal is what answers for a URL once its claim is gone: one entry per
claimed URL, 8 bytes of the URL's digest and 8 of its owner's (the message id's), appended
to one of :data:`BUCKETS` items per crawl.  The buckets are few and known by name, so a
worker can refresh them, with the crawl's counters, while the crawl goes on
(:func:`keys`); a finished crawl's expire ``CRAWLER_CRAWL_GRACE`` after their last
refresh.  Being few, often written and read, they outlived the claims in the eviction
runs measured here, but Memcached's LRU is per slab class and promises nothing; when
one is evicted, Memcached's eviction count says so, and the crawl says that count
(:func:`crawler.frontier.counters.evicted_during`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from crawler.errors import TransientError

#: Buckets per crawl: at a million URLs each holds some 4 KB.
BUCKETS = 4096
#: Bytes of an entry: the URL's digest, then its owner's.
DIGEST, OWNER = 8, 8
ENTRY = DIGEST + OWNER


def _bucket_key(crawl_id: str, bucket: int) -> str:
    return f"crawl:{crawl_id}:j{bucket:03x}"


def _bucket(digest: bytes) -> int:
    """The bucket of a URL's digest (its bytes 12 and 13, which no entry stores)."""
    return int.from_bytes(digest[12:14], "big") % BUCKETS


def keys(crawl_id: str) -> list[str]:
    """Every bucket of the crawl, whether it exists yet or not."""
    return [_bucket_key(crawl_id, bucket) for bucket in range(BUCKETS)]


def appends(crawl_id: str, claimed: Mapping[bytes, bytes]) -> dict[str, bytes]:
    """The entries of each URL ``digest -> owner`` just claimed, by the bucket they go to."""
    entries: dict[str, bytearray] = defaultdict(bytearray)
    for digest, owner in claimed.items():
        entries[_bucket_key(crawl_id, _bucket(digest))] += digest[:DIGEST] + owner[:OWNER]
    return {key: bytes(data) for key, data in entries.items()}


def start_bucket(client: Any, key: str, data: bytes, ttl: int) -> None:
    """Create the bucket ``key`` with its first entries ``data``: of two workers creating
    it, the loser's ``add`` fails and it appends after all."""
    if not (client.add(key, data, time=ttl) or client.append(key, data)):
        raise TransientError("Memcached did not store the crawl's journal entries")


def write(client: Any, crawl_id: str, claimed: Mapping[bytes, bytes], ttl: int) -> None:
    """Append an entry for each URL ``digest -> owner`` just claimed, one round trip per bucket."""
    for key, data in appends(crawl_id, claimed).items():
        if not client.append(key, data):  # a bucket is created by its first entry
            start_bucket(client, key, data, ttl)


def owners(client: Any, crawl_id: str, digests: Iterable[bytes]) -> dict[bytes, bytes]:
    """The owner the journal holds for each digest it holds: the first claim's."""
    wanted: dict[str, set[bytes]] = defaultdict(set)
    for digest in digests:
        wanted[_bucket_key(crawl_id, _bucket(digest))].add(digest)
    if not wanted:
        return {}
    found: dict[bytes, bytes] = {}
    for key, data in client.get_multi(list(wanted)).items():
        for digest in wanted[key]:
            start = data.find(digest[:DIGEST])  # a C search, at a million URLs 4 KB a bucket
            while start != -1 and start % ENTRY:
                start = data.find(digest[:DIGEST], start + 1)
            if start != -1:
                found[digest] = bytes(data[start + DIGEST : start + ENTRY])
    return found
