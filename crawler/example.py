"""Dramatiq's web-crawler example: a distributed crawler in one actor.

Run workers with ``dramatiq crawler.example`` and seed a crawl with
``python -m crawler.example URL``.  ``REDIS=1`` selects the Redis broker.
"""

from __future__ import annotations

import argparse
import logging
import re
import socket
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from threading import local
from typing import Any

import dramatiq
import redis
import requests
from dramatiq.rate_limits import RateLimiterBackend

from crawler import command_line, local_mode, messages, records
from crawler.archiving import warc
from crawler.brokers import BROKER_ERRORS, QUEUE, SendBack, make_broker
from crawler.command_line import http_url
from crawler.environment import (
    broker_address,
    dedup_store_name,
    dedup_url,
    lifetimes_from_environment,
    limits_from_environment,
    uses_redis,
    warc_directory,
    warc_max_bytes,
)
from crawler.errors import PermanentError
from crawler.failures import reports_failures
from crawler.fetching import fetch, is_html, new_session, read_body
from crawler.fetching.network_guard import check_hop
from crawler.frontier import claims, politeness
from crawler.frontier.scope import (
    child_arguments,
    links_to_follow,
    priority,
    report_dropped,
    sitemap_links_to_follow,
    sitemap_parts,
)
from crawler.links import sitemaps
from crawler.links.cleaning import clean_anchor
from crawler.links.extraction import html_links
from crawler.options import CrawlOptions
from crawler.outcomes import CANCELLED, DEFERRED, DISALLOWED, DUPLICATE, OVER_BUDGET
from crawler.records import Record, RecordFile
from crawler.stores import STORE_ERRORS, StorePool, memcached
from crawler.stores import redis as redis_stores
from crawler.stores.memcached import MemcachedBackend, MemcachedError
from crawler.tracking import record_queue, seeder
from crawler.tracking.bookkeeping import keep_books

logger = logging.getLogger("example")
memcache_pool: StorePool = memcached.from_environment()  # MEMCACHED_SERVERS
rate_limits_backend: RateLimiterBackend = MemcachedBackend(memcache_pool)
if dedup_url() is not None:  # DEDUP_URL=redis://...: all of that in Redis instead
    memcache_pool, rate_limits_backend = redis_stores.stores(str(dedup_url()))
anchor_re = re.compile(rb'<a href="([^"]+)">')
state = local()
limits = limits_from_environment()
lifetimes = lifetimes_from_environment()
warc_files = warc.WarcFiles(warc_max_bytes(), root=warc_directory())  # --warc: this process's

send_back = SendBack()
broker = make_broker(send_back)
keep_books(
    broker,
    memcache_pool,
    lifetimes,
    publish=record_queue.Batches(broker),
    on_unsent=send_back.could_not_send,
    patience=limits.store_patience,
)
dramatiq.set_broker(broker)


def get_session() -> requests.Session:
    session = getattr(state, "session", None)
    if session is None:
        session = state.session = new_session()
    return session


def find_anchors(
    body: bytes, page_url: str, crawl_options: CrawlOptions, content_type: str | None = None
) -> list[str]:
    """Upstream's regex by default; an HTML parser with ``--follow-relative``."""
    if crawl_options.follow_relative:
        return html_links(body, page_url, content_type)
    return [clean_anchor(match.group(1)) for match in anchor_re.finditer(body)]


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
    url: str,
    depth: int = 0,
    options: dict[str, Any] | None = None,
    via_public: bool = False,
    sitemap: int = 0,
    listed: dict[str, list[str]] | None = None,
) -> Record:
    crawl_options = CrawlOptions.from_message(options)
    message = claims.current_message(crawl, url)
    keeper = keeper_of(message, crawl_options, options)  # --warc: every response kept
    with memcache_pool.reserve() as client:
        claimed = claims.claim_name(url, sitemap)  # the URL (a sitemap's: marked as one)
        added = claims.claim_message(client, message, claimed, crawl_options.crawl_id, lifetimes)
        if added == claims.CANCELLED:
            logger.warning("Skipping URL %r since its crawl was cancelled.", url)
            return records.skipped_record(url, CANCELLED)
        if added == claims.TAKEN:
            logger.warning("URL %r has already been visited. Skipping...", url)
            return records.skipped_record(url, DUPLICATE)
        first_delivery = claims.bound_deliveries(client, message, limits.max_deliveries, lifetimes)
        spent = (
            None
            if sitemap
            else politeness.over_budget(client, crawl_options, url, first_delivery, lifetimes.grace)
        )
        if spent:
            logger.warning("Skipping URL %r since %s page budget is spent.", url, spent)
            return records.skipped_record(url, OVER_BUDGET)

    if listed is not None:  # --sitemaps: a part of a long sitemap's URLs, to send on
        sent = send_listed(message, sitemap, listed, options, via_public, first_delivery)
        return records.sitemap_record(url, listed["pages"], listed["sitemaps"], sitemap, sent, 0)

    session = get_session()
    with memcache_pool.reserve() as client:
        verdict = politeness.check(
            client,
            rate_limits_backend,
            session,
            url,
            crawl_options,
            limits=limits,
            via_public=via_public,
        )
    if verdict == politeness.DISALLOWED:
        logger.warning("Skipping URL %r since robots.txt disallows it.", url)
        return records.skipped_record(url, DISALLOWED)
    slot = (  # --max-per-host: one of the host's places for a fetch in flight
        None
        if verdict == politeness.RATE_LIMITED
        else politeness.host_slot(memcache_pool, url, crawl_options)
    )
    if slot is None:  # over --max-rate, or the host's places all taken
        claims.defer(crawl.broker, message, delay=politeness.defer_delay())
        return records.skipped_record(url, DEFERRED)
    if sitemap:  # --sitemaps: a sitemap to read (or robots.txt, naming them), not a page
        return read_sitemap(
            session, message, url, sitemap, slot, options, via_public, first_delivery
        )

    logger.info("Crawling %r...", url)
    anchors: list[str] | None = None
    agent = crawl_options.user_agent
    with slot, fetch(session, url, limits, agent, via_public=via_public, keeper=keeper) as fetched:
        response = fetched.response
        html = is_html(response)
        body = read_body(fetched, limits) if html or keeper else b""
        stored = keeper.page(fetched, body) if keeper else None
        if not html:
            logger.warning("Skipping URL %r since it's not HTML.", url)
        else:
            anchors = []
            content_type = response.headers.get("Content-Type")
            for anchor in find_anchors(body, response.url, crawl_options, content_type):
                if anchor.startswith("http://") or anchor.startswith("https://"):
                    anchors.append(anchor)
                    if len(anchors) == limits.max_links_per_page:
                        logger.warning("Taking only the first %d links of %r.", len(anchors), url)
                        break

    links, dropped = links_to_follow(anchors or [], crawl_options, depth)
    dropped_links = report_dropped(url, dropped)
    with memcache_pool.reserve() as client:
        kwargs = child_arguments(depth, options, via_public=fetched.public)
        sent = claims.send_claimed(
            client,
            crawl,
            message.message_id,
            links,
            kwargs,
            crawl_options.crawl_id,
            lifetimes,
            first_delivery=first_delivery,
            priority=priority(depth + 1, crawl_options),
        )
    if anchors is not None:
        logger.info("Done crawling %r. Found %d anchors.", url, len(anchors))
    return records.page_record(url, response, anchors, depth, sent, dropped_links, stored)


def read_sitemap(
    session: requests.Session,
    message: dramatiq.Message[Any],
    url: str,
    level: int,
    slot: AbstractContextManager[Any],
    options: dict[str, Any] | None,
    via_public: bool,
    first_delivery: bool,
) -> Record:
    """``--sitemaps``: send each page and each sitemap that the sitemap at ``url`` lists
    as a message of its own (``slot`` held while it is fetched).  A site's robots.txt
    (``level`` 1) stands for the sitemaps its ``Sitemap:`` lines name, else for
    ``/sitemap.xml``, read right here (none there is no error)."""
    crawl_options = CrawlOptions.from_message(options)
    logger.info("Reading sitemap %r...", url)
    pages: list[str] = []
    if level == 1:
        with slot:
            with memcache_pool.reserve() as client:
                agent = crawl_options.user_agent
                robots = politeness.robots_for(
                    client, session, url, agent, limits=limits, via_public=via_public
                )
            maps, listed_by = list(robots.sitemaps), url
            public = check_hop(url, via_public)  # robots.txt's host, as a page's hop
            fallback = sitemaps.well_known(url)
            if not maps and politeness.robots_allow(robots, fallback, crawl_options):
                pages, maps, public = fetch_sitemap(session, fallback, crawl_options, public, True)
                listed_by = fallback
    else:
        with slot:
            pages, maps, public = fetch_sitemap(session, url, crawl_options, via_public, False)
        listed_by = url
    links, sitemap_urls, dropped = sitemap_links_to_follow(
        listed_by, pages, maps, crawl_options, level
    )
    dropped_links = report_dropped(url, dropped)
    # Sent from here: as many URLs as a page's links at most, the rest in parts, each a
    # message carrying its URLs (sending 50,000 would outlast the actor's time limit).
    parts = sitemap_parts(links, sitemap_urls, limits.max_links_per_page)
    sent = send_listed(message, level, parts[0], options, public, first_delivery)
    with memcache_pool.reserve() as client:
        for number, part in enumerate(parts[1:], start=1):
            kwargs = child_arguments(-1, options, via_public=public, sitemap=level)
            kwargs["listed"] = part
            sent += claims.send_claimed(
                client,
                crawl,
                message.message_id,
                [f"{url}#part-{number}"],
                kwargs,
                crawl_options.crawl_id,
                lifetimes,
                first_delivery=first_delivery,
                priority=priority(0, crawl_options),
                sitemaps=True,
            )
    logger.info(
        "Done reading sitemap %r. Found %d pages and %d sitemaps.", url, len(pages), len(maps)
    )
    return records.sitemap_record(url, links, sitemap_urls, level, sent, dropped_links)


def send_listed(
    message: dramatiq.Message[Any],
    level: int,
    listed: dict[str, list[str]],
    options: dict[str, Any] | None,
    public: bool,
    first_delivery: bool,
) -> list[str]:
    """Send the pages (depth 0) and the sitemaps (nested a ``level`` deeper) that a
    sitemap listed, each claimed; the ids of the messages sent.  Once ``--max-pages``
    is spent, no page is."""
    crawl_options = CrawlOptions.from_message(options)
    sent = []
    with memcache_pool.reserve() as client:
        pages = [] if politeness.pages_spent(client, crawl_options) else listed["pages"]
        for urls, sitemap in ((pages, 0), (listed["sitemaps"], level + 1)):
            sent += claims.send_claimed(
                client,
                crawl,
                message.message_id,
                urls,
                child_arguments(-1, options, via_public=public, sitemap=sitemap),
                crawl_options.crawl_id,
                lifetimes,
                first_delivery=first_delivery,
                priority=priority(0, crawl_options),
                sitemaps=bool(sitemap),
            )
    return sent


def fetch_sitemap(
    session: requests.Session,
    url: str,
    crawl_options: CrawlOptions,
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
    pages, maps = sitemaps.sitemap_links(body, fetched.response.url, limits.max_body_bytes)
    return pages, maps, fetched.public


def keeper_of(
    message: dramatiq.Message[Any], crawl_options: CrawlOptions, options: dict[str, Any] | None
) -> warc.Keeper | None:
    """With ``--warc``, what keeps this message's response in the crawl's WARC files:
    in the directory the crawl names, under the worker's ``CRAWLER_WARC_DIR`` (raises
    :class:`~crawler.errors.InvalidMessage` for one outside it, or without it)."""
    if crawl_options.warc is None:
        return None
    retries = message.options.get("retries", 0)
    return warc.Keeper(
        warc_files,
        memcache_pool,
        warc_files.directory(crawl_options.warc),
        str(crawl_options.crawl_id),
        options or {},
        lifetimes.grace,
        last_attempt=retries >= message.options.get("max_retries", crawl.options["max_retries"]),
    )


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crawler.example",
        description="Seed a crawl: enqueue URLs for the workers, or crawl them right here.",
    )
    parser.add_argument("urls", metavar="url", nargs="*", type=http_url, help="an http(s) URL")
    command_line.add_arguments(parser)
    watching = parser.add_argument_group("following a crawl of workers")
    watching.add_argument(
        "--wait", action="store_true", help="show the crawl's progress until it is finished"
    )
    watching.add_argument(
        "--crawl-id",
        type=command_line.crawl_id,
        metavar="CRAWL_ID",
        help="add the URLs to this crawl (its claims, counters and budget), not a new one",
    )
    watching.add_argument("--status", metavar="CRAWL_ID", help="print a crawl's figures")
    watching.add_argument(
        "--cancel",
        metavar="CRAWL_ID",
        help="end the crawl: its queued and retrying URLs end as cancelled, without a fetch",
    )
    watching.add_argument(
        "--dead-letters",
        metavar="CRAWL_ID",
        help="list the URLs of the crawl given up for good ('all': of every crawl)",
    )
    watching.add_argument(
        "--replay",
        metavar="CRAWL_ID",
        help="send the crawl's dead-lettered URLs again, with fresh retries ('all': every crawl)",
    )
    local_options = parser.add_argument_group("local mode: one process, no services")
    local_options.add_argument(
        "--local", action="store_true", help="crawl in this process until nothing is left"
    )
    local_options.add_argument(
        "--threads", type=command_line.positive_int, help="fetching threads (default 8)"
    )
    parser.add_argument(
        "--output", type=Path, help="with --local or --wait: one JSON line per crawled URL"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every page")
    arguments = parser.parse_args(args)
    if arguments.status:
        return reach_services(lambda: seeder.status(memcache_pool, arguments.status))
    if arguments.cancel:
        return reach_services(lambda: seeder.cancel(memcache_pool, arguments.cancel, lifetimes))
    if arguments.dead_letters or arguments.replay:
        return reach_services(
            lambda: seeder.dead_letters(
                broker,
                crawl.queue_name,
                memcache_pool,
                lifetimes,
                arguments.dead_letters or arguments.replay,
                replay=bool(arguments.replay),
            )
        )
    if not arguments.urls:
        parser.error("give at least one URL to crawl (or --status CRAWL_ID)")
    try:
        crawl_options = command_line.from_arguments(
            arguments,
            arguments.urls,
            local=arguments.local,
            collect_records=arguments.wait,
            records_without_links=arguments.wait and arguments.output is None,
        )
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    seeds = seed_messages(arguments.urls, crawl_options)
    if crawl_options.breadth_first and uses_redis() and not arguments.local:
        print(
            "note: --breadth-first orders messages on RabbitMQ and with --local; Redis keeps"
            " them in arrival order",
            file=sys.stderr,
        )
    if arguments.local and arguments.crawl_id:
        parser.error("--crawl-id works with workers only")
    if arguments.local:
        use_process_memory(crawl_options)
        return local_mode.run(
            crawl,
            memcache_pool,
            lifetimes,
            seeds,
            threads=arguments.threads or 8,
            output=open_output(parser, arguments.output),
            verbose=arguments.verbose,
        )
    if arguments.threads is not None:
        parser.error("--threads works with --local only")
    if arguments.output is not None and not arguments.wait:
        parser.error("--output works with --local or --wait")
    output = open_output(parser, arguments.output)
    return reach_services(
        lambda: seeder.seed(
            crawl,
            memcache_pool,
            lifetimes,
            seeds,
            crawl_options,
            wait=arguments.wait,
            output=output,
            adding=arguments.crawl_id is not None,
        )
    )


def seed_messages(urls: list[str], crawl_options: CrawlOptions) -> list[dramatiq.Message[Any]]:
    """A crawl's first messages: one for each URL, and with ``--sitemaps`` one for each
    of their sites' robots.txt, to read the sitemaps it names."""
    kwargs: dict[str, Any] = {"options": crawl_options.to_message()}
    seed_priority = priority(0, crawl_options)
    extra = {} if seed_priority is None else {"broker_priority": seed_priority}
    messages = [crawl.message_with_options(args=(url,), kwargs=kwargs, **extra) for url in urls]
    if crawl_options.sitemaps:
        robots = dict.fromkeys(politeness.robots_url(url) for url in urls)
        messages += [
            crawl.message_with_options(args=(url,), kwargs={**kwargs, "sitemap": 1}, **extra)
            for url in robots
        ]
    return messages


def use_process_memory(crawl_options: CrawlOptions) -> None:
    """``--local``: claims, counters and rate limits in this process, not in Memcached;
    WARC files in the directory the command line named (the only one its messages name)."""
    global memcache_pool, rate_limits_backend, warc_files
    memcache_pool, rate_limits_backend = local_mode.memory_stores()
    if crawl_options.warc is not None:
        warc_files = warc.WarcFiles(warc_max_bytes(), root=Path(crawl_options.warc))


#: What a service that does not answer raises in the seeder: pika lets a failed lookup
#: of the broker's host through bare.
UNREACHABLE: tuple[type[BaseException], ...] = (*BROKER_ERRORS, *STORE_ERRORS, socket.gaierror)


def reach_services(command: Callable[[], int]) -> int:
    """Run ``command``; a broker or dedup store that does not answer is one line and exit 1."""
    try:
        return command()
    except UNREACHABLE as e:
        # A Redis error is the store's when the store is Redis and the broker is not;
        # a bare lookup failure is pika's (redis-py and the Memcached pool wrap theirs).
        store = isinstance(e, MemcachedError) or (
            isinstance(e, redis.RedisError) and dedup_url() is not None and not uses_redis()
        )
        where = dedup_store_name() if store else broker_address()
        print(f"error: cannot reach {where}: {e}", file=sys.stderr)
        return 1


def open_output(parser: argparse.ArgumentParser, path: Path | None) -> RecordFile | None:
    """The ``--output`` file, opened before anything is enqueued, or a usage error."""
    if path is None:
        return None
    try:
        return RecordFile(path)
    except OSError as e:
        parser.error(f"cannot write --output {str(path)!r}: {e.strerror or e}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
