"""A page handler: each page's title and meta description.

Workers load it, and a crawl chooses it::

    crawler worker --handler examples.titles:title_and_description
    crawler crawl --workers https://example.com/ --handler examples.titles:title_and_description \\
        --wait --records pages.jsonl

or, in one process: ``crawler crawl --local URL --handler examples.titles:title_and_description``.
Each page's record then has ``"data": {"title": ..., "description": ...}``.
"""

from __future__ import annotations

from typing import Any

from crawler.handlers import Page


def title_and_description(page: Page) -> dict[str, Any]:
    title = page.tree.css_first("title")
    description = None
    for meta in page.tree.css("meta[name]"):
        if (meta.attributes.get("name") or "").lower() == "description":
            description = " ".join((meta.attributes.get("content") or "").split())
            break
    return {
        "title": " ".join(title.text().split()) if title is not None else None,
        "description": description,
    }
