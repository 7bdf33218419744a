"""Dramatiq's web-crawler example: a distributed crawler in one actor.

Run workers with ``dramatiq crawler.example`` and seed a crawl with
``python -m crawler.example URL``.  ``REDIS=1`` selects the Redis broker.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable
from contextlib import closing
from functools import partial
from pathlib import Path
from threading import local
from typing import Any

import dramatiq
import pylibmc
import requests
from dramatiq.middleware import Retries
from dramatiq.rate_limits.backends import MemcachedBackend

from crawler import claims, local_crawl, options, politeness, records, results, waiting
from crawler.bookkeeping import settle
from crawler.environment import (
    limits_from_environment,
    make_broker,
    memcached_behaviors,
    memcached_servers,
)
from crawler.errors import PermanentError
from crawler.failures import reports_failures
from crawler.fetching import fetch, is_html, read_body
from crawler.html_links import html_links
from crawler.links import clean_anchor
from crawler.memcached_pool import ThreadMappedPool
from crawler.network_guard import fetch_was_public, guarded_session, start_fetch
from crawler.options import CrawlOptions
from crawler.records import Recorder, RecordFile
from crawler.scope import child_arguments, links_to_follow, report_dropped
from crawler.seeding import broker_address, http_url
from crawler.sending import BROKER_ERRORS, SendBack

logger = logging.getLogger("example")
memcache_client = pylibmc.Client(memcached_servers(), binary=True, behaviors=memcached_behaviors())
memcache_pool = ThreadMappedPool(memcache_client)
rate_limits_backend = MemcachedBackend(
    servers=memcached_servers(), binary=True, behaviors=memcached_behaviors()
)
anchor_re = re.compile(rb'<a href="([^"]+)">')
state = local()
limits = limits_from_environment()

send_back = SendBack()
broker = make_broker(send_back)
broker.add_middleware(
    Recorder(
        on_record=settle(
            lambda: memcache_pool, partial(results.publish, broker), send_back.could_not_send
        )
    ),
    before=Retries,  # its after-hook then runs after Retries', to see final failures
)
dramatiq.set_broker(broker)


def get_session() -> requests.Session:
    session = getattr(state, "session", None)
    if session is None:
        session = state.session = guarded_session()
    return session


def find_anchors(body: bytes, page_url: str, crawl_options: CrawlOptions) -> list[str]:
    """Upstream's regex by default; an HTML tokenizer with ``--follow-relative``."""
    if crawl_options.follow_relative:
        return html_links(body, page_url)
    return [clean_anchor(match.group(1)) for match in anchor_re.finditer(body)]


@dramatiq.actor(
    max_retries=3,
    time_limit=10000,
    throws=(PermanentError,),
    min_backoff=limits.min_backoff,
    max_backoff=limits.max_backoff,
)
@reports_failures
def crawl(
    url: str, depth: int = 0, options: dict[str, Any] | None = None, via_public: bool = False
) -> None:
    crawl_options = CrawlOptions.from_message(options)
    message = claims.current_message(crawl, url)
    url_hash = claims.url_hash(url)
    with memcache_pool.reserve() as client:
        added = claims.claim(client, url_hash, message.message_id)
        if not added:
            logger.warning("URL %r has already been visited. Skipping...", url)
            records.note(records.skipped_record(url, records.DUPLICATE))
            return
        first_delivery = claims.bound_deliveries(client, message, limits.max_deliveries)
        if politeness.over_budget(client, crawl_options, first_delivery):
            logger.warning("Skipping URL %r since the crawl's page budget is spent.", url)
            records.note(records.skipped_record(url, records.OVER_BUDGET))
            return

    session = get_session()
    start_fetch(via_public)  # robots.txt is fetched under the same network guard
    with memcache_pool.reserve() as client:
        verdict = politeness.check(
            client, rate_limits_backend, session, url, crawl_options, limits=limits
        )
    if verdict == politeness.DISALLOWED:
        logger.warning("Skipping URL %r since robots.txt disallows it.", url)
        records.note(records.skipped_record(url, records.DISALLOWED))
        return
    if verdict == politeness.RATE_LIMITED:
        claims.defer(crawl.broker, message, delay=politeness.defer_delay())
        records.note(records.skipped_record(url, records.DEFERRED))
        return

    logger.info("Crawling %r...", url)
    anchors: list[str] | None = None
    start_fetch(via_public)
    with closing(fetch(session, url, limits, crawl_options.user_agent)) as response:
        if not is_html(response):
            logger.warning("Skipping URL %r since it's not HTML.", url)
        else:
            anchors = []
            for anchor in find_anchors(read_body(response, limits), response.url, crawl_options):
                if anchor.startswith("http://") or anchor.startswith("https://"):
                    anchors.append(anchor)
                    if len(anchors) == limits.max_links_per_page:
                        logger.warning("Taking only the first %d links of %r.", len(anchors), url)
                        break

    links, dropped = links_to_follow(anchors or [], crawl_options, depth)
    dropped_links = report_dropped(url, dropped)
    with memcache_pool.reserve() as client:
        kwargs = child_arguments(depth, options, via_public=fetch_was_public())
        sent = claims.send_claimed(
            client,
            crawl,
            message.message_id,
            links,
            kwargs,
            crawl_options.crawl_id,
            first_delivery=first_delivery,
        )
    if anchors is not None:
        logger.info("Done crawling %r. Found %d anchors.", url, len(anchors))
    records.note(records.page_record(url, response, anchors, depth, sent, dropped_links))


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crawler.example",
        description="Seed a crawl: enqueue URLs for the workers, or crawl them right here.",
    )
    parser.add_argument("urls", metavar="url", nargs="*", type=http_url, help="an http(s) URL")
    options.add_arguments(parser)
    watching = parser.add_argument_group("following a crawl of workers")
    watching.add_argument(
        "--wait", action="store_true", help="show the crawl's progress until it is finished"
    )
    watching.add_argument("--status", metavar="CRAWL_ID", help="print a crawl's figures")
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
    local_mode = parser.add_argument_group("local mode: one process, no services")
    local_mode.add_argument(
        "--local", action="store_true", help="crawl in this process until nothing is left"
    )
    local_mode.add_argument(
        "--threads", type=options.positive_int, help="fetching threads (default 8)"
    )
    parser.add_argument(
        "--output", type=Path, help="with --local or --wait: one JSON line per crawled URL"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every page")
    arguments = parser.parse_args(args)
    if arguments.status:
        return waiting.status(sys.modules[__name__], arguments.status)
    if arguments.dead_letters or arguments.replay:
        return reach_services(
            lambda: waiting.dead_letters(
                broker,
                crawl.queue_name,
                memcache_pool,
                arguments.dead_letters or arguments.replay,
                replay=bool(arguments.replay),
            )
        )
    if not arguments.urls:
        parser.error("give at least one URL to crawl (or --status CRAWL_ID)")
    crawl_options = options.from_arguments(
        arguments, arguments.urls, collect_records=arguments.wait
    )
    kwargs = {"options": crawl_options.to_message()}
    if arguments.local:
        return local_crawl.run(
            sys.modules[__name__],
            arguments.urls,
            kwargs,
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
        lambda: waiting.seed(
            sys.modules[__name__],
            arguments.urls,
            kwargs,
            crawl_options,
            wait=arguments.wait,
            output=output,
        )
    )


def reach_services(command: Callable[[], int]) -> int:
    """Run ``command``; a broker or Memcached that does not answer is one line and exit 1."""
    try:
        return command()
    except BROKER_ERRORS as e:
        print(f"error: cannot reach {broker_address()}: {e}", file=sys.stderr)
        return 1
    except pylibmc.Error as e:
        print(
            f"error: cannot reach Memcached at {','.join(memcached_servers())}: {e}",
            file=sys.stderr,
        )
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
