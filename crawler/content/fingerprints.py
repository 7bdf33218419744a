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

The words are the text's whitespace-separated tokens, in lower case (a word and the
comma after it are one feature: ``str.split`` finds them in a third of the time a
pattern of word characters took), each occurrence one vote of weight 1 (a word's weight
is how often it appears).  The votes of all 64 bits are counted at once: each word's
hash is spread into one integer of 64 lanes of :data:`LANE` bits, bit ``i`` of the hash
the lowest bit of lane ``i``; the sum of those integers over the text's words holds in
each lane the weight that voted for that bit (Python's integers add in C, and
``sum(map(...))`` of a dict's lookups runs without a line of Python a word).  A word's
spread hash is kept once made (:data:`KEPT_WORDS` of them, by :class:`_Spreads`): the
pages of a site share most of their words.
"""

from __future__ import annotations

import hashlib

#: Pages whose fingerprints differ in at most this many bits are near-duplicates.
#: Manku et al. found 3 of 64 right for billions of long web pages; pages of a few
#: hundred words that differ in a date line drift up to 5 bits apart (tests/
#: test_clean_text.py), so 4, each page's line in 5 bands of 13 bits: two pages with
#: nothing in common come within 4 bits once in 2.5 * 10^13 pairs.
THRESHOLD = 4
#: Bits of a fingerprint.
BITS = 64
#: Words whose spread hashes a process keeps (some 25 MB at most), then makes each time.
KEPT_WORDS = 100_000
#: The bits of a lane: the weight a bit gets (at most the text's words: 65,535 for a
#: page of some 400 KB of text) is below ``2 ** LANE`` (a text with more has lanes of
#: its own).  Narrow lanes make small integers: 24 bits took a sixth longer in a crawl.
LANE = 16


def _byte_lanes(lane: int) -> list[list[int]]:
    """For each byte of a hash, for each value of it: its 8 bits spread into their 8
    lanes of ``lane`` bits (bit ``b`` of byte ``p`` into lane ``8 * p + b``)."""
    bits = range(8)
    values = [sum(1 << (lane * bit) for bit in bits if value >> bit & 1) for value in range(256)]
    return [[spread << (lane * 8 * position) for spread in values] for position in range(8)]


def _spread(word: str, byte_lanes: list[list[int]]) -> int:
    """``word``'s 64-bit hash (BLAKE2b), bit ``i`` the lowest of lane ``i``."""
    digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return sum(map(list.__getitem__, byte_lanes, digest))


class _Spreads(dict[str, int]):
    """Words' spread hashes in lanes of ``lane`` bits (:func:`_spread`), each made on
    first use and kept while fewer than ``keep`` are."""

    def __init__(self, lane: int, keep: int) -> None:
        super().__init__()
        self.byte_lanes, self.keep = _byte_lanes(lane), keep

    def __missing__(self, word: str) -> int:
        spread = _spread(word, self.byte_lanes)
        if len(self) < self.keep:
            self[word] = spread
        return spread


_SPREAD = _Spreads(LANE, KEPT_WORDS)


def simhash(text: str) -> int:
    """The 64-bit SimHash of ``text``'s words (lower case); 0 for a text without any."""
    words = text.lower().split()
    total = len(words)
    if not total:
        return 0
    spreads, lane = _SPREAD, LANE
    if total >> lane:  # more words than a lane holds: wider lanes, made for this text
        lane = total.bit_length() + 1
        spreads = _Spreads(lane, len(words))
    votes = sum(map(spreads.__getitem__, words))
    mask = (1 << lane) - 1
    fingerprint = 0
    for bit in range(BITS):
        if (votes >> (lane * bit) & mask) * 2 > total:
            fingerprint |= 1 << bit
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
