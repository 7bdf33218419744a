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

from crawler import environment, messages, worker_parts
from crawler.brokers import QUEUE, SendBack, make_broker
from crawler.environment import Limits
from crawler.errors import PermanentError
from crawler.failure_reports import reports_failures
from crawler.fetching import fetch
from crawler.fetching.sessions import Sessions
from crawler.frontier import claims, scope, sitemaps
from crawler.handlers import Handlers
from crawler.links.cleaning import clean_anchor
from crawler.links.extraction import absolute_links
from crawler.middleware import actor_for, parts_for
from crawler.options import CrawlOptions
from crawler.outcomes import DUPLICATE
from crawler.pipeline import PageVisit
from crawler.records import Record
from crawler.rendering import Renderer
from crawler.stores import Stores
from crawler.tracking import record_queue
from crawler.tracking.bookkeeping import keep_books

logger = logging.getLogger("example")
try:
    environment.check_variables()  # all first: a bad one is one line, not a start-up's traceback
except ValueError as e:
    logger.critical("%s", e)
    sys.exit(2)  # as Dramatiq's own start-up errors
anchor_re = re.compile(rb'<a href="([^"]+)">')
state = local()
limits = environment.limits_from_environment()
lifetimes = environment.lifetimes_from_environment()
stores = Stores()  # memcache_pool (MEMCACHED_SERVERS, or DEDUP_URL), rate limits, --warc files
send_back = SendBack()
broker = make_broker(send_back)
keep_books(
    broker, stores, lifetimes, publish=record_queue.Batches(broker),
    on_unsent=send_back.could_not_send, patience=limits.store_patience,
)  # fmt: skip
dramatiq.set_broker(broker)  # before CRAWLER_HANDLERS load: their actors go on it
page_handlers = Handlers(environment.handler_names(), environment.handler_timeout())
renderer = Renderer(*environment.render_settings())  # --render: no browser till a page asks
parts = worker_parts.build(
    stores, limits, lifetimes, page_handlers, renderer, environment.directory_roots()
)  # and its pipeline


def get_session(crawl_options: CrawlOptions) -> requests.Session:
    sessions = getattr(state, "sessions", None)
    if sessions is None:
        sessions = state.sessions = Sessions()  # a session a crawl: no cookie crosses crawls
    return sessions.get(crawl_options)


def find_anchors(visit: PageVisit, limits: Limits) -> list[str]:
    """Upstream's regex over the page (its DOM with ``--render``), or with
    ``--follow-relative`` every ``<a href>`` as a parser or the browser resolved it
    (:meth:`PageVisit.parsed_links`): the absolute http(s) links, the first
    ``CRAWLER_MAX_LINKS_PER_PAGE`` of them."""
    if visit.crawl_options.follow_relative:
        found = visit.parsed_links()
    else:
        html = visit.body if visit.rendered is None else visit.rendered.html.encode()
        found = [clean_anchor(match.group(1)) for match in anchor_re.finditer(html or b"")]
    return absolute_links(found, limits.max_links_per_page, visit.url)


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
    request: dict[str, Any] | None = None, jar: int = 0,  # its method and body; the cookies'
) -> Record:  # fmt: skip
    here = parts_for(parts)  # the worker's, or a --local crawl's own (of the message's broker)
    visit = PageVisit.of(crawl, url, depth, options, via_public, here.limits, request, jar)
    visit.label, visit.data = label, data  # what the handler's Request passed on
    here.pipeline.before_claim(visit)  # the message's handler and WARC directory checked
    visit.skipped, sender = claims.take_url(
        here.stores, visit.actor, visit.message, visit.claim, visit.crawl_options,
        here.limits, here.lifetimes,
    )  # fmt: skip
    if visit.skipped == DUPLICATE:
        logger.warning("URL %r has already been visited. Skipping...", url)
    session = None if visit.skipped else get_session(visit.crawl_options)
    if session is None or not here.pipeline.before_request(visit, sender, session):
        return here.pipeline.on_record(visit)  # a duplicate, over budget, disallowed, deferred...
    logger.info("Crawling %r...", url)
    with visit.turn, fetch(
        session, url, visit.bounds, visit.crawl_options.user_agent, via_public=via_public,
        keeper=visit.keeper, conditions=visit.conditions, asking=visit.asking, cache=visit.cache,
    ) as fetched:  # fmt: skip
        here.pipeline.after_response(visit, fetched)  # its body read, or its earlier links (a 304)
    if visit.not_html:  # the host's turn over: its place free for the next fetch
        logger.warning("Skipping URL %r since it's not HTML.", url)
    elif visit.body is not None:
        here.pipeline.on_page(visit)  # rendered, given to the handler
        visit.anchors = find_anchors(visit, here.limits)
    here.pipeline.on_links(visit)  # the handler's requests, and those in scope
    with here.stores.memcache_pool.reserve() as client:
        visit.sent = sender.send(client, visit.follow, visit.kwargs, visit.own, visit.priority)
    if visit.anchors is not None:
        logger.info("Done crawling %r. Found %d anchors.", url, len(visit.anchors))
    return here.pipeline.on_record(visit)


@dramatiq.actor(queue_name=QUEUE, actor_name=scope.SITEMAP_ACTOR, **crawl.options)  # --sitemaps
@reports_failures
@messages.checked
def crawl_sitemap(
    url: str, depth: int = 0, options: dict[str, Any] | None = None, via_public: bool = False,
    sitemap: int = 1, listed: dict[str, list[str]] | None = None,
) -> Record:  # fmt: skip
    """Read a sitemap (robots.txt, at ``sitemap`` level 1, names them), or send on a part
    of a long one's URLs (``listed``): the pages it lists are ``crawl`` messages."""
    here = parts_for(parts)
    return sitemaps.crawl_sitemap(
        actor_for(crawl), here.stores, get_session, url, sitemap, listed, options, via_public,
        limits=here.limits, lifetimes=here.lifetimes,
    )  # fmt: skip


def main(args: list[str]) -> int:
    from crawler import cli  # the seeder's command line: not a worker's to load

    return cli.main(args, crawl, parts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
