"""One crawl of a site full of faults, on each broker, by real worker processes.

The crawl runs once per broker; each test then checks one scenario against the
test server's own request log and the workers' log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import faults
from tests.site_server import Page, SiteServer, html
from tests.support import FAST_FAILURES, clean_broker, clean_memcached
from tests.workers import WorkerProcesses, dead_letters, environment, queued_messages, seed

MAX_LINKS = 20
ATTEMPTS = 4  # the first try and max_retries=3 retries
DEADLINE = float(FAST_FAILURES["CRAWLER_FETCH_DEADLINE"])
HUB_PAGES = 20


@dataclass
class Crawl:
    site: SiteServer
    workers: WorkerProcesses
    blackhole: str
    queued_after: int = 0
    dead_lettered: int = 0
    drip_held: list[float] = field(default_factory=list)
    endless_sent: list[int] = field(default_factory=list)
    announced_sent: list[int] = field(default_factory=list)

    def fetches(self) -> Counter[str]:
        return self.site.fetch_counts()

    def logged(self, text: str) -> list[str]:
        return [line for line in self.workers.lines if text in line]


def build_site(crawl: Crawl) -> list[str]:
    """Fill the site; return every URL the crawl is expected to claim."""
    site, url = crawl.site, crawl.site.url
    pages, behaviors = site.pages, site.behaviors
    behaviors["/reset.html"] = faults.reset_then(html(url("/reset-child.html")))
    behaviors["/unavailable-once.html"] = faults.failing_then(
        html(url("/unavailable-child.html")), failures=1, fail=faults.status(503)
    )
    behaviors["/unavailable.html"] = faults.status(503)
    behaviors["/too-many.html"] = faults.failing_then(
        html(), failures=1, fail=faults.status(429, Retry_After="1")
    )
    behaviors["/drip.html"] = faults.slow_drip(crawl.drip_held)
    behaviors["/endless.html"] = faults.endless_body(crawl.endless_sent)
    behaviors["/announced.html"] = faults.endless_body(
        crawl.announced_sent, announce=50 * 1024 * 1024
    )
    faults.gzip_bomb_body()  # compressed before the crawl, not while a fetch waits
    behaviors["/bomb.html"] = faults.gzip_bomb
    behaviors["/loop-a.html"] = faults.redirect(url("/loop-b.html"))
    behaviors["/loop-b.html"] = faults.redirect(url("/loop-a.html"))
    behaviors["/to-ftp.html"] = faults.redirect("ftp://127.0.0.1:1/file")
    behaviors["/to-page.html"] = faults.redirect(url("/redirected.html"))
    pages["/redirected.html"] = html()
    pages["/bad-utf8.html"] = Page(
        b'<a href="' + url("/caf\xe9.html").encode("latin-1") + b'">x</a>\n'
        b'<a href="' + url("/after-bad-utf8.html").encode() + b'">y</a>\n'
    )
    pages["/caf%E9.html"] = html()
    pages["/after-bad-utf8.html"] = html()
    pages["/entity.html"] = html(url("/query.html?a=1&amp;b=2"))
    pages["/query.html?a=1&b=2"] = html()
    pages["/fragments.html"] = html(url("/frag.html#one"), url("/frag.html#two"), url("/frag.html"))
    pages["/frag.html"] = html()
    pages["/upper-type.html"] = Page(
        html(url("/upper-child.html")).body, content_type="TEXT/HTML; Charset=UTF-8"
    )
    pages["/image.png"] = Page(html(url("/behind-image.html")).body, content_type="image/png")
    pages["/many-links.html"] = html(*(url(f"/many/{i}.html") for i in range(MAX_LINKS + 10)))
    for i in range(MAX_LINKS + 10):
        pages[f"/many/{i}.html"] = html()
    for i in range(HUB_PAGES):
        pages[f"/hub/{i}.html"] = html(url("/hub.html"), url(f"/hub/{(i + 1) % HUB_PAGES}.html"))
    pages["/hub.html"] = html(*(url(f"/hub/{i}.html") for i in range(HUB_PAGES)))
    for child in ("/reset-child.html", "/unavailable-child.html"):
        pages[child] = html()

    entries = [
        "/reset.html", "/unavailable-once.html", "/unavailable.html", "/too-many.html",
        "/missing.html", "/drip.html", "/endless.html", "/announced.html", "/bomb.html",
        "/loop-a.html", "/to-ftp.html", "/to-page.html", "/bad-utf8.html", "/entity.html",
        "/fragments.html", "/upper-type.html", "/image.png", "/many-links.html", "/hub/0.html",
    ]  # fmt: skip
    pages["/"] = html(*(url(path) for path in entries), crawl.blackhole)
    claimed = [
        "/", *entries, "/reset-child.html", "/unavailable-child.html", "/caf%E9.html",
        "/after-bad-utf8.html", "/query.html?a=1&b=2", "/frag.html", "/upper-child.html",
        "/hub.html", *(f"/hub/{i}.html" for i in range(1, HUB_PAGES)),
        *(f"/many/{i}.html" for i in range(MAX_LINKS)),
    ]  # fmt: skip
    return [url(path) for path in claimed] + [crawl.blackhole]


@pytest.fixture(
    scope="module",
    params=[("rabbitmq", "memcached"), ("redis", "memcached"), ("redis", "redis")],
    ids=["rabbitmq", "redis", "redis-with-redis-store"],
)
def crawl(request: pytest.FixtureRequest) -> Iterator[Crawl]:
    broker, store = request.param
    dedup_env = {}
    if store == "redis":  # DEDUP_URL: retries, deliveries and dead letters on Redis
        server = request.getfixturevalue("own_redis_store")
        server.flush()
        dedup_env["DEDUP_URL"] = server.url
    site = SiteServer().start()
    with (
        faults.unanswered_port() as port,
        clean_memcached(),
        clean_broker(broker) as broker_env,
    ):
        env = environment(
            **broker_env, **dedup_env, **FAST_FAILURES, CRAWLER_MAX_LINKS_PER_PAGE=str(MAX_LINKS)
        )
        workers = WorkerProcesses(env, processes=1, threads=8)
        crawl = Crawl(site, workers, blackhole=f"http://127.0.0.1:{port}/never.html")
        claimed = build_site(crawl)
        try:
            assert seed(env, site.url("/")).returncode == 0
            finals = ("Done crawling", "Skipping URL", "Giving up on URL", "answered HTTP 4")
            workers.wait_until(lambda: sum(map(workers.count, finals)) == len(claimed), timeout=90)
        finally:
            assert workers.stop() == 0
        crawl.queued_after = queued_messages(env)
        crawl.dead_lettered = dead_letters(env)
        yield crawl
    site.stop()


def test_every_message_ends_and_the_failed_ones_are_dead_lettered(crawl: Crawl) -> None:
    assert crawl.queued_after == 0
    assert crawl.dead_lettered == len(crawl.logged("Giving up on URL"))
    assert crawl.workers.tracebacks() == []


def test_connection_reset_then_200_is_retried_and_its_links_followed(crawl: Crawl) -> None:
    assert crawl.fetches()["/reset.html"] == 2
    assert crawl.fetches()["/reset-child.html"] == 1
    assert crawl.logged("Attempt 1 of 4 at URL") and crawl.logged("ConnectionError")


def test_503_then_200_is_retried_and_its_links_followed(crawl: Crawl) -> None:
    assert crawl.fetches()["/unavailable-once.html"] == 2
    assert crawl.fetches()["/unavailable-child.html"] == 1


def test_503_every_time_is_retried_then_given_up_with_a_reason(crawl: Crawl) -> None:
    url = crawl.site.url("/unavailable.html")

    assert crawl.fetches()["/unavailable.html"] == ATTEMPTS
    assert crawl.logged(
        f"Giving up on URL {url!r} after {ATTEMPTS} attempts: HTTP 503 Service Unavailable."
    )


def test_429_is_retried_after_the_servers_retry_after(crawl: Crawl) -> None:
    times = [r.time for r in crawl.site.requests if r.path == "/too-many.html"]

    assert len(times) == 2
    assert times[1] - times[0] >= 1.0


def test_404_is_an_answer_neither_retried_nor_given_up(crawl: Crawl) -> None:
    url = crawl.site.url("/missing.html")

    assert crawl.fetches()["/missing.html"] == 1
    assert crawl.logged(f"URL {url!r} answered HTTP 404 Not Found.")
    assert not crawl.logged(f"Giving up on URL {url!r}")  # not dead-lettered


def test_slow_drip_is_cut_at_the_fetch_deadline_every_attempt(crawl: Crawl) -> None:
    assert crawl.fetches()["/drip.html"] == ATTEMPTS
    assert len(crawl.drip_held) == ATTEMPTS
    assert max(crawl.drip_held) < DEADLINE + 1.0
    assert crawl.logged(f"the fetch took longer than {DEADLINE:g}s")


def test_a_connect_that_never_answers_times_out_and_is_given_up(crawl: Crawl) -> None:
    assert crawl.logged(f"Giving up on URL {crawl.blackhole!r} after {ATTEMPTS} attempts")
    assert crawl.logged("ConnectTimeout")


def test_an_endless_body_is_cut_at_the_size_cap(crawl: Crawl) -> None:
    assert crawl.fetches()["/endless.html"] == 1
    assert crawl.logged("/endless.html': the body is over 10485760 bytes.")
    # The crawler hung up at the cap: the site's writes failed before the body's end.
    # Until the crawler closes the connection the kernel takes more of it into the
    # crawler's receive buffer and the site's send buffer (up to their autotuned
    # maxima: 32 and 4 MiB here, so a fixed 20 MiB failed once in CI, 22.7 MiB sent).
    hung_up_within = 10 * 1024 * 1024 + _socket_buffers_max() + 65536
    assert hung_up_within < faults.ENDLESS  # else this could not fail
    assert max(crawl.endless_sent) < hung_up_within


def _socket_buffers_max() -> int:
    """The most the kernel buffers of one loopback TCP stream: the receiver's buffer
    at its largest and the sender's."""
    receive = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    send = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    return receive + send


def test_a_50_mib_body_announced_by_its_length_is_refused_unread(crawl: Crawl) -> None:
    assert crawl.fetches()["/announced.html"] == 1
    assert crawl.logged("the body of 52428800 bytes is over 10485760")
    assert max(crawl.announced_sent) < 20 * 1024 * 1024


def test_a_gzip_bomb_is_cut_at_the_decompressed_size_cap(crawl: Crawl) -> None:
    assert crawl.fetches()["/bomb.html"] == 1
    assert crawl.logged("/bomb.html': the body is over 10485760 bytes.")


def test_a_redirect_loop_is_given_up_without_retrying(crawl: Crawl) -> None:
    loop_fetches = crawl.fetches()["/loop-a.html"] + crawl.fetches()["/loop-b.html"]

    assert 2 <= loop_fetches <= 31  # one attempt: requests follows at most 30 redirects
    assert crawl.logged("/loop-a.html': TooManyRedirects")


def test_a_redirect_to_another_scheme_is_given_up_without_retrying(crawl: Crawl) -> None:
    assert crawl.fetches()["/to-ftp.html"] == 1
    assert crawl.logged("/to-ftp.html': InvalidSchema")


def test_a_redirect_within_http_is_followed(crawl: Crawl) -> None:
    assert crawl.fetches()["/to-page.html"] == 1
    assert crawl.fetches()["/redirected.html"] == 1


def test_a_non_utf8_href_is_percent_encoded_and_the_page_goes_on(crawl: Crawl) -> None:
    assert crawl.fetches()["/caf%E9.html"] == 1
    assert crawl.fetches()["/after-bad-utf8.html"] == 1


def test_an_entity_in_an_href_is_decoded(crawl: Crawl) -> None:
    assert crawl.fetches()["/query.html?a=1&b=2"] == 1


def test_links_differing_only_in_fragment_are_one_page(crawl: Crawl) -> None:
    assert crawl.fetches()["/frag.html"] == 1


def test_content_type_is_compared_case_insensitively(crawl: Crawl) -> None:
    assert crawl.fetches()["/upper-child.html"] == 1


def test_a_page_that_is_not_html_is_skipped_unparsed(crawl: Crawl) -> None:
    assert crawl.fetches()["/image.png"] == 1
    assert crawl.fetches()["/behind-image.html"] == 0


def test_links_taken_from_one_page_are_capped(crawl: Crawl) -> None:
    many = {path for path in crawl.fetches() if path.startswith("/many/")}

    assert many == {f"/many/{i}.html" for i in range(MAX_LINKS)}
    assert crawl.logged(f"Taking only the first {MAX_LINKS} links of")


def test_a_page_every_page_links_to_enters_the_queue_once(crawl: Crawl) -> None:
    assert crawl.fetches()["/hub.html"] == 1
    assert all(crawl.fetches()[f"/hub/{i}.html"] == 1 for i in range(HUB_PAGES))
    # Claimed when sent: one message per unique URL, no duplicates to skip.
    assert crawl.workers.count("already been visited") == 0


def test_every_healthy_page_is_fetched_exactly_once(crawl: Crawl) -> None:
    retried = {"/reset.html", "/unavailable-once.html", "/unavailable.html", "/too-many.html"}
    retried |= {"/drip.html", "/loop-a.html", "/loop-b.html"}
    fetched_more = {path for path, n in crawl.fetches().items() if n > 1}

    assert fetched_more <= retried
