"""Which of a page's links a crawl follows: canonical, in its domains, within its depth.

Links are parsed one by one: a link that cannot be parsed is dropped with its
reason, never allowed to fail the page it was found on and so lose its good links.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from crawler import metrics
from crawler.errors import shown
from crawler.links.canonical import canonical_url
from crawler.options import CrawlOptions

logger = logging.getLogger("example")

#: Dropped links named in a page's warning; the rest are counted.
DROPPED_SHOWN = 5


class Dropped(NamedTuple):
    """A link of a page that could not be parsed, and why, in ``ValueError``'s words."""

    link: str
    reason: str


def links_to_follow(
    anchors: list[str], options: CrawlOptions, depth: int
) -> tuple[list[str], list[Dropped]]:
    """The canonical, distinct ``anchors`` that ``options`` allow one hop below ``depth``,
    and the distinct anchors dropped because they could not be parsed, in page order.

    Past ``--max-depth`` nothing is followed, so nothing is parsed and none is dropped.
    """
    if options.max_depth is not None and depth + 1 > options.max_depth:
        return [], []
    links: dict[str, None] = {}
    dropped: dict[str, str] = {}
    for anchor in anchors:
        try:
            link = canonical_url(anchor)
        except ValueError as e:  # UnicodeError included
            dropped.setdefault(anchor, str(e) or type(e).__name__)
            continue
        if link not in links and options.allows_url(link):
            links[link] = None
    return list(links), [Dropped(link, reason) for link, reason in dropped.items()]


def report_dropped(page_url: str, dropped: list[Dropped]) -> int:
    """Log one warning line for the links dropped from ``page_url``, count them in
    ``crawler_links_dropped_total``, and return how many there were."""
    if not dropped:
        return 0
    metrics.links_dropped(len(dropped))
    named = ", ".join(f"{shown(link)!r} ({reason})" for link, reason in dropped[:DROPPED_SHOWN])
    more = len(dropped) - DROPPED_SHOWN
    logger.warning(
        "Dropped %d malformed link(s) on %r: %s%s.",
        len(dropped),
        page_url,
        named,
        f", and {more} more" if more > 0 else "",
    )
    return len(dropped)


def child_arguments(depth: int, options: dict[str, Any] | None, via_public: bool) -> dict[str, Any]:
    """The keyword arguments of a link's message: its depth, the crawl's options, and
    whether the page it was found on was public (for the network guard)."""
    kwargs: dict[str, Any] = {"depth": depth + 1}
    if options:
        kwargs["options"] = options
    if via_public:
        kwargs["via_public"] = True
    return kwargs
