"""Which of a page's links a crawl follows: canonical, in its domains, within its depth.

Links are parsed one by one: a link that cannot be parsed is dropped with its
reason, never allowed to fail the page it was found on and so lose its good links.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import dramatiq
from dramatiq.message import generate_unique_id

from crawler import metrics
from crawler.brokers.rabbitmq import MAX_PRIORITY
from crawler.errors import shown
from crawler.handlers import Request
from crawler.links.canonical import canonical_url
from crawler.links.sites import site_of
from crawler.options import CrawlOptions

logger = logging.getLogger(__name__)

#: Dropped links named in a page's warning; the rest are counted.
DROPPED_SHOWN = 5


class Dropped(NamedTuple):
    """A link of a page that could not be parsed, and why, in ``ValueError``'s words."""

    link: str
    reason: str


def links_to_follow(
    anchors: list[str],
    options: CrawlOptions,
    depth: int,
    allows: Callable[[str], bool] | None = None,
) -> tuple[list[str], list[Dropped]]:
    """The canonical, distinct ``anchors`` that ``options`` allow one hop below ``depth``
    (or that ``allows``, when given), and the distinct anchors dropped because they
    could not be parsed, in page order.

    Past ``--max-depth`` nothing is followed, so nothing is parsed and none is dropped.
    """
    allows = allows or options.allows_url
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
        if link not in links and allows(link):
            links[link] = None
    return list(links), [Dropped(link, reason) for link, reason in dropped.items()]


def page_links_to_follow(
    anchors: list[str],
    requests: list[Request],
    options: CrawlOptions,
    depth: int,
    labels: Callable[[str], str | None] | None = None,
) -> tuple[list[str], dict[str, dict[str, Any]], list[Dropped]]:
    """:func:`links_to_follow` of a page's ``anchors`` and its handler's ``requests``;
    besides, the arguments of their own that the followed URLs a request labelled
    carry in their messages (``label``, ``data``), by URL.

    A page's anchors carry none.  A URL both an anchor and a request name goes with the
    request's label and data (its first request's, when several name it): the handler
    asked for it so.  ``labels`` (a :class:`~crawler.handlers.Router`'s
    :meth:`~crawler.handlers.Router.link_label`) labels by its canonical URL every
    followed link that no request labelled, anchors and requests alike, a request's
    data kept.  Which message crawls a URL is still the crawl's first claim of it
    (:mod:`crawler.frontier.claims`): a URL claimed before, plainly or with other data,
    is not fetched again for its request's sake.
    """
    found = [*anchors, *(request.url for request in requests)]
    follow, dropped = links_to_follow(found, options, depth)
    followed = set(follow)
    own: dict[str, dict[str, Any]] = {}
    for request in requests:
        if request.label is None and request.data is None:
            continue
        try:
            link = canonical_url(request.url)
        except ValueError:  # dropped above, with its reason
            continue
        if link in followed and link not in own:
            carried = {"label": request.label, "data": request.data}
            own[link] = {name: value for name, value in carried.items() if value is not None}
    if labels is not None:
        for link in follow:
            label = None if "label" in own.get(link, {}) else labels(link)
            if label is not None:
                own[link] = {"label": label, **own.get(link, {})}
    return follow, own, dropped


#: How deep sitemaps nest at most: robots.txt (1), the sitemap index it names (2), its
#: sitemaps (3), and one more for a nested index (which the protocol forbids).
MAX_SITEMAP_LEVEL = 4
#: What a sitemap lists, as a part of a long one carries it (``listed``).
KINDS = ("pages", "sitemaps")
#: The actor of a crawl's sitemap messages (``--sitemaps``), on the ``crawl`` actor's queue.
SITEMAP_ACTOR = "crawl_sitemap"
#: The newest format of the messages this crawler sends and reads, in their ``format``
#: option: a ``crawl`` message carrying a handler's ``label`` or ``data``
#: (:class:`crawler.handlers.Request`).  A message without one is of format 1 (upstream's,
#: and this crawler's before sitemaps had an actor of their own, when a ``crawl`` message
#: carried ``sitemap`` and ``listed``).
FORMAT = 3
#: The format of every other message: a worker of the release before (which reads 1
#: and 2) still takes them during an upgrade, and refuses only the messages of format
#: 3, in one line, as invalid (``--replay`` sends them again once it is upgraded).
PLAIN_FORMAT = 2
#: The ``crawl`` arguments a :class:`crawler.handlers.Request` adds to its URL's message.
REQUEST_ARGUMENTS = ("label", "data")


def sitemap_links_to_follow(
    sitemap_url: str, pages: list[str], sitemaps: list[str], options: CrawlOptions, level: int
) -> tuple[list[str], list[str], list[Dropped]]:
    """Of what the sitemap at ``sitemap_url`` (nested ``level`` deep) lists: the pages
    in the crawl's scope, the sitemaps on its allowed hosts (``--include``/``--exclude``
    are for pages; none past ``MAX_SITEMAP_LEVEL``), and the links dropped as malformed.

    A sitemap speaks for its own site: another site's URLs are followed only when
    ``--allow-domain`` or ``--same-site`` name that site.
    """
    own_site = site_of(urlsplit(sitemap_url).hostname or "")

    def speaks_for(url: str) -> bool:
        if site_of(urlsplit(url).hostname or "") == own_site:
            return True
        return bool(options.allowed_domains or options.allowed_sites) and options.allows_host(url)

    def page(url: str) -> bool:
        return speaks_for(url) and options.allows_url(url)

    def sitemap(url: str) -> bool:
        return speaks_for(url) and options.allows_host(url)

    followed, dropped = links_to_follow(pages, options, -1, page)
    followed_maps, dropped_maps = links_to_follow(sitemaps, options, -1, sitemap)
    if followed_maps and level >= MAX_SITEMAP_LEVEL:
        logger.warning(
            "Not reading the %d sitemaps %r lists: nested too deep.", len(sitemaps), sitemap_url
        )
        followed_maps = []
    return followed, followed_maps, dropped + dropped_maps


def sitemap_parts(pages: list[str], sitemaps: list[str], size: int) -> list[dict[str, list[str]]]:
    """What a sitemap lists, in parts of ``size`` URLs at most (pages first), each by
    its kind (``KINDS``); one part, maybe empty, at least."""
    listed = [*((url, "pages") for url in pages), *((url, "sitemaps") for url in sitemaps)]
    parts = [
        {kind: [url for url, its in listed[i : i + size] if its == kind] for kind in KINDS}
        for i in range(0, len(listed), size)
    ]
    return parts or [{kind: [] for kind in KINDS}]


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


def child_arguments(
    depth: int, options: dict[str, Any] | None, via_public: bool, *, sitemap: int = 0
) -> dict[str, Any]:
    """The keyword arguments of a link's message: its depth, the crawl's options,
    whether the page it was found on was public (for the network guard), and, for a
    sitemap to read (``--sitemaps``), how deep it is nested (robots.txt is 1)."""
    kwargs: dict[str, Any] = {"depth": depth + 1}
    if options:
        kwargs["options"] = options
    if via_public:
        kwargs["via_public"] = True
    if sitemap:
        kwargs["sitemap"] = sitemap
    return kwargs


def message_of(
    crawl: dramatiq.Actor[Any, Any],
    url: str,
    kwargs: dict[str, Any],
    priority: int | None,
    *,
    sitemap: bool = False,
    message_id: str | None = None,
) -> dramatiq.Message[Any]:
    """A crawl's message for ``url``: for the ``crawl`` actor, or with ``sitemap`` for its
    sitemaps' actor (:data:`SITEMAP_ACTOR`, on the same queue); with the broker
    ``priority`` when given, and ``message_id`` when given; the crawl's ``--retries`` as
    its ``max_retries``.  Of :data:`FORMAT` when it carries a request's label or data
    (:data:`REQUEST_ARGUMENTS`), else of :data:`PLAIN_FORMAT`, which workers of the
    release before read too."""
    labelled = any(name in kwargs for name in REQUEST_ARGUMENTS)
    options: dict[str, Any] = {"format": FORMAT if labelled else PLAIN_FORMAT}
    if priority is not None:
        options["broker_priority"] = priority
    retries = (kwargs.get("options") or {}).get("retries")
    if retries is not None:  # --retries: Dramatiq's Retries reads it before the actor's
        options["max_retries"] = min(retries, crawl.options.get("max_retries", retries))
    return dramatiq.Message(
        queue_name=crawl.queue_name,
        actor_name=SITEMAP_ACTOR if sitemap else crawl.actor_name,
        args=(url,),
        kwargs=kwargs,
        options=options,
        message_id=message_id or generate_unique_id(),
    )


def priority(depth: int, options: CrawlOptions) -> int | None:
    """``--breadth-first``: a message's priority by its depth (seeds highest; depth 10
    and deeper as a message with none); None otherwise."""
    if not options.breadth_first:
        return None
    return max(0, MAX_PRIORITY - depth)
