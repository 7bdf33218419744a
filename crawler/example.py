"""Dramatiq's web-crawler example: a distributed crawler in one actor.

Run workers with ``dramatiq crawler.example`` and seed a crawl with
``python -m crawler.example URL``.  ``REDIS=1`` selects the Redis broker.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from contextlib import closing
from pathlib import Path
from threading import local

import dramatiq
import pylibmc
import redis
import requests
from dramatiq.errors import BrokerConnectionError

from crawler import claims, local_crawl, records
from crawler.environment import (
    limits_from_environment,
    make_broker,
    memcached_behaviors,
    memcached_servers,
)
from crawler.errors import PermanentError
from crawler.failures import reports_failures
from crawler.fetching import fetch, is_html, read_body
from crawler.links import clean_anchor
from crawler.records import duplicate_record, page_record
from crawler.seeding import broker_address, http_url, positive_int

logger = logging.getLogger("example")
memcache_client = pylibmc.Client(memcached_servers(), binary=True, behaviors=memcached_behaviors())
memcache_pool = pylibmc.ThreadMappedPool(memcache_client)
anchor_re = re.compile(rb'<a href="([^"]+)">')
state = local()
limits = limits_from_environment()

broker = make_broker()
dramatiq.set_broker(broker)


def get_session() -> requests.Session:
    session = getattr(state, "session", None)
    if session is None:
        session = state.session = requests.Session()
    return session


@dramatiq.actor(
    max_retries=3,
    time_limit=10000,
    throws=(PermanentError,),
    min_backoff=limits.min_backoff,
    max_backoff=limits.max_backoff,
)
@reports_failures
def crawl(url: str) -> None:
    message = claims.current_message(crawl, url)
    url_hash = claims.url_hash(url)
    with memcache_pool.reserve() as client:
        added = claims.claim(client, url_hash, message.message_id)
        if not added:
            logger.warning("URL %r has already been visited. Skipping...", url)
            records.note(duplicate_record(url))
            return
        claims.bound_deliveries(client, message, limits.max_deliveries)

    logger.info("Crawling %r...", url)
    anchors: list[str] | None = None
    session = get_session()
    with closing(fetch(session, url, limits)) as response:
        if not is_html(response):
            logger.warning("Skipping URL %r since it's not HTML.", url)
        else:
            anchors = []
            for match in anchor_re.finditer(read_body(response, limits)):
                anchor = clean_anchor(match.group(1))
                if anchor.startswith("http://") or anchor.startswith("https://"):
                    anchors.append(anchor)
                    if len(anchors) == limits.max_links_per_page:
                        logger.warning("Taking only the first %d links of %r.", len(anchors), url)
                        break

    with memcache_pool.reserve() as client:
        claims.send_claimed(client, crawl, message.message_id, anchors or [])
        claims.finish(client, url_hash)
    if anchors is not None:
        logger.info("Done crawling %r. Found %d anchors.", url, len(anchors))
    records.note(page_record(url, response, anchors))


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crawler.example",
        description="Seed a crawl: enqueue URLs for the workers, or crawl them right here.",
    )
    parser.add_argument("urls", metavar="url", nargs="+", type=http_url, help="an http(s) URL")
    local_mode = parser.add_argument_group("local mode: one process, no services")
    local_mode.add_argument(
        "--local", action="store_true", help="crawl in this process until nothing is left"
    )
    local_mode.add_argument("--threads", type=positive_int, help="fetching threads (default 8)")
    local_mode.add_argument("--output", type=Path, help="write one JSON line per crawled URL")
    local_mode.add_argument("-v", "--verbose", action="store_true", help="log every page")
    arguments = parser.parse_args(args)
    if arguments.local:
        return local_crawl.run(
            sys.modules[__name__],
            arguments.urls,
            threads=arguments.threads or 8,
            output=arguments.output,
            verbose=arguments.verbose,
        )
    for option in ("threads", "output"):
        if getattr(arguments, option) is not None:
            parser.error(f"--{option} works with --local only")
    try:
        for url in arguments.urls:
            crawl.send(url)
    except (BrokerConnectionError, redis.ConnectionError) as e:
        print(f"error: cannot reach {broker_address()}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
