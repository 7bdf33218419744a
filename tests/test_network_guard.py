"""The network guard: no link from a public page leads to a private address, and
whether a fetch was public belongs to that fetch alone, never to the next message."""

from __future__ import annotations

import socket

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.errors import PermanentError
from crawler.fetching import network_guard
from crawler.options import CrawlOptions
from tests import faults
from tests.site_server import Page, SiteServer, html


def test_a_link_from_a_public_page_to_a_private_address_is_refused(
    site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = html()

    with pytest.raises(PermanentError, match="refusing to follow a link from a public address"):
        example.crawl(site.url("/"), via_public=True)

    assert site.fetch_counts() == {}


def test_a_redirect_from_a_public_host_to_a_private_address_is_refused(
    site: SiteServer, stub_broker: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No public host can be reached here: "localhost" plays one, 127.0.0.1 stays private.
    monkeypatch.setattr(network_guard, "is_public", lambda host: host == "localhost")
    site.behaviors["/jump"] = faults.redirect(site.url("/inside"))
    site.pages["/inside"] = html()

    with pytest.raises(PermanentError, match=r"to 127\.0\.0\.1, which is not public"):
        example.crawl(site.url("/jump").replace("127.0.0.1", "localhost"))

    assert site.fetch_counts() == {"/jump": 1}


def test_a_public_crawl_on_a_worker_thread_does_not_refuse_the_next_crawls_intranet_robots_txt(
    site: SiteServer, stub_broker: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "localhost" plays a public host; 127.0.0.1 is an intranet crawl's own address.
    monkeypatch.setattr(network_guard, "is_public", lambda host: host == "localhost")
    site.pages["/public.html"] = html()
    site.pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", "text/plain")
    site.pages["/intranet.html"] = html()
    intranet = CrawlOptions(crawl_id="intranet", obey_robots=True).to_message()
    one_thread = dramatiq.Worker(stub_broker, worker_timeout=100, worker_threads=1)
    one_thread.start()
    try:
        example.crawl.send(site.url("/public.html").replace("127.0.0.1", "localhost"))
        stub_broker.join(example.crawl.queue_name)
        one_thread.join()
        example.crawl.send_with_options(
            args=(site.url("/intranet.html"),), kwargs={"options": intranet}
        )
        stub_broker.join(example.crawl.queue_name, fail_fast=True)
        one_thread.join()
    finally:
        one_thread.stop()

    assert site.fetch_counts() == {"/public.html": 1, "/robots.txt": 1, "/intranet.html": 1}
    assert stub_broker.dead_letters == []


def test_a_failed_lookup_is_not_remembered_as_public(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[object] = [OSError("temporary DNS failure"), [(2, 1, 6, "", ("10.0.0.7", 0))]]

    def getaddrinfo(host: str, port: object) -> object:
        answer = answers.pop(0)
        if isinstance(answer, OSError):
            raise answer
        return answer

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    host = "flaky-dns.intranet.test"

    assert network_guard.is_public(host) is True  # unresolvable: the fetch says why
    assert network_guard.is_public(host) is False  # the next lookup is asked again
