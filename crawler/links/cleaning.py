"""Turning the bytes of an ``href`` into a URL that one page has one name for."""

from __future__ import annotations

import html
import re
import string
from functools import lru_cache
from urllib.parse import quote

#: Printable ASCII stays as written; anything else (spaces, controls, non-ASCII
#: bytes) is percent-encoded, as a browser does before it sends a request.
_KEEP = string.punctuation


#: What the URL Standard removes from anywhere in a URL before parsing it.
_TAB_AND_NEWLINE = str.maketrans("", "", "\t\n\r")
#: What the URL Standard strips from either end of a URL.
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
#: URLs whose cleaning is remembered; a site's menus link every page to the same few.
CACHE_SIZE = 1024
#: An href that cleaning leaves as it is: printable ASCII with no space, no entity
#: (``&``) and no fragment (``#``), which most hrefs are.
_PLAIN_HREF = re.compile(rb"[!\x22$%'-~]*")


@lru_cache(maxsize=CACHE_SIZE)
def clean_anchor(raw: bytes) -> str:
    """The URL an ``href`` attribute's raw bytes point at, without its fragment.

    Entities such as ``&amp;`` are decoded, bytes that are not valid UTF-8 are
    percent-encoded instead of aborting the page, and ``#fragment`` is dropped
    so ``a.html#x`` and ``a.html`` are one page.
    """
    if _PLAIN_HREF.fullmatch(raw):
        return raw.decode("ascii")
    return clean_href(html.unescape(raw.decode("utf-8", "surrogateescape")))


def clean_href(text: str, encoding: str = "utf-8") -> str:
    """An ``href`` whose entities are decoded already, percent-encoded, without fragment;
    a host name that is not ASCII is percent-encoded, for the URL parser to map it by
    IDNA (``bücher.de`` -> ``xn--bcher-kva.de``).

    The path is UTF-8 encoded; the query in the page's ``encoding``, as browsers send it
    (a character that encoding lacks becomes ``&#N;``, as browsers write it).
    """
    if text.isascii() and text.isprintable() and " " not in text:
        return text.partition("#")[0]  # most hrefs: nothing to encode; no fragment is sent
    # As the URL Standard reads it: no C0 control or space around it, no tab or newline in it.
    text = text.strip(_C0_AND_SPACE).translate(_TAB_AND_NEWLINE).partition("#")[0]
    path, question, query = text.partition("?")
    url = quote(path.encode("utf-8", "surrogateescape"), safe=_KEEP)
    if question:
        url += question + _quoted_query(query, encoding)
    return url


def _quoted_query(query: str, encoding: str) -> str:
    """A query percent-encoded from the page's ``encoding``; a character that encoding
    lacks is sent as its percent-encoded ``&#N;``, and UTF-16/32 pages' in UTF-8, as
    browsers do."""
    if query.isascii() or encoding.startswith(("utf-8", "utf-16", "utf-32")):
        return quote(query.encode("utf-8", "surrogateescape"), safe=_KEEP)
    parts = []
    for character in query:
        try:
            parts.append(quote(character.encode(encoding, "surrogateescape"), safe=_KEEP))
        except UnicodeEncodeError:
            parts.append(quote(f"&#{ord(character)};", safe=""))
    return "".join(parts)
