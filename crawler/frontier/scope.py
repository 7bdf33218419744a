"""Which of a page's links a crawl follows: canonical, in its domains, within its depth.

Links are parsed one by one: a link that cannot be parsed is dropped with its
reason, never allowed to fail the page it was found on and so lose its good links.
"""

from __future__ import annotations

import hashlib
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
    origin: str = "",
) -> tuple[list[str], dict[str, dict[str, Any]], list[Dropped]]:
    """:func:`links_to_follow` of a page's ``anchors`` and its handler's ``requests``;
    besides, the arguments of their own that the followed entries carry in their
    messages (``label``, ``data``, ``request``), by entry.

    An entry is a canonical URL, or for a request that is not a plain GET (a method, a
    body, a ``unique_key``, ``always``: :attr:`~crawler.handlers.Request.keyed`) its
    :func:`request_name`, claimed apart from the URL's plain GET; ``origin`` (the id of
    the message the page came from) makes an ``always`` request's key, the same each
    time that message is redone.

    A page's anchors carry none.  A URL both an anchor and a request name goes with the
    request's label and data (its first request's, when several name it): the handler
    asked for it so.  ``labels`` (a :class:`~crawler.handlers.Router`'s
    :meth:`~crawler.handlers.Router.link_label`) labels by its canonical URL every
    followed link that no request labelled, anchors and requests alike, a request's
    data kept.  Which message crawls a URL is still the crawl's first claim of it
    (:mod:`crawler.frontier.claims`): a URL claimed before, plainly or with other data,
    is not fetched again for its request's sake.
    """
    plain = [request for request in requests if not request.keyed]
    found = [*anchors, *(request.url for request in plain)]
    follow, dropped = links_to_follow(found, options, depth)
    followed = set(follow)
    own: dict[str, dict[str, Any]] = {}
    for request in plain:
        if request.label is None and request.data is None and not request.headers:
            continue
        try:
            link = canonical_url(request.url)
        except ValueError:  # dropped above, with its reason
            continue
        if link in followed and link not in own:
            own[link] = carried(request)
    keyed = [request for request in requests if request.keyed]
    if keyed and (options.max_depth is None or depth + 1 <= options.max_depth):
        follow += _keyed_to_follow(keyed, options, origin, own, dropped)
    if labels is not None:
        for entry in follow:
            label = None if "label" in own.get(entry, {}) else labels(url_in(entry))
            if label is not None:
                own[entry] = {"label": label, **own.get(entry, {})}
    return follow, own, dropped


def _keyed_to_follow(
    keyed: list[Request],
    options: CrawlOptions,
    origin: str,
    own: dict[str, dict[str, Any]],
    dropped: list[Dropped],
) -> list[str]:
    """The entries (:func:`request_name`) of the keyed requests the crawl's scope allows,
    each once, their arguments put in ``own``; those that cannot be parsed added to
    ``dropped``."""
    follow: list[str] = []
    asked: dict[str, int] = {}
    for request in keyed:
        try:
            link = canonical_url(request.url)
        except ValueError as e:
            dropped.append(Dropped(request.url, str(e) or type(e).__name__))
            continue
        if not options.allows_url(link):
            continue
        nth = asked[link] = asked.get(link, -1) + 1
        key = request_key(request, link, origin, nth)
        name = request_name(link, key)
        if name not in own:
            follow.append(name)
            own[name] = carried(request, key)
    return follow


def carried(request: Request, key: str | None = None) -> dict[str, Any]:
    """What a checked request's message carries besides the crawl's: its ``label`` and
    ``data``, and how to ask for it (``request``: method, headers, body, ``key``)."""
    asked = request.arguments()
    if key is not None:
        asked["key"] = key
    given = {"label": request.label, "data": request.data, "request": asked or None}
    return {name: value for name, value in given.items() if value is not None}


#: Marks the claim of a handler's request that is not a plain GET: claimed apart from
#: its URL's (:func:`request_name`).
REQUEST_MARK = "request "


def request_key(request: Request, link: str, origin: str, nth: int = 0) -> str:
    """What a keyed request (of canonical URL ``link``) is deduplicated by besides its
    URL: ``always:`` and a digest of the message it came from and its place among that
    page's ``always`` requests of the URL (``nth``), the same when the page is redone;
    else ``key:`` and its ``unique_key``; else its method and a digest of its body."""
    if request.always:
        return "always:" + _digest(f"{origin} {nth} {link}".encode())
    if request.unique_key is not None:
        return "key:" + request.unique_key
    body = request.body if isinstance(request.body, bytes) else b""
    return f"{request.method}:" + _digest(body)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def request_name(link: str, key: str | None) -> str:
    """What the message of a request for ``link`` claims: the URL, or with a ``key``
    (:func:`request_key`) the request's own name."""
    return link if key is None else f"{REQUEST_MARK}{link} {key}"


def url_in(entry: str) -> str:
    """The URL of a link to follow: the link, or the URL of a :func:`request_name`."""
    if entry.startswith(REQUEST_MARK):
        return entry[len(REQUEST_MARK) :].partition(" ")[0]
    return entry


#: How deep sitemaps nest at most: robots.txt (1), the sitemap index it names (2), its
#: sitemaps (3), and one more for a nested index (which the protocol forbids).
MAX_SITEMAP_LEVEL = 4
#: What a sitemap lists, as a part of a long one carries it (``listed``).
KINDS = ("pages", "sitemaps")
#: The actor of a crawl's sitemap messages (``--sitemaps``), on the ``crawl`` actor's queue.
SITEMAP_ACTOR = "crawl_sitemap"
#: The newest format of the messages this crawler sends and reads, in their ``format``
#: option: a ``crawl`` message carrying how a handler's request asks for its page
#: (``request``: its method, headers, body, key) or the version of the crawl's shared
#: cookies it was sent with (``jar``).  Format 3: one carrying a handler's ``label`` or
#: ``data`` alone (:class:`crawler.handlers.Request`).  A message without one is of
#: format 1 (upstream's, and this crawler's before sitemaps had an actor of their own,
#: when a ``crawl`` message carried ``sitemap`` and ``listed``).
FORMAT = 4
#: The format of a ``crawl`` message carrying a request's ``label`` or ``data`` alone.
LABELLED_FORMAT = 3
#: The format of every other message: a worker of the release before (which reads 1
#: and 2) still takes them during an upgrade, and refuses only the messages of format
#: 3, in one line, as invalid (``--replay`` sends them again once it is upgraded).
PLAIN_FORMAT = 2
#: The ``crawl`` arguments a :class:`crawler.handlers.Request` adds to its URL's message.
REQUEST_ARGUMENTS = ("label", "data")
#: The ``crawl`` arguments of format 4: how a request asks, and the cookies' version.
ASKING_ARGUMENTS = ("request", "jar")


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
    depth: int,
    options: dict[str, Any] | None,
    via_public: bool,
    *,
    sitemap: int = 0,
    jar: int = 0,
) -> dict[str, Any]:
    """The keyword arguments of a link's message: its depth, the crawl's options,
    whether the page it was found on was public (for the network guard), and, for a
    sitemap to read (``--sitemaps``), how deep it is nested (robots.txt is 1); the
    version of the crawl's shared cookies the page knew (``jar``: 0, none), so that
    the worker that fetches the link sends them
    (:mod:`crawler.fetching.shared_cookies`)."""
    kwargs: dict[str, Any] = {"depth": depth + 1}
    if options:
        kwargs["options"] = options
    if via_public:
        kwargs["via_public"] = True
    if sitemap:
        kwargs["sitemap"] = sitemap
    if jar:
        kwargs["jar"] = jar
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
    its ``max_retries``.  Of :data:`FORMAT` when it carries how a request asks or the
    cookies' version (:data:`ASKING_ARGUMENTS`), of :data:`LABELLED_FORMAT` when it
    carries a request's label or data alone (:data:`REQUEST_ARGUMENTS`), else of
    :data:`PLAIN_FORMAT`, which workers of the releases before read too."""
    if any(name in kwargs for name in ASKING_ARGUMENTS):
        version = FORMAT
    elif any(name in kwargs for name in REQUEST_ARGUMENTS):
        version = LABELLED_FORMAT
    else:
        version = PLAIN_FORMAT
    options: dict[str, Any] = {"format": version}
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
