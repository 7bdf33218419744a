"""The network guard: no link from a public page leads to a private address, not even
through a name that answers otherwise on its next look-up, and whether a fetch was
public belongs to that fetch alone, never to the next message.

No public host can be reached here: 127.0.0.2 plays one (``public_addresses``), a site
of its own listens there (``public_site``), and 127.0.0.1 stays loopback."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

import dramatiq
import pytest
from dramatiq import Message
from dramatiq.brokers.stub import StubBroker
from urllib3.util.connection import HAS_IPV6

from crawler import example
from crawler.brokers import QUEUE
from crawler.environment import Limits
from crawler.errors import PermanentError
from crawler.fetching import bounded_fetch, network_guard, new_session
from crawler.options import CrawlOptions
from tests import faults
from tests.site_server import Page, SiteServer, html, send

#: The loopback address that plays a public one.
PUBLIC = "127.0.0.2"
#: A name whose answers each test sets (``Resolver``).
REBINDING_HOST = "rebind.test"


@pytest.fixture
def public_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    """127.0.0.2 counts as a global address; every other address as it really is."""
    is_global_address = network_guard.is_global_address
    monkeypatch.setattr(
        network_guard,
        "is_global_address",
        lambda address: address == PUBLIC or is_global_address(address),
    )


@pytest.fixture
def public_site(public_addresses: None) -> Iterator[SiteServer]:
    server = SiteServer(host=PUBLIC).start()
    yield server
    server.stop()


@pytest.fixture
def sites_on_one_port(public_addresses: None) -> Iterator[tuple[SiteServer, SiteServer]]:
    """A public site and a loopback one on the same port: one URL reaches either,
    whichever address its name resolves to."""
    for _attempt in range(5):
        public = SiteServer(host=PUBLIC).start()
        try:
            loopback = SiteServer(port=urlsplit(public.base_url).port or 0).start()
        except OSError:  # that port is taken on 127.0.0.1: try another one
            public.stop()
            continue
        break
    else:
        pytest.fail("no port free on both loopback addresses")
    yield public, loopback
    public.stop()
    loopback.stop()


class Resolver:
    """``socket.getaddrinfo``, but the name ``REBINDING_HOST`` answers each of
    ``answers`` in turn, one address per look-up, and the last one from then on.

    Parameters:
      answers(str): The addresses, in the order the look-ups get them.
    """

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked = 0
        self._getaddrinfo = socket.getaddrinfo

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host != REBINDING_HOST:
            return self._getaddrinfo(host, port, *args, **kwargs)
        self.asked += 1
        address = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    """The rebinding name answers the public address first, loopback from then on."""
    resolver = Resolver(PUBLIC, "127.0.0.1")
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return resolver


def rebinding_url(site: SiteServer, path: str) -> str:
    return site.url(path).replace(PUBLIC, REBINDING_HOST)


def sent_kwargs(stub_broker: StubBroker) -> list[dict[str, Any]]:
    queue = stub_broker.queues[QUEUE]
    return [Message.decode(queue.get_nowait()).kwargs for _ in range(queue.qsize())]


def test_a_link_from_a_public_page_to_a_private_address_is_refused(
    site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = html()

    with pytest.raises(PermanentError, match="refusing to follow a link from a public address"):
        example.crawl(site.url("/"), via_public=True)

    assert site.fetch_counts() == {}


def test_a_name_that_answers_loopback_on_its_next_look_up_gets_no_request_through_to_it(
    sites_on_one_port: tuple[SiteServer, SiteServer],
    stub_broker: StubBroker,
    resolver: Resolver,
) -> None:
    # A name checked on one look-up and connected to on the next could be sent to
    # loopback in between (DNS rebinding): the connection goes where the check looked.
    public, loopback = sites_on_one_port
    public.pages["/page"] = html()

    example.crawl(rebinding_url(public, "/page"), via_public=True)

    assert public.fetch_counts() == {"/page": 1}
    assert loopback.fetch_counts() == {}
    assert resolver.asked == 1


def test_a_new_connection_asks_the_resolver_again_and_is_refused_once_it_answers_loopback(
    sites_on_one_port: tuple[SiteServer, SiteServer],
    stub_broker: StubBroker,
    resolver: Resolver,
) -> None:
    public, loopback = sites_on_one_port

    def closing(handler: BaseHTTPRequestHandler, nth: int) -> None:
        send(handler, html(), Connection="close")  # the next request needs a new connection

    public.behaviors["/first"] = closing
    public.pages["/second"] = html()

    example.crawl(rebinding_url(public, "/first"), via_public=True)
    with pytest.raises(PermanentError, match=r"to rebind\.test, which is not public"):
        example.crawl(rebinding_url(public, "/second"), via_public=True)

    assert public.fetch_counts() == {"/first": 1}
    assert loopback.fetch_counts() == {}
    assert resolver.asked == 2


def test_a_keep_alive_connection_stays_with_the_address_it_was_opened_to(
    sites_on_one_port: tuple[SiteServer, SiteServer],
    stub_broker: StubBroker,
    resolver: Resolver,
) -> None:
    public, loopback = sites_on_one_port
    public.pages["/first"] = html()
    public.pages["/second"] = html()

    example.crawl(rebinding_url(public, "/first"), via_public=True)
    example.crawl(rebinding_url(public, "/second"), via_public=True)

    assert public.fetch_counts() == {"/first": 1, "/second": 1}
    assert loopback.fetch_counts() == {}
    assert resolver.asked == 1


def test_requests_own_path_for_the_environment_connects_where_it_checked_too(
    sites_on_one_port: tuple[SiteServer, SiteServer],
    monkeypatch: pytest.MonkeyPatch,
    resolver: Resolver,
) -> None:
    for name in [name for name in os.environ if "proxy" in name.lower()]:
        monkeypatch.delenv(name)
    public, loopback = sites_on_one_port
    public.pages["/page"] = html()
    session = new_session()
    session.trust_env = True  # as with a netrc file: requests prepares the request

    try:
        with bounded_fetch.fetch(
            session, rebinding_url(public, "/page"), Limits(), "test-agent", via_public=True
        ) as fetched:
            assert fetched.public is True
    finally:
        session.close()

    assert public.fetch_counts() == {"/page": 1}
    assert loopback.fetch_counts() == {}
    assert resolver.asked == 1


#: Without IPv6 a connection looks up IPv4 addresses only (as urllib3 does): an IPv6 host
#: then fails as a name that does not resolve, unsent all the same but in other words.
_NEEDS_IPV6 = pytest.mark.skipif(not HAS_IPV6, reason="no IPv6 on this system")


@pytest.mark.parametrize(
    "host",
    [
        "2130706433",
        "0177.0.0.1",
        "0x7f000001",
        "0.0.0.0",
        pytest.param("[::ffff:127.0.0.1]", marks=_NEEDS_IPV6),
        pytest.param("[::127.0.0.1]", marks=_NEEDS_IPV6),
    ],
)
def test_a_link_from_a_public_page_to_loopback_spelt_otherwise_is_refused(
    host: str, site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = html()

    with pytest.raises(PermanentError, match="which is not public"):
        example.crawl(site.url("/").replace("127.0.0.1", host), via_public=True)

    assert site.fetch_counts() == {}


@pytest.mark.parametrize(
    ("address", "is_global"),
    [
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
        ("::ffff:8.8.8.8", True),
        ("127.0.0.1", False),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fe80::1%1", False),
        ("fc00::1", False),
        ("fd12:3456::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("::127.0.0.1", False),
        ("::10.0.0.1", False),
        ("2002:7f00:1::1", False),
        ("2002:a00:1::1", False),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo, client 192.0.2.45
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),  # Teredo, client 127.0.0.1
        ("64:ff9b::7f00:1", False),  # NAT64 to 127.0.0.1
    ],
)
def test_an_address_is_global_only_with_every_ipv4_address_it_embeds(
    address: str, is_global: bool
) -> None:
    assert network_guard.is_global_address(address) is is_global


def test_a_redirect_from_a_public_host_to_a_private_address_is_refused(
    public_site: SiteServer, site: SiteServer, stub_broker: StubBroker
) -> None:
    public_site.behaviors["/jump"] = faults.redirect(site.url("/inside"))
    site.pages["/inside"] = html()

    with pytest.raises(PermanentError, match=r"to 127\.0\.0\.1, which is not public"):
        example.crawl(public_site.url("/jump"))

    assert public_site.fetch_counts() == {"/jump": 1}
    assert site.fetch_counts() == {}


def test_an_https_link_from_a_public_page_to_a_private_address_is_refused_before_connecting(
    public_addresses: None,
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    session = new_session()
    try:
        with pytest.raises(network_guard.PrivateAddress, match=r"to 127\.0\.0\.1, which is not"):
            bounded_fetch.fetch(
                session,
                f"https://127.0.0.1:{listener.getsockname()[1]}/",
                Limits(),
                "test-agent",
                via_public=True,
            )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing connected
    finally:
        session.close()
        listener.close()


def test_behind_a_proxy_a_private_name_is_refused_before_the_proxy_is_asked(
    public_addresses: None,
) -> None:
    proxy = socket.create_server(("127.0.0.1", 0))
    session = new_session()
    session.proxies = {"http": f"http://127.0.0.1:{proxy.getsockname()[1]}"}
    try:
        with pytest.raises(network_guard.PrivateAddress, match=r"to 10\.0\.0\.7, which is not"):
            bounded_fetch.fetch(
                session, "http://10.0.0.7/", Limits(), "test-agent", via_public=True
            )
        proxy.setblocking(False)
        with pytest.raises(BlockingIOError):
            proxy.accept()
    finally:
        session.close()
        proxy.close()


def test_a_crawl_seeded_on_a_private_address_fetches_there_and_its_links_may_stay_inside(
    site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = html(site.url("/next"))

    example.crawl(site.url("/"))

    assert site.fetch_counts() == {"/": 1}
    assert sent_kwargs(stub_broker) == [{"depth": 1}]  # no via_public: may stay inside


def test_links_from_a_page_on_a_public_address_are_sent_as_from_a_public_page(
    public_site: SiteServer, stub_broker: StubBroker
) -> None:
    public_site.pages["/"] = html(public_site.url("/next"))

    example.crawl(public_site.url("/"))

    assert public_site.fetch_counts() == {"/": 1}
    assert sent_kwargs(stub_broker) == [{"depth": 1, "via_public": True}]


def test_a_public_crawl_on_a_worker_thread_does_not_refuse_the_next_crawls_intranet_robots_txt(
    public_site: SiteServer, site: SiteServer, stub_broker: StubBroker
) -> None:
    public_site.pages["/public.html"] = html()
    site.pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", "text/plain")
    site.pages["/intranet.html"] = html()
    intranet = CrawlOptions(crawl_id="intranet", obey_robots=True).to_message()
    one_thread = dramatiq.Worker(stub_broker, worker_timeout=100, worker_threads=1)
    one_thread.start()
    try:
        example.crawl.send(public_site.url("/public.html"))
        stub_broker.join(example.crawl.queue_name)
        one_thread.join()
        example.crawl.send_with_options(
            args=(site.url("/intranet.html"),), kwargs={"options": intranet}
        )
        stub_broker.join(example.crawl.queue_name, fail_fast=True)
        one_thread.join()
    finally:
        one_thread.stop()

    assert public_site.fetch_counts() == {"/public.html": 1}
    assert site.fetch_counts() == {"/robots.txt": 1, "/intranet.html": 1}
    assert stub_broker.dead_letters == []


def test_a_name_is_looked_up_afresh_each_time_it_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[object] = [
        OSError("temporary DNS failure"),
        [(2, 1, 6, "", ("8.8.8.8", 0))],
        [(2, 1, 6, "", ("10.0.0.7", 0))],
    ]

    def getaddrinfo(*args: object, **kwargs: object) -> object:
        answer = answers.pop(0)
        if isinstance(answer, OSError):
            raise answer
        return answer

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    url = "http://flaky-dns.intranet.test/"

    assert network_guard.check_hop(url, True) is True  # unresolvable: the fetch says why
    assert network_guard.check_hop(url, True) is True  # asked again, and public
    with pytest.raises(PermanentError, match=r"to flaky-dns\.intranet\.test, which is not public"):
        network_guard.check_hop(url, True)  # asked again: no answer is remembered
