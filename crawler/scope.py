"""Which of a page's links a crawl follows: canonical, in its domains, within its depth."""

from __future__ import annotations

from typing import Any

from crawler.canonical import canonical_url
from crawler.options import CrawlOptions


def links_to_follow(anchors: list[str], options: CrawlOptions, depth: int) -> list[str]:
    """The canonical, distinct ``anchors`` that ``options`` allow one hop below ``depth``."""
    if options.max_depth is not None and depth + 1 > options.max_depth:
        return []
    links = dict.fromkeys(canonical_url(anchor) for anchor in anchors)
    return [link for link in links if options.allows_url(link)]


def child_arguments(depth: int, options: dict[str, Any] | None, via_public: bool) -> dict[str, Any]:
    """The keyword arguments of a link's message: its depth, the crawl's options, and
    whether the page it was found on was public (for the network guard)."""
    kwargs: dict[str, Any] = {"depth": depth + 1}
    if options:
        kwargs["options"] = options
    if via_public:
        kwargs["via_public"] = True
    return kwargs
