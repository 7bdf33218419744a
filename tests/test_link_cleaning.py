"""From an ``href``'s raw bytes to the URL that is claimed and fetched."""

from __future__ import annotations

import html
import random

import pytest

from crawler.links.cleaning import clean_anchor, clean_href


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        (b"http://h/a.html", "http://h/a.html"),
        (b"http://h/a.html#part", "http://h/a.html"),
        (b"http://h/q?a=1&amp;b=2", "http://h/q?a=1&b=2"),
        (b"http://h/caf\xe9.html", "http://h/caf%E9.html"),
        (b"http://h/caf\xc3\xa9.html", "http://h/caf%C3%A9.html"),
        (b"http://h/a%20b.html", "http://h/a%20b.html"),
        (b" http://h/spaced name.html ", "http://h/spaced%20name.html"),
        (b"http://h/&#x41;.html", "http://h/A.html"),
    ],
)
def test_clean_anchor(raw: bytes, url: str) -> None:
    assert clean_anchor(raw) == url


def test_the_fast_path_for_plain_hrefs_cleans_as_the_full_one() -> None:
    rng = random.Random(7)
    pieces = [b"http://", b"h.example", b"/", b"a", b"Z", b"%41", b"%", b"&amp;", b"&", b"#f",
              b"?", b"=", b" ", b"\t", b"\xe9", b"\xc3\xa9", b"'", b'"', b"~", b":", b"@",
              b"\x7f"]  # fmt: skip
    for _ in range(5000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 9)))
        expected = clean_href(html.unescape(raw.decode("utf-8", "surrogateescape")))
        assert clean_anchor.__wrapped__(raw) == expected, raw
