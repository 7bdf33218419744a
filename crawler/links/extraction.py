"""``--follow-relative``: links found by a real HTML tokenizer, resolved against the page."""

from __future__ import annotations

from contextlib import suppress
from html.parser import HTMLParser
from urllib.parse import urljoin

from crawler.links.cleaning import clean_href


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ("a", "base"):
            return
        href = dict(attrs).get("href")
        if href is None:
            return
        if tag == "base":
            if self.base is None:
                self.base = href
        else:
            self.hrefs.append(href)


def html_links(body: bytes, page_url: str) -> list[str]:
    """Every ``<a href>`` of ``body`` as an absolute URL: any quoting, case and attribute
    order, entities decoded, relative ones resolved against ``<base href>`` or the page.

    Resolving never fails the page: a malformed ``<base href>`` is ignored, as browsers
    do, and a malformed link is kept for :func:`crawler.frontier.scope.links_to_follow` to drop
    with its reason, like any other link that cannot be parsed.
    """
    parser = _AnchorParser()
    # Bytes that are not UTF-8 survive as surrogates and are percent-encoded by clean_href.
    parser.feed(body.decode("utf-8", "surrogateescape"))
    parser.close()
    base = page_url
    if parser.base:
        with suppress(ValueError):
            base = urljoin(page_url, parser.base.strip())
    return [_resolve(base, clean_href(href)) for href in parser.hrefs]


def _resolve(base: str, href: str) -> str:
    """``urljoin(base, href)``; for an ``href`` it cannot parse, the same join done by hand.

    urljoin fails only on a malformed authority (``//[::1``), which only an absolute
    href or a network-path one (``//host/...``) has; RFC 3986 5.2.2 resolves the first
    to itself and the second to the base's scheme followed by the href.  The scheme is
    lower-cased, as urljoin does.
    """
    try:
        return urljoin(base, href)
    except ValueError:
        if href.startswith("//"):
            href = base.partition(":")[0] + ":" + href
        scheme, colon, rest = href.partition(":")
        return scheme.lower() + colon + rest
