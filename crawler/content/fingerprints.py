"""Near-duplicate pages: a 64-bit SimHash of a page's main text (Charikar's, as Manku,
Jain and Das Sarma used it to find near-duplicate web pages in a crawl), and the bands
by which pages within :data:`THRESHOLD` bits of each other are found.

The text's words are its features, each weighted by how often it appears; each
feature's 64-bit hash (BLAKE2b) votes on each bit, and a bit of the fingerprint is set
where most of the weight voted for it.  Two pages that differ in a few words (a date, a
counter) differ in a few bits; two different pages in about half of them.

Pages at most :data:`THRESHOLD` bits apart share at least one of ``THRESHOLD + 1``
bands of the fingerprint (the pigeonhole principle: :func:`bands`), so a page is
compared only with those that share a band with it, found by the band's key in the
crawl's store (:mod:`crawler.pipeline.near_duplicates`).

The votes are counted a bit at a time over all features at once: their hashes, one
per occurrence, side by side in one ``bytes``; for each bit, ``bytes.translate`` maps
each byte to that bit and ``count`` counts the ones, both in C.  A word's hash is kept
once made (:data:`KEPT_WORDS` of them): the pages of a site share most of their words.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

#: Pages whose fingerprints differ in at most this many bits are near-duplicates.
#: Manku et al. found 3 of 64 right for billions of long web pages; pages of a few
#: hundred words that differ in a date line drift up to 5 bits apart (tests/
#: test_clean_text.py), so 4, each page's line in 5 bands of 13 bits: two pages with
#: nothing in common come within 4 bits once in 2.5 * 10^13 pairs.
THRESHOLD = 4
#: Bits of a fingerprint.
BITS = 64
_WORDS = re.compile(r"\w+")
#: Words whose hashes a process keeps (about 15 MB at most), then makes each time.
KEPT_WORDS = 100_000
_HASHES: dict[str, bytes] = {}
#: For each bit of a byte, the table that maps a byte to that bit (0 or 1).
_BIT = [bytes((value >> bit) & 1 for value in range(256)) for bit in range(8)]


def simhash(text: str) -> int:
    """The 64-bit SimHash of ``text``'s words (lower case); 0 for a text without any."""
    weights = Counter(_WORDS.findall(text.lower()))
    if not weights:
        return 0
    blake2b, known = hashlib.blake2b, _HASHES
    votes = []
    for word, count in weights.items():
        digest = known.get(word)
        if digest is None:
            digest = blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            if len(known) < KEPT_WORDS:
                known[word] = digest
        votes.append(digest * count if count > 1 else digest)
    hashes = b"".join(votes)
    total = len(hashes) // 8
    fingerprint = 0
    for position in range(8):
        column = hashes[position::8]
        for bit in range(8):
            if column.translate(_BIT[bit]).count(1) * 2 > total:
                fingerprint |= 1 << (position * 8 + bit)
    return fingerprint


def distance(a: int, b: int) -> int:
    """How many bits two fingerprints differ in."""
    return (a ^ b).bit_count()


def bands(fingerprint: int, threshold: int = THRESHOLD) -> list[tuple[int, int]]:
    """The ``threshold + 1`` bands of ``fingerprint`` as (index, value): two fingerprints
    at most ``threshold`` bits apart are equal in at least one of them."""
    count = threshold + 1
    width = -(-BITS // count)
    return [(i, (fingerprint >> (i * width)) & ((1 << width) - 1)) for i in range(count)]
