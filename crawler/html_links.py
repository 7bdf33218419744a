"""``--follow-relative``: links found by a real HTML tokenizer, resolved against the page."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin

from crawler.links import clean_href


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
    order, entities decoded, relative ones resolved against ``<base href>`` or the page."""
    parser = _AnchorParser()
    # Bytes that are not UTF-8 survive as surrogates and are percent-encoded by clean_href.
    parser.feed(body.decode("utf-8", "surrogateescape"))
    parser.close()
    base = urljoin(page_url, parser.base.strip()) if parser.base else page_url
    links = []
    for href in parser.hrefs:
        links.append(urljoin(base, clean_href(href)))
    return links
