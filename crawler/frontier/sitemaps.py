"""``--sitemaps``: read a site's sitemaps and send the pages and sitemaps they list.

Sitemaps have an actor of their own, ``crawl_sitemap`` (declared in
:mod:`crawler.example` on the ``crawl`` actor's queue), whose work is
:func:`crawl_sitemap`.  A site's robots.txt (``level`` 1) stands for the sitemaps its
``Sitemap:`` lines name, else for ``/sitemap.xml``; every sitemap it lists is a message
of its own, a level deeper, and every page a ``crawl`` message.  A sitemap's URLs are
sent from its message, as many as a page's links at most, the rest in parts, each a
message carrying its URLs (sending 50,000 at once would outlast the actor's time limit).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import dramatiq
import requests

from crawler import records
from crawler.environment import Lifetimes, Limits
from crawler.errors import PermanentError
from crawler.fetching import fetch, read_body
from crawler.fetching.network_guard import check_hop
from crawler.frontier import claims, politeness
from crawler.frontier.claims import Links
from crawler.frontier.scope import (
    child_arguments,
    priority,
    report_dropped,
    sitemap_links_to_follow,
    sitemap_parts,
)
from crawler.links.sitemap_links import sitemap_links, well_known
from crawler.options import CrawlOptions
from crawler.outcomes import DUPLICATE
from crawler.records import Record
from crawler.stores import Stores

logger = logging.getLogger(__name__)


def send_part(
    stores: Stores,
    links: Links,
    url: str,
    level: int,
    listed: dict[str, list[str]],
    options: dict[str, Any] | None,
    via_public: bool,
) -> Record:
    """Send on a part of a long sitemap's URLs, which its message carries."""
    sent = send_listed(stores, links, level, listed, options, via_public)
    return records.sitemap_record(url, listed["pages"], listed["sitemaps"], level, sent, 0)


def crawl_sitemap(
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    session_of: Callable[[CrawlOptions], requests.Session],
    url: str,
    level: int,
    listed: dict[str, list[str]] | None,
    options: dict[str, Any] | None,
    via_public: bool,
    *,
    limits: Limits,
    lifetimes: Lifetimes,
) -> Record:
    """What the sitemaps' actor does with its message, of the crawl whose ``crawl`` actor is
    ``crawl``: claim the sitemap (its claim apart from a page's of the same URL), then
    send on the part of a long sitemap's URLs it carries (``listed``), or take the host's
    turn (deferred when it has none) and read it (:func:`read_sitemap`)."""
    crawl_options = CrawlOptions.from_message(options)
    message = claims.current_message(crawl, url)
    skipped, links = claims.take_url(
        stores, crawl, message, url, crawl_options, limits, lifetimes, sitemap=level
    )
    if skipped == DUPLICATE:
        logger.warning("URL %r has already been visited. Skipping...", url)
    if skipped is not None:  # a duplicate, cancelled or paused (put back a while)
        return records.skipped_record(url, skipped)
    if listed is not None:  # a part of a long sitemap's URLs, to send on
        return send_part(stores, links, url, level, listed, options, via_public)
    session = session_of(crawl_options)
    slot, skipped = claims.turn_or_defer(
        stores, crawl.broker, message, session, url, crawl_options, limits,
        via_public=via_public, unsent=links.unsent,
    )  # fmt: skip
    if slot is None:  # disallowed, or deferred (sent again a while later)
        return records.skipped_record(url, str(skipped))
    return read_sitemap(
        stores, links, session, url, level, slot, options, limits=limits, via_public=via_public
    )


def read_sitemap(
    stores: Stores,
    links: Links,
    session: requests.Session,
    url: str,
    level: int,
    slot: AbstractContextManager[Any],
    options: dict[str, Any] | None,
    limits: Limits,
    *,
    via_public: bool,
) -> Record:
    """Send each page and each sitemap that the sitemap at ``url`` lists as a message of
    its own (``slot`` held while it is fetched).  A site's robots.txt (``level`` 1) stands
    for the sitemaps its ``Sitemap:`` lines name, else for ``/sitemap.xml``, read right
    here (none there is no error)."""
    crawl_options = CrawlOptions.from_message(options)
    logger.info("Reading sitemap %r...", url)
    with slot:
        if level == 1:
            pages, maps, public, listed_by = read_robots(
                stores, session, url, crawl_options, limits, via_public=via_public
            )
        else:
            pages, maps, public = fetch_sitemap(
                session, url, crawl_options, limits, via_public=via_public, missing_ok=False
            )
            listed_by = url
    found, sitemap_urls, dropped = sitemap_links_to_follow(
        listed_by, pages, maps, crawl_options, level
    )
    dropped_links = report_dropped(url, dropped)
    parts = sitemap_parts(found, sitemap_urls, limits.max_links_per_page)
    sent = send_listed(stores, links, level, parts[0], options, public)
    sent += send_parts(stores, links, url, level, parts[1:], options, public)
    logger.info(
        "Done reading sitemap %r. Found %d pages and %d sitemaps.", url, len(pages), len(maps)
    )
    return records.sitemap_record(url, found, sitemap_urls, level, sent, dropped_links)


def read_robots(
    stores: Stores,
    session: requests.Session,
    url: str,
    crawl_options: CrawlOptions,
    limits: Limits,
    *,
    via_public: bool,
) -> tuple[list[str], list[str], bool, str]:
    """What the site's robots.txt at ``url`` stands for: the sitemaps its ``Sitemap:``
    lines name, else what ``/sitemap.xml`` lists (when robots.txt allows it; none there
    is no error).  The pages and sitemaps listed, whether the last fetch was public, and
    the URL that listed them."""
    with stores.memcache_pool.reserve() as client:
        agent = crawl_options.user_agent
        robots = politeness.robots_for(
            client, session, url, agent, limits=limits, via_public=via_public,
            owner=politeness.robots_owner(crawl_options),
        )  # fmt: skip
    maps = list(robots.sitemaps)
    public = check_hop(url, via_public)  # robots.txt's host, as a page's hop
    fallback = well_known(url)
    if maps or not politeness.robots_allow(robots, fallback, crawl_options):
        return [], maps, public, url
    pages, maps, public = fetch_sitemap(
        session, fallback, crawl_options, limits, via_public=public, missing_ok=True
    )
    return pages, maps, public, fallback


def send_parts(
    stores: Stores,
    links: Links,
    url: str,
    level: int,
    parts: list[dict[str, list[str]]],
    options: dict[str, Any] | None,
    public: bool,
) -> list[str]:
    """Send the ``parts`` of the long sitemap at ``url`` after its first, each a sitemap
    message carrying its URLs (``listed``) under the sitemap's URL and ``#part-N``; the
    ids of the messages sent."""
    crawl_options = CrawlOptions.from_message(options)
    sent: list[str] = []
    with stores.memcache_pool.reserve() as client:
        for number, part in enumerate(parts, start=1):
            kwargs = child_arguments(-1, options, via_public=public, sitemap=level)
            kwargs["listed"] = part
            sent += links.send(
                client,
                [f"{url}#part-{number}"],
                kwargs,
                priority=priority(0, crawl_options),
                sitemaps=True,
            )
    return sent


def send_listed(
    stores: Stores,
    links: Links,
    level: int,
    listed: dict[str, list[str]],
    options: dict[str, Any] | None,
    public: bool,
) -> list[str]:
    """Send the pages (depth 0) and the sitemaps (nested a ``level`` deeper) that a
    sitemap listed, each claimed; the ids of the messages sent.  Once ``--max-pages``
    is spent, no page is."""
    crawl_options = CrawlOptions.from_message(options)
    sent = []
    with stores.memcache_pool.reserve() as client:
        pages = [] if politeness.pages_spent(client, crawl_options) else listed["pages"]
        for urls, sitemap in ((pages, 0), (listed["sitemaps"], level + 1)):
            sent += links.send(
                client,
                urls,
                child_arguments(-1, options, via_public=public, sitemap=sitemap),
                priority=priority(0, crawl_options),
                sitemaps=bool(sitemap),
            )
    return sent


def fetch_sitemap(
    session: requests.Session,
    url: str,
    crawl_options: CrawlOptions,
    limits: Limits,
    *,
    via_public: bool,
    missing_ok: bool,
) -> tuple[list[str], list[str], bool]:
    """The pages and sitemaps the sitemap at ``url`` lists, and whether its fetch was
    public; a sitemap not there (4xx) lists nothing when ``missing_ok``."""
    agent = crawl_options.user_agent
    try:
        with fetch(session, url, limits, agent, via_public=via_public) as fetched:
            body = read_body(fetched, limits)
    except PermanentError as e:
        if e.status is None or not missing_ok:
            raise
        logger.info("No sitemap at %s (%s).", url, e)
        return [], [], via_public
    pages, maps = sitemap_links(body, fetched.response.url, limits.max_body_bytes)
    return pages, maps, fetched.public
