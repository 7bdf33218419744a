"""The URLs a sitemap lists, for ``--sitemaps``: pages, and the sitemaps of an index.

Parsed by ultimate-sitemap-parser (XML sitemaps and sitemap indexes, text sitemaps,
RSS and Atom feeds), from a body the crawler fetched itself: the library's own HTTP
client is never used (its parsers are handed a client that cannot fetch, and each
sitemap an index names is reported here rather than fetched).
"""

from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawler.errors import PermanentError

if TYPE_CHECKING:
    from usp.fetch_parse import PlainTextSitemapParser, XMLSitemapParser

# The name it had before the module was renamed: users filter the log on it.
logger = logging.getLogger("crawler.links.sitemaps")

#: URLs taken from one sitemap at most: the protocol's own limit.
MAX_URLS = 50_000
#: Where a site keeps its sitemap when its robots.txt names none.
WELL_KNOWN = "/sitemap.xml"


def sitemap_links(body: bytes, url: str, max_bytes: int) -> tuple[list[str], list[str]]:
    """The page URLs and the sitemap URLs that the sitemap ``body`` (fetched from
    ``url``) lists, at most ``MAX_URLS`` of them; a gzip body is decompressed first,
    to ``max_bytes`` at most (more is a :class:`PermanentError`)."""
    # Imported here: a process that reads no sitemap does not load the library (some
    # 25 ms of the command's and every worker's start).
    from usp.fetch_parse import PlainTextSitemapParser, XMLSitemapParser
    from usp.web_client.abstract_client import LocalWebClient

    if body[:2] == b"\x1f\x8b":
        body = gunzip(body, max_bytes)
    text = body.decode("utf-8", "replace").lstrip("\ufeff")
    sitemaps: list[str] = []

    def found_sitemap(sitemap_url: str, level: int, parents: set[str]) -> bool:
        sitemaps.append(sitemap_url)
        return False  # a message of its own will fetch it

    client = LocalWebClient()
    if text[:20].strip().startswith("<"):
        parser: XMLSitemapParser | PlainTextSitemapParser = XMLSitemapParser(
            url=url,
            content=text,
            recursion_level=0,
            web_client=client,
            parent_urls=set(),
            recurse_callback=found_sitemap,
        )
    else:
        parser = PlainTextSitemapParser(
            url=url, content=text, recursion_level=0, web_client=client, parent_urls=set()
        )
    pages = [page.url for page in parser.sitemap().all_pages()]
    if len(pages) + len(sitemaps) > MAX_URLS:
        logger.warning(
            "Taking only the first %d of the %d URLs of sitemap %r.",
            MAX_URLS,
            len(pages) + len(sitemaps),
            url,
        )
        sitemaps = sitemaps[:MAX_URLS]
        pages = pages[: MAX_URLS - len(sitemaps)]
    return pages, sitemaps


def gunzip(body: bytes, max_bytes: int) -> bytes:
    """``body`` decompressed (every gzip member of it), refused past ``max_bytes``."""
    out = bytearray()
    while body:
        decompressor = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
        try:
            out += decompressor.decompress(body, max_bytes + 1 - len(out))
        except zlib.error as e:
            raise PermanentError(f"a gzip sitemap that cannot be read: {e}") from e
        if len(out) > max_bytes:
            raise PermanentError(f"a gzip sitemap over {max_bytes} bytes once decompressed")
        body = decompressor.unused_data
        if not body.strip(b"\0"):  # padding after the last member, as gzip(1) allows
            break
    return bytes(out)


def well_known(robots_url: str) -> str:
    """The sitemap a site is asked for when its robots.txt names none."""
    parts = urlsplit(robots_url)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}"
