"""A page handler that downloads documents (``--files DIR``): for each page, an item with
its title and the PDFs it links to, as Scrapy's ``file_urls``; and each ZIP archive the
page links to as an item of its own (``crawler.File``).  In one process::

    crawler crawl https://example.com/ --handler examples.documents:documents \\
        --files downloads -o documents.jsonl

Each file is downloaded once a crawl, however many pages link to it, into
``downloads/full/`` named by the SHA-256 of its bytes; each item is written once its
files are, each in its ``files`` list with ``path`` (under ``downloads``), ``digest``,
``type``, ``size`` and ``status`` (``downloaded``, or why not: ``failed: HTTP 404``).
With workers, ``downloads`` is under their ``CRAWLER_FILES_DIR``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawler import File, Page


def documents(page: Page) -> Iterator[dict[str, Any] | File]:
    hrefs = [a.attributes.get("href") or "" for a in page.tree.css("a[href]")]
    pdfs = [page.urljoin(href) for href in hrefs if href.lower().endswith(".pdf")]
    if pdfs:
        title = page.tree.css_first("title")
        yield {
            "page": page.url,
            "title": title.text().strip() if title else None,
            "file_urls": pdfs,
        }
    for href in hrefs:
        if href.lower().endswith(".zip"):
            yield File(page.urljoin(href), data={"page": page.url, "kind": "archive"})
