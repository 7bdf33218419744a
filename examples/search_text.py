"""A page handler: a page's visible text, for a search index.

Workers load it, and a crawl chooses it::

    crawler worker --handler examples.search_text:page_text
    crawler crawl --workers https://example.com/ --handler examples.search_text:page_text \\
        --wait --records index.jsonl

Each page's record then has ``"data": {"title": ..., "language": ..., "text": ..., "words":
...}``: the text of its ``<body>`` without scripts, styles and templates, white space
collapsed, cut at ``MAX_CHARACTERS``.
"""

from __future__ import annotations

from typing import Any

from crawler.handlers import Page

#: Text kept per page at most.
MAX_CHARACTERS = 100_000
#: Elements whose text nobody reads.
HIDDEN = ["script", "style", "noscript", "template"]


def page_text(page: Page) -> dict[str, Any]:
    tree = page.tree  # the handler runs after the links were taken: it may change the tree
    tree.strip_tags(HIDDEN)
    title = tree.css_first("title")
    html = tree.css_first("html")
    body = tree.body
    text = " ".join((body.text(separator=" ") if body is not None else "").split())
    return {
        "title": " ".join(title.text().split()) if title is not None else None,
        "language": html.attributes.get("lang") if html is not None else None,
        "text": text[:MAX_CHARACTERS],
        "words": len(text.split()),
    }
