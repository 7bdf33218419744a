"""Dramatiq's web-crawler example: a distributed crawler in one actor (and, for
``--sitemaps``, a second one on its queue).

Run workers with ``dramatiq crawler.example`` and seed a crawl with
``python -m crawler.example URL``.  ``REDIS=1`` selects the Redis broker.
"""

from __future__ import annotations

import logging
import re
import sys
from threading import local
from typing import Any

import dramatiq
import requests

from crawler import messages, records
from crawler.archiving import warc
from crawler.brokers import QUEUE, SendBack, make_broker
from crawler.environment import (
    Limits,
    check_variables,
    handler_names,
    handler_timeout,
    lifetimes_from_environment,
    limits_from_environment,
    render_settings,
)
from crawler.errors import PermanentError
from crawler.failures import reports_failures
from crawler.fetching import Fetched, fetch
from crawler.fetching.sessions import Sessions
from crawler.frontier import claims, recrawl, scope, sitemaps
from crawler.frontier.scope import child_arguments, page_links_to_follow, priority, report_dropped
from crawler.handlers import Handlers, Page, page_of, requests_followed
from crawler.links.cleaning import clean_anchor, clean_href
from crawler.links.extraction import html_links
from crawler.middleware import actor_for
from crawler.options import CrawlOptions
from crawler.outcomes import DUPLICATE
from crawler.records import Record
from crawler.rendering import Rendered, Renderer, job_of
from crawler.stores import Stores
from crawler.tracking import record_queue
from crawler.tracking.bookkeeping import keep_books
from crawler.worker_parts import WorkerParts

logger = logging.getLogger("example")
try:
    check_variables()  # all of them first: a bad one is one line, not a start-up's traceback
except ValueError as e:
    logger.critical("%s", e)
    sys.exit(2)  # as Dramatiq's own start-up errors
stores = Stores()  # memcache_pool (MEMCACHED_SERVERS, or DEDUP_URL), rate limits, --warc files
anchor_re = re.compile(rb'<a href="([^"]+)">')
state = local()
limits = limits_from_environment()
lifetimes = lifetimes_from_environment()
send_back = SendBack()
broker = make_broker(send_back)
keep_books(
    broker,
    stores,
    lifetimes,
    publish=record_queue.Batches(broker),
    on_unsent=send_back.could_not_send,
    patience=limits.store_patience,
)
dramatiq.set_broker(broker)
handlers = Handlers(handler_names(), handler_timeout())  # CRAWLER_HANDLERS: once broker is set
renderer = Renderer(*render_settings())  # --render: no browser until a page asks for one


def get_session(crawl_options: CrawlOptions) -> requests.Session:
    sessions = getattr(state, "sessions", None)
    if sessions is None:
        sessions = state.sessions = Sessions()  # a session a crawl: no cookie crosses crawls
    return sessions.get(crawl_options)


def find_anchors(
    url: str,
    body: bytes,
    response: requests.Response,
    crawl_options: CrawlOptions,
    page: Page | None = None,
    rendered: Rendered | None = None,
) -> list[str]:
    """Upstream's regex by default, an HTML parser with ``--follow-relative`` (the page
    handler's tree, when there is one): the absolute http(s) links, the first
    ``CRAWLER_MAX_LINKS_PER_PAGE`` of them.  With ``--render``, the rendered page's:
    the regex over its DOM, or the ``href`` of its links as the browser resolved them."""
    if rendered is not None and crawl_options.follow_relative:
        found = [clean_href(link) for link in rendered.links]
    elif rendered is not None:
        found = [clean_anchor(m.group(1)) for m in anchor_re.finditer(rendered.html.encode())]
    elif crawl_options.follow_relative:
        tree = None if page is None else page.tree
        found = html_links(body, response.url, response.headers.get("Content-Type"), tree)
    else:
        found = [clean_anchor(match.group(1)) for match in anchor_re.finditer(body)]
    anchors: list[str] = []
    for anchor in found:
        if anchor.startswith("http://") or anchor.startswith("https://"):
            anchors.append(anchor)
            if len(anchors) == limits.max_links_per_page:
                logger.warning("Taking only the first %d links of %r.", len(anchors), url)
                break
    return anchors


@dramatiq.actor(
    queue_name=QUEUE,  # a queue of its own: other Dramatiq apps keep "default" as they made it
    max_retries=3,
    time_limit=10000,
    throws=(PermanentError,),
    min_backoff=limits.min_backoff,
    max_backoff=limits.max_backoff,
)
@reports_failures
@messages.checked
def crawl(
    url: str, depth: int = 0, options: dict[str, Any] | None = None, via_public: bool = False,
    label: str | None = None, data: dict[str, Any] | None = None,  # a handler's Request's
) -> Record:  # fmt: skip
    crawl_options = CrawlOptions.from_message(options)
    actor = actor_for(crawl)  # of the broker this message came from: --local's has its own
    message = claims.current_message(actor, url)
    handler = handlers.chosen(crawl_options.handler)  # --handler: one this worker loaded
    keeper = keeper_of(message, crawl_options, options)  # --warc: every response kept
    skipped, links = claims.take_url(stores, actor, message, url, crawl_options, limits, lifetimes)
    if skipped == DUPLICATE:
        logger.warning("URL %r has already been visited. Skipping...", url)
    if skipped is not None:  # a duplicate, cancelled, paused (put back a while) or over budget
        return records.skipped_record(url, skipped)

    session = get_session(crawl_options)
    slot, skipped = claims.turn_or_defer(  # robots.txt, --max-rate, --max-per-host
        stores, actor.broker, message, session, url, crawl_options, limits, via_public=via_public
    )
    if slot is None:  # disallowed, or deferred (sent again a while later)
        return records.skipped_record(url, str(skipped))

    logger.info("Crawling %r...", url)
    anchors: list[str] | None = None
    page: Page | None = None
    rendered: Rendered | None = None
    agent, bounds = crawl_options.user_agent, limits.within(crawl_options.timeout)  # --timeout
    seconds = handlers.timeout_for(crawl_options.handler_timeout, bounds.fetch_deadline)
    earlier = earlier_of(crawl_options, url)  # --recrawl-from: what an earlier crawl saw
    conditions = None if earlier is None else earlier.conditions()
    with (
        slot,
        fetch(
            session, url, bounds, agent, via_public=via_public, keeper=keeper, conditions=conditions
        ) as fetched,
    ):
        unchanged = recrawl.unchanged(earlier, fetched.response.status_code)  # a 304
        body, stored = (None, None) if unchanged else warc.read_page(fetched, limits, keeper)
        if unchanged is not None:  # not downloaded again: its earlier links are followed
            anchors, stored = not_modified(fetched, unchanged, keeper)
        elif body is None:
            logger.warning("Skipping URL %r since it's not HTML.", url)
        else:
            rendered = render(fetched, body, session, crawl_options, bounds, keeper, stored)
            dom = None if rendered is None else rendered.html  # --render's
            if handler is not None:
                page = page_of(url, fetched.response, body, label, data, dom)
            anchors = find_anchors(url, body, fetched.response, crawl_options, page, rendered)

    handled = None if handler is None or page is None else handlers.run(handler, page, seconds)
    asked = requests_followed(handled, fetched.response.url)  # each with its label and data
    follow, own, dropped = page_links_to_follow(anchors or [], asked, crawl_options, depth)
    dropped_links = report_dropped(url, dropped)
    kwargs = child_arguments(depth, options, via_public=fetched.public)  # no label nor data
    with stores.memcache_pool.reserve() as client:
        sent = links.send(client, follow, kwargs, own, priority=priority(depth + 1, crawl_options))
    if anchors is not None:
        logger.info("Done crawling %r. Found %d anchors.", url, len(anchors))
    size = None if body is None else len(body)
    return records.page_record(
        url, fetched.response, anchors, depth, sent, dropped_links, stored, handled, size,
        render_ms=None if rendered is None else rendered.ms, earlier=earlier,
    )  # fmt: skip


@dramatiq.actor(queue_name=QUEUE, actor_name=scope.SITEMAP_ACTOR, **crawl.options)  # --sitemaps
@reports_failures
@messages.checked
def crawl_sitemap(
    url: str,
    depth: int = 0,
    options: dict[str, Any] | None = None,
    via_public: bool = False,
    sitemap: int = 1,
    listed: dict[str, list[str]] | None = None,
) -> Record:
    """Read a sitemap (robots.txt, at ``sitemap`` level 1, names them), or send on a part
    of a long one's URLs (``listed``): the pages it lists are ``crawl`` messages."""
    return sitemaps.crawl_sitemap(
        actor_for(crawl), stores, get_session, url, sitemap, listed, options, via_public,
        limits=limits, lifetimes=lifetimes,
    )  # fmt: skip


def earlier_of(crawl_options: CrawlOptions, url: str) -> recrawl.Earlier | None:
    """With ``--recrawl-from``, what the earlier crawl saw of ``url``, while the store
    holds it (none: the page is fetched in full)."""
    if not crawl_options.recrawl:
        return None
    with stores.memcache_pool.reserve() as client:
        return recrawl.earlier_of(client, crawl_options.crawl_id, url)


def not_modified(
    fetched: Fetched, earlier: recrawl.Earlier, keeper: warc.Keeper | None
) -> tuple[list[str], warc.Stored | None]:
    """A page unchanged since the earlier crawl: its earlier links, and where ``--warc``
    kept its ``revisit`` record."""
    logger.info("URL %r is unchanged since the earlier crawl.", fetched.response.url)
    stored = None
    if keeper is not None:
        capture = earlier.capture
        where = None if capture is None else (capture.record_id, capture.date)
        stored = keeper.not_modified(fetched, earlier.payload_digest, where)
    return list(earlier.links), stored


def keeper_of(
    message: dramatiq.Message[Any], crawl_options: CrawlOptions, options: dict[str, Any] | None
) -> warc.Keeper | None:
    """With ``--warc``, what keeps this message's responses in the crawl's WARC files."""
    retries = message.options.get("retries", 0)
    allowed = message.options.get("max_retries", crawl.options["max_retries"])
    return warc.keeper_of(
        stores.warc_files, stores, (retries, allowed), crawl_options.crawl_id,
        crawl_options.warc, options, lifetimes.grace,
    )  # fmt: skip


def render(
    fetched: Fetched,
    body: bytes,
    session: requests.Session,
    crawl_options: CrawlOptions,
    bounds: Limits,
    keeper: warc.Keeper | None,
    stored: warc.Stored | None,
) -> Rendered | None:
    """With ``--render``, the page as headless Chromium renders it, in the page's turn
    (its host's rules hold for the browser too) and in time for its handler within the
    actor's time limit; with ``--warc`` its DOM is kept as a ``conversion`` record."""
    if not crawl_options.render:
        return None
    seconds = 0.0
    if crawl_options.handler is not None:
        seconds = handlers.timeout_for(crawl_options.handler_timeout, bounds.fetch_deadline)
    rendered = renderer.render(job_of(fetched, body, session, crawl_options, bounds, seconds))
    if keeper is not None and stored is not None:
        keeper.rendered(stored, fetched.response.url, rendered.html)
    return rendered


parts = WorkerParts(
    crawl, stores, limits, lifetimes, handlers, renderer
)  # for what runs beside the actor


def main(args: list[str]) -> int:
    from crawler import cli  # the seeder's command line: not a worker's to load

    return cli.main(args, parts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
