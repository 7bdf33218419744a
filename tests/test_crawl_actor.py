"""The real ``crawl`` actor on a StubBroker, against a real Memcached."""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any

import dramatiq
import pytest
from dramatiq import Message
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.brokers import QUEUE
from crawler.frontier import claims
from crawler.frontier.digests import owner_token
from crawler.options import CrawlOptions
from crawler.stores.memcached import MemcachedClient
from tests.site_server import Page, SiteServer, generate_site, html, page_path


def sent_urls(broker: StubBroker) -> list[str]:
    queue = broker.queues[QUEUE]
    messages = [Message.decode(queue.get_nowait()) for _ in range(queue.qsize())]
    assert all(message.actor_name == "crawl" for message in messages)
    return [message.args[0] for message in messages]


def test_crawl_sends_one_message_per_distinct_absolute_http_anchor(
    site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = html(
        "http://127.0.0.1:1/a.html",
        "https://127.0.0.1:1/b.html",
        "/relative.html",
        "other.html",
        "mailto:someone@example.invalid",
        "ftp://127.0.0.1:1/file",
        "http://127.0.0.1:1/a.html",
    )

    example.crawl(site.url("/"))

    assert sent_urls(stub_broker) == [
        "http://127.0.0.1:1/a.html",
        "https://127.0.0.1:1/b.html",
    ]


def test_crawl_ignores_anchors_not_written_the_upstream_way(
    site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = Page(
        b"<a href='http://127.0.0.1:1/single'>x</a>"
        b'<A HREF="http://127.0.0.1:1/upper">x</A>'
        b'<a class="c" href="http://127.0.0.1:1/attr">x</a>'
        b'<a href="http://127.0.0.1:1/plain">x</a>'
    )

    example.crawl(site.url("/"))

    assert sent_urls(stub_broker) == ["http://127.0.0.1:1/plain"]


def test_crawl_skips_a_page_that_is_not_html(
    site: SiteServer, stub_broker: StubBroker, caplog: pytest.LogCaptureFixture
) -> None:
    site.pages["/image.png"] = Page(
        b'<a href="http://127.0.0.1:1/a.html">', content_type="image/png"
    )
    url = site.url("/image.png")

    with caplog.at_level(logging.INFO, logger="example"):
        example.crawl(url)

    assert sent_urls(stub_broker) == []
    assert f"Skipping URL {url!r} since it's not HTML." in caplog.messages
    assert site.fetch_counts() == {"/image.png": 1}


def test_crawl_logs_the_upstream_lines(
    site: SiteServer, stub_broker: StubBroker, caplog: pytest.LogCaptureFixture
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html", "http://127.0.0.1:1/b.html", "/c.html")
    url = site.url("/")

    with caplog.at_level(logging.INFO, logger="example"):
        example.crawl(url)

    assert caplog.messages == [
        f"Crawling {url!r}...",
        f"Done crawling {url!r}. Found 2 anchors.",
    ]


def test_second_crawl_of_a_url_is_skipped_through_memcached(
    site: SiteServer,
    stub_broker: StubBroker,
    memcached: MemcachedClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html")
    url = site.url("/")

    with caplog.at_level(logging.INFO, logger="example"):
        example.crawl(url)
        example.crawl(url)

    assert site.fetch_counts() == {"/": 1}
    assert caplog.messages[-1] == f"URL {url!r} has already been visited. Skipping..."
    # Called as a function, the first crawl's message id holds the claim (no middleware
    # marks it done); the second call is another message, so it skips.
    assert memcached.get(hashlib.md5(url.encode()).hexdigest()) not in (None, b"")
    assert sent_urls(stub_broker) == ["http://127.0.0.1:1/a.html"]


def test_worker_crawls_a_whole_site_once_through_the_stub_broker(
    site: SiteServer, stub_broker: StubBroker, stub_worker: dramatiq.Worker
) -> None:
    site.pages.update(generate_site(site.base_url, pages=40, links_per_page=4))

    example.crawl.send(site.url(page_path(0)))
    stub_broker.join(QUEUE, fail_fast=True)
    stub_worker.join()

    assert site.fetch_counts() == {page_path(i): 1 for i in range(40)}


def test_a_retry_whose_url_another_message_took_still_sends_the_links_it_claimed_before(
    site: SiteServer,
    stub_broker: StubBroker,
    stub_worker: dramatiq.Worker,
    memcached: MemcachedClient,
) -> None:
    """A message's first attempt claimed its page's link, then failed before sending it;
    its own claim was lost since (a Memcached server died) and another message took its
    URL, crawled the page and found the link claimed.  The retry must send that link:
    no other message will, and its URL would never be crawled."""
    crawl_id, parent_id = uuid.uuid4().hex, "parent-retried"
    site.pages["/parent.html"] = html(site.url("/child.html"))
    site.pages["/child.html"] = html()
    parent, child = site.url("/parent.html"), site.url("/child.html")
    child_claim = owner_token(claims.child_message_id(parent_id, child))
    assert memcached.add(claims.url_hash(child, crawl_id), child_claim, time=60)
    taken = claims.claim(memcached, parent, "another-message", crawl_id, example.lifetimes)
    assert taken == claims.OWNED
    options = CrawlOptions(crawl_id=crawl_id).to_message()
    retry: Message[Any] = Message(
        queue_name=QUEUE, actor_name="crawl", args=(parent,), kwargs={"options": options},
        options={"retries": 1}, message_id=parent_id,
    )  # fmt: skip

    stub_broker.enqueue(retry)
    stub_broker.join(QUEUE, fail_fast=True)
    stub_worker.join()

    assert site.fetch_counts() == {"/parent.html": 1, "/child.html": 1}
