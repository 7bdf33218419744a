"""Turning the bytes of an ``href`` into a URL that one page has one name for."""

from __future__ import annotations

import html
import string
from urllib.parse import quote, urldefrag

#: Printable ASCII stays as written; anything else (spaces, controls, non-ASCII
#: bytes) is percent-encoded, as a browser does before it sends a request.
_KEEP = string.punctuation


def clean_anchor(raw: bytes) -> str:
    """The URL an ``href`` attribute's raw bytes point at, without its fragment.

    Entities such as ``&amp;`` are decoded, bytes that are not valid UTF-8 are
    percent-encoded instead of aborting the page, and ``#fragment`` is dropped
    so ``a.html#x`` and ``a.html`` are one page.
    """
    text = html.unescape(raw.decode("utf-8", "surrogateescape"))
    url = quote(text.strip().encode("utf-8", "surrogateescape"), safe=_KEEP)
    return without_fragment(url)


def without_fragment(url: str) -> str:
    return urldefrag(url).url
