"""``--follow-relative``: links found by a real HTML parser, resolved against the page.

The parser is Lexbor (through selectolax), a C implementation of the WHATWG HTML
parsing algorithm: it finds what a browser finds, in under a millisecond on a real
page (the Python docs' pages average 93 KiB and 310 links each).
"""

from __future__ import annotations

import codecs
import logging
import re
from collections.abc import Iterable
from contextlib import suppress
from functools import lru_cache

import ada_url
import webencodings
from selectolax.lexbor import LexborHTMLParser

from crawler.links.cleaning import clean_href

logger = logging.getLogger(__name__)

#: A ``charset`` in a ``Content-Type`` header, and in a ``<meta>`` tag.
_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE
)
#: How far into a page a browser looks for its ``<meta charset>`` (the HTML standard's
#: prescan reads 1024 bytes).
PRESCAN_BYTES = 1024
#: Byte-order marks, which decide a page's encoding before anything else.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: Encodings of the standard that Python cannot decode with, and what the crawler reads
#: instead: ``x-user-defined`` maps bytes 0x80-0xFF to private use characters, which no
#: link holds; ``replacement`` stands for encodings browsers refuse to decode.
_INSTEAD = {"x-user-defined": "cp1252", "replacement": "utf-8"}


def _percent_escape(error: UnicodeError) -> tuple[str, int]:
    """Bytes that are not text in the page's encoding, written as ``%XX``: what they
    become in a URL, and plain text for the parser to carry through."""
    assert isinstance(error, UnicodeDecodeError)
    bad = error.object[error.start : error.end]
    return "".join(f"%{byte:02X}" for byte in bad), error.end


codecs.register_error("crawler-percent-escape", _percent_escape)


def page_encoding(body: bytes, content_type: str | None = None) -> str:
    """The page's encoding as a browser picks it (the HTML standard's sniffing): a
    byte-order mark, else the ``Content-Type`` header's ``charset``, else a ``<meta>``
    charset within the first 1024 bytes (UTF-16 there reads as UTF-8), else UTF-8 (the
    crawler's default, where browsers guess by locale).  Labels are read by the WHATWG
    Encoding Standard's table (``latin1`` and ``ascii`` are windows-1252); one it does
    not know counts as absent.  Returns a Python codec name."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    declared = _CHARSET.search(content_type or "")
    encoding = _standard(declared.group(1)) if declared else None
    if encoding is None:
        meta = _META_CHARSET.search(body[:PRESCAN_BYTES])
        encoding = _standard(meta.group(1).decode("ascii")) if meta else None
        if encoding is not None and encoding.startswith("utf-16"):
            encoding = "utf-8"  # a page that can say so in ASCII is not UTF-16
    return encoding or "utf-8"


def _standard(label: str) -> str | None:
    """The Python codec of an encoding label, as the WHATWG Encoding Standard reads it."""
    encoding = webencodings.lookup(label)
    if encoding is None:
        return None
    name: str = encoding.codec_info.name
    return _INSTEAD.get(encoding.name, name)


def decoded(body: bytes, content_type: str | None = None) -> str:
    """The page's text, decoded as :func:`html_links` decodes it."""
    return body.decode(page_encoding(body, content_type), "crawler-percent-escape")


def html_links(
    body: bytes,
    page_url: str,
    content_type: str | None = None,
    tree: LexborHTMLParser | None = None,
) -> list[str]:
    """Every ``<a href>`` of ``body`` as an absolute URL: any quoting, case and attribute
    order, entities decoded, relative ones resolved against ``<base href>`` or the page.

    The page is decoded in its declared encoding (:func:`page_encoding`), so a latin-1
    page's ``é`` is the character ``é``, sent UTF-8 encoded in the path and in the
    page's encoding in the query, as browsers do.  Bytes that do not decode are
    percent-encoded as they are.  Resolving never fails the page: a malformed ``<base
    href>`` is ignored, as browsers do, and a malformed link is kept for
    :func:`crawler.frontier.scope.links_to_follow` to drop with its reason, like any
    other link that cannot be parsed.  ``tree``: the page parsed already (a page
    handler's :attr:`crawler.handlers.Page.tree`), not parsed again.
    """
    encoding = page_encoding(body, content_type)
    if tree is None:
        tree = LexborHTMLParser(body.decode(encoding, "crawler-percent-escape"))
    return selected_links(tree, page_url, "a[href]", encoding)


def selected_links(
    tree: LexborHTMLParser, page_url: str, selector: str, encoding: str = "utf-8"
) -> list[str]:
    """The ``href`` of each element of ``tree`` that the CSS ``selector`` matches (one
    without an ``href`` skipped), resolved as :func:`html_links` resolves a page's
    links: against ``<base href>`` or ``page_url``, by the WHATWG URL Standard, the
    query in the page's ``encoding``.  Raises selectolax's ``SelectolaxError`` for a
    selector it cannot parse."""
    base = page_base(tree, page_url)
    hrefs = (node.attributes.get("href") for node in tree.css(selector))
    return [_resolve(base, clean_href(href, encoding)) for href in hrefs if href is not None]


def page_base(tree: LexborHTMLParser, page_url: str) -> str:
    """What a page's links are resolved against: its ``<base href>``, resolved against
    ``page_url``, or ``page_url`` (a ``<base href>`` the standard refuses is ignored,
    as browsers do)."""
    base_tag = tree.css_first("base[href]")
    if base_tag is not None:
        with suppress(ValueError):
            joined: str = ada_url.join_url(
                page_url, clean_href(base_tag.attributes.get("href") or "")
            )
            return joined
    return page_url


def resolved(base: str, href: str, encoding: str | None = None) -> str:
    """``href`` resolved against ``base`` as a page's links are (the WHATWG URL
    Standard); with ``encoding``, cleaned first as an ``href`` of a page in that
    encoding is (:func:`crawler.links.cleaning.clean_href`).  Never raises: an ``href``
    the standard refuses is returned absolute, for the scope to drop and count."""
    return _resolve(base, href if encoding is None else clean_href(href, encoding))


def _resolve(base: str, href: str) -> str:
    """``urljoin(base, href)``, remembered per directory: an href that is not empty
    and starts with neither ``?`` nor ``#`` resolves the same against any page of the
    base's directory, and a site's pages share their menus' links."""
    if not href:  # "#section" (its fragment gone): the page itself, most often
        return base.partition("#")[0]
    if href[0] in "?#":
        return _join(base, href)
    address = base.partition("#")[0].partition("?")[0]
    if address.count("/") < 3:  # no path: "http://host"
        return _join(base, href)
    return _join_in_directory(address.rpartition("/")[0] + "/", href)


#: Links resolved per directory that are remembered, across pages.
RESOLVED_CACHE = 8192


@lru_cache(maxsize=RESOLVED_CACHE)
def _join_in_directory(directory: str, href: str) -> str:
    return _join(directory, href)


def _join(base: str, href: str) -> str:
    """``href`` resolved against ``base`` by the WHATWG URL Standard.  An ``href`` the
    standard refuses (a malformed authority: ``//[::1``) is returned absolute, as RFC
    3986 5.2.2 would resolve it (a network-path one gets the base's scheme), with its
    scheme lower-cased, for the scope's check to drop it as malformed and count it."""
    try:
        joined: str = ada_url.join_url(base, href)
    except ValueError:
        if href.startswith("//"):
            href = base.partition(":")[0] + ":" + href
        scheme, colon, rest = href.partition(":")
        return scheme.lower() + colon + rest
    return joined


def absolute_links(found: Iterable[str], most: int, page_url: str) -> list[str]:
    """The absolute http(s) links of ``found``, the first ``most`` of them (a warning
    says so when ``page_url`` has more)."""
    anchors: list[str] = []
    for anchor in found:
        if anchor.startswith("http://") or anchor.startswith("https://"):
            anchors.append(anchor)
            if len(anchors) == most:
                logger.warning("Taking only the first %d links of %r.", len(anchors), page_url)
                break
    return anchors
