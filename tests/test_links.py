"""From an ``href``'s raw bytes to the URL that is claimed and fetched."""

from __future__ import annotations

import pytest

from crawler.links import clean_anchor


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
