"""How long one message takes to read a long sitemap's URLs and send them on: why a
sitemap over ``CRAWLER_MAX_LINKS_PER_PAGE`` URLs is sent on in parts.

    python benchmarks/sitemap_send.py --urls 50000            # RabbitMQ
    REDIS=1 python benchmarks/sitemap_send.py --urls 50000    # Redis

Parses a generated sitemap of ``--urls`` URLs, keeps those in scope, and claims and
sends them all with the crawler's own ``send_claimed`` (as one message would without
parts), on a RabbitMQ virtual host, a Redis and a Memcached of the benchmark's own
(``own_services``), which it empties after: never the user's.
Prints the seconds of each step.  Nothing is fetched.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring.workers import own_services
from crawler.frontier import claims
from crawler.frontier.scope import child_arguments, sitemap_links_to_follow
from crawler.links.sitemap_links import sitemap_links
from crawler.options import CrawlOptions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=50_000)
    urls = parser.parse_args().urls
    own_services()  # before the worker module reads the environment: the benchmark's services
    from crawler import example

    entries = b"".join(b"<url><loc>http://a.test/page/%d.html</loc></url>" % i for i in range(urls))
    body = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' + entries + b"</urlset>"
    options = CrawlOptions(crawl_id=uuid.uuid4().hex, sitemaps=True)
    started = time.monotonic()
    pages, maps = sitemap_links(body, "http://a.test/sitemap.xml", len(body))
    parsed = time.monotonic()
    links, _, _ = sitemap_links_to_follow("http://a.test/sitemap.xml", pages, maps, options, 2)
    scoped = time.monotonic()
    try:
        with example.stores.reserve() as client:
            sent = claims.send_claimed(
                client,
                example.crawl,
                str(uuid.uuid4()),
                links,
                child_arguments(-1, options.to_message(), via_public=False),
                options.crawl_id,
                example.lifetimes,
            )
        done = time.monotonic()
    finally:
        example.broker.flush_all()
    print(
        f"{urls} URLs: parsed in {parsed - started:.2f} s, scope {scoped - parsed:.2f} s,"
        f" {len(sent)} claimed and sent in {done - scoped:.2f} s"
        f" ({example.broker.__class__.__name__})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
