"""Bad inputs, from pages and from users, cost what they are and no more.

A malformed href loses that link, not its page; an invalid port or host name is
refused, not rewritten; a host that can never resolve is given up at once; a
robots.txt that drips is given up at the fetch deadline; and option values that
would fail every page are refused before anything is enqueued.  Each test asserts
what a user gets: the site's own request log, exit codes and the words printed.
"""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import prometheus_client
import pytest
import requests

from crawler.cli import crawl_flags
from crawler.environment import ACTOR_TIME_LIMIT, Limits
from crawler.errors import PermanentError, TransientError
from crawler.fetching import bounded_fetch, new_session
from crawler.frontier import politeness, scope
from crawler.links.canonical import canonical_url
from crawler.links.extraction import html_links
from crawler.options import CrawlOptions
from crawler.stores import memory
from crawler.stores.memory import MemoryClient
from tests import faults
from tests.site_server import Page, SiteServer, html
from tests.support import read_records, usage_error
from tests.workers import PROJECT_ROOT, environment, queued_messages, seed

#: Worker settings that keep these runs short; the defaults users get are untouched.
FAST = {"CRAWLER_MIN_BACKOFF_MS": "100", "CRAWLER_MAX_BACKOFF_MS": "400"}
LONG_LABEL = "a" * 64
LONG_HOST = ".".join(["a" * 50] * 5) + ".com"  # 258 characters


def crawl_locally(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m crawler.example --local ARGS``: the real actor, no service needed."""
    return subprocess.run(
        [sys.executable, "-m", "crawler.example", "--local", *args],
        cwd=PROJECT_ROOT,
        env=environment(**FAST, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def session() -> Iterator[requests.Session]:
    """A worker thread's session."""
    session = new_session()
    yield session
    session.close()


# Issue 12, item 3: one malformed href must not lose its page.


def test_links_to_follow_drops_a_malformed_link_with_its_reason_and_keeps_the_good_ones() -> None:
    anchors = [
        "http://h/a",
        "http://[::1",
        "http://h:99999/x",
        "http://H/a",
        "http://[::1",
        "http://h/b",
    ]

    links, dropped = scope.links_to_follow(anchors, CrawlOptions(), depth=0)

    assert links == ["http://h/a", "http://h/b"]
    assert dropped == [
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://h:99999/x", "Port out of range 0-65535"),
    ]


def test_html_links_resolve_every_href_on_its_own_so_a_malformed_one_reaches_the_scope() -> None:
    body = (
        b'<a href="//[::1">1</a><a href="a.html">2</a><a href="HTTP://[::1">3</a>'
        b'<a href="http://h:8080:80/x">4</a>'
    )

    assert html_links(body, "https://h/dir/page.html") == [
        "https://[::1",
        "https://h/dir/a.html",
        "http://[::1",
        "http://h:8080:80/x",
    ]


def test_a_malformed_base_href_is_ignored_as_browsers_do() -> None:
    body = b'<base href="//[::1"><a href="a.html">1</a>'

    assert html_links(body, "http://h/dir/page.html") == ["http://h/dir/a.html"]


def test_dropped_links_make_one_warning_line_per_page_and_count_in_the_metric(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def dropped_total() -> float:
        return prometheus_client.REGISTRY.get_sample_value("crawler_links_dropped_total") or 0.0

    _, dropped = scope.links_to_follow(
        ["http://[::1", "http://ok/", "http://h:0/"], CrawlOptions(), depth=0
    )
    before = dropped_total()

    with caplog.at_level(logging.WARNING, logger="crawler.frontier.scope"):
        count = scope.report_dropped("http://site/page", dropped)
        none = scope.report_dropped("http://site/other", [])

    assert (count, none) == (2, 0)
    assert dropped_total() - before == 2
    assert caplog.messages == [
        "Dropped 2 malformed link(s) on 'http://site/page': 'http://[::1' (Invalid IPv6 URL), "
        "'http://h:0/' (Port 0 is reserved: no server listens on it)."
    ]


def test_a_warning_names_the_first_few_dropped_links_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dropped = [scope.Dropped(f"http://[::{i}", "Invalid IPv6 URL") for i in range(8)]

    with caplog.at_level(logging.WARNING, logger="crawler.frontier.scope"):
        scope.report_dropped("http://site/", dropped)

    (message,) = caplog.messages
    assert message.startswith("Dropped 8 malformed link(s) on 'http://site/': 'http://[::0' ")
    assert message.endswith("'http://[::4' (Invalid IPv6 URL), and 3 more.")


@pytest.mark.parametrize(
    ("flags", "hrefs", "warning"),
    [
        (
            [],
            ["http://[::1", "http://127.0.0.1:99999/c.html", "http://127.0.0.1:0/d.html"],
            "'http://[::1' (Invalid IPv6 URL), "
            "'http://127.0.0.1:99999/c.html' (Port out of range 0-65535), "
            "'http://127.0.0.1:0/d.html' (Port 0 is reserved: no server listens on it).",
        ),
        (
            ["--follow-relative"],
            ["//[::1", "http://127.0.0.1:8080:80/x", "HTTP://" + LONG_LABEL + "/"],
            "'http://[::1' (Invalid IPv6 URL), 'http://127.0.0.1:8080:80/x' "
            "(Port could not be cast to integer value as '8080:80'), "
            f"'http://{LONG_LABEL}/' (Host name has a label of 64 characters, over 63).",
        ),
    ],
    ids=["upstream links", "follow-relative"],
)
def test_a_page_with_malformed_links_among_good_ones_is_crawled_once_with_all_its_good_links(
    flags: list[str], hrefs: list[str], warning: str, site: SiteServer, tmp_path: Path
) -> None:
    good = [site.url("/a.html"), site.url("/b.html"), site.url("/c.html")]
    site.pages["/"] = html(good[0], hrefs[0], good[1], hrefs[1], hrefs[2], good[2])
    for path in ("/a.html", "/b.html", "/c.html"):
        site.pages[path] = html()
    output = tmp_path / "records.jsonl"

    result = crawl_locally(site.url("/"), *flags, "--output", str(output))

    assert site.fetch_counts() == {"/": 1, "/a.html": 1, "/b.html": 1, "/c.html": 1}
    assert result.returncode == 0, result.stderr
    assert f"Dropped 3 malformed link(s) on {site.url('/')!r}: {warning}" in result.stderr
    assert ": 4 pages fetched" in result.stdout and "0 failed." in result.stdout
    dropped = {r["url"]: r.get("dropped_links") for r in read_records(output)}
    assert dropped == {site.url("/"): 3, **dict.fromkeys(good, None)}


# Item 4: invalid ports are refused, not rewritten; so are impossible host names.


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://h:99999/", "Port out of range 0-65535"),
        ("http://h:65536/a", "Port out of range 0-65535"),
        ("http://h:-1/", "Port could not be cast to integer value as '-1'"),
        ("http://h:8080:80/x", "Port could not be cast to integer value as '8080:80'"),
        ("http://h:0/", "Port 0 is reserved: no server listens on it"),
        ("HTTPS://H:0", "Port 0 is reserved: no server listens on it"),
    ],
)
def test_canonical_url_refuses_an_invalid_port_instead_of_dropping_it(
    url: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        canonical_url(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"http://{LONG_LABEL}/", "Host name has a label of 64 characters, over 63"),
        (f"HTTP://x.{LONG_LABEL.upper()}.com/", "Host name has a label of 64 characters, over 63"),
        (f"http://{LONG_HOST}/", "Host name of 258 characters, over 253"),
        (f"http://{LONG_HOST.upper()}:81/", "Host name of 258 characters, over 253"),
        ("http://a..b/", "Host name 'a..b' has an empty label"),
        ("http://.a/", "Host name '.a' has an empty label"),
        ("http://a.b../", "Host name 'a.b..' has an empty label"),
    ],
)
def test_canonical_url_refuses_a_host_name_that_can_never_be_valid(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        canonical_url(url)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://" + "a" * 63 + "/", "http://" + "a" * 63 + "/"),
        ("http://" + ".".join(["a" * 63] * 3 + ["b" * 61]) + "/x", None),
        ("http://h.example./", "http://h.example./"),
        ("http://h:65535/", "http://h:65535/"),
        ("HTTP://H:1", "http://h:1/"),
        ("http://h:/a", "http://h/a"),
        ("http://h_x.example/", "http://h_x.example/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
    ],
)
def test_canonical_url_keeps_valid_edge_cases(url: str, canonical: str | None) -> None:
    assert canonical_url(url) == (canonical or url)


# Item 8: the seeder refuses what could never be crawled, before it enqueues anything.


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--max-rate", "nan"], "argument --max-rate: 'nan' is not a number from 0.001 to 10000"),
        (["--max-rate", "inf"], "argument --max-rate: 'inf' is not a number from 0.001 to 10000"),
        (
            ["--max-rate", "1e309"],
            "argument --max-rate: '1e309' is not a number from 0.001 to 10000",
        ),
        (["--allow-domain", ""], "argument --allow-domain: '' is not a domain name"),
        (["--allow-domain", "a..b"], "argument --allow-domain: 'a..b' is not a domain name"),
        (
            ["--allow-domain", "example.com/docs"],
            "argument --allow-domain: 'example.com/docs' is not a domain name",
        ),
        (
            ["--allow-domain", "http://example.com"],
            "argument --allow-domain: 'http://example.com' is not a domain name",
        ),
        (
            ["--user-agent", "bot\r\nX-Evil: 1"],
            "argument --user-agent: 'bot\\r\\nX-Evil: 1' is not a header value: it has a line"
            " break or control character",
        ),
    ],
)
def test_seeder_refuses_an_option_value_that_would_fail_every_page_and_enqueues_nothing(
    args: list[str], reason: str, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env)

    result = seed(env, "http://127.0.0.1:1/", *args)

    assert result.returncode == 2
    assert usage_error(result.stderr) == f"python -m crawler.example: error: {reason}"
    assert queued_messages(env) == 0


def test_allow_domain_is_spelled_as_canonical_hosts_are() -> None:
    assert crawl_flags.domain_name("Bücher.DE.") == "xn--bcher-kva.de"
    assert crawl_flags.domain_name(" Example.com ") == "example.com"
    assert crawl_flags.domain_name("127.0.0.1") == "127.0.0.1"
    assert crawl_flags.domain_name("[::1]") == "::1"


# Item 8: a host that can never resolve, or never be asked for, is given up at once.


def test_a_host_that_does_not_resolve_is_a_permanent_error(session: requests.Session) -> None:
    with pytest.raises(PermanentError) as failure:
        bounded_fetch.fetch(
            session, "http://nonexistent.invalid/", Limits(), "test-agent", via_public=False
        )

    assert str(failure.value).startswith("the host name 'nonexistent.invalid' does not resolve")


def test_a_temporary_dns_failure_stays_transient(
    session: requests.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    def resolver_down(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", resolver_down)

    with pytest.raises(TransientError, match="Temporary failure in name resolution"):
        bounded_fetch.fetch(
            session, "http://dns-down.invalid/", Limits(), "test-agent", via_public=False
        )


def test_a_url_that_cannot_be_requested_is_a_permanent_error_of_one_line(
    session: requests.Session, site: SiteServer
) -> None:
    site.behaviors["/to-long-label"] = faults.redirect(f"http://{'a' * 300}/")
    site.behaviors["/to-malformed"] = faults.redirect("http://[::1")

    with pytest.raises(PermanentError) as long_label:
        bounded_fetch.fetch(
            session, f"http://{'a' * 300}.com/", Limits(), "test-agent", via_public=False
        )
    with pytest.raises(PermanentError) as redirected:
        bounded_fetch.fetch(
            session, site.url("/to-long-label"), Limits(), "test-agent", via_public=False
        )
    with pytest.raises(PermanentError) as malformed:
        bounded_fetch.fetch(
            session, site.url("/to-malformed"), Limits(), "test-agent", via_public=False
        )

    assert str(long_label.value).startswith(f"cannot request 'http://{'a' * 90}")
    assert "UnicodeError" in str(long_label.value) and "too long" in str(long_label.value)
    assert str(redirected.value) == (
        f"a redirect to a malformed URL 'http://{'a' * 90}...': "
        "Host name of 300 characters, over 253"
    )
    assert str(malformed.value) == "a redirect to a malformed URL 'http://[::1': Invalid IPv6 URL"
    assert all("\n" not in str(e.value) for e in (long_label, redirected, malformed))


def test_a_crawl_gives_up_at_once_on_hosts_that_cannot_resolve_or_be_requested(
    site: SiteServer,
) -> None:
    site.pages["/"] = html("http://nonexistent.invalid/", site.url("/jump"))
    site.behaviors["/jump"] = faults.redirect(f"http://{'a' * 300}/")

    result = crawl_locally(site.url("/"))

    assert result.returncode == 1
    assert site.fetch_counts() == {"/": 1, "/jump": 1}
    assert (
        "Giving up on URL 'http://nonexistent.invalid/': "
        "the host name 'nonexistent.invalid' does not resolve"
    ) in result.stderr
    assert (
        f"Giving up on URL {site.url('/jump')!r}: a redirect to a malformed URL 'http://aaa"
    ) in result.stderr
    assert "will be retried" not in result.stderr
    assert "Traceback" not in result.stderr
    assert "2 failed." in result.stdout


# Item 5: a slow robots.txt must not lose the host.


def test_a_dripping_robots_txt_is_unreachable_so_its_pages_wait_and_are_given_up_loudly(
    site: SiteServer,
) -> None:
    """RFC 9309 §2.3.1.4: a robots.txt that cannot be reached (here: cut at the fetch
    deadline) disallows the whole host until it answers; its pages are retried, then
    given up with the reason, never fetched against rules nobody could read."""
    held: list[float] = []
    site.behaviors["/robots.txt"] = faults.slow_drip(held, size=100, interval=2.0)
    site.pages["/"] = html(site.url("/1.html"))

    result = crawl_locally(
        site.url("/"), "--obey-robots", env={"CRAWLER_FETCH_DEADLINE": "1.5"}, timeout=90
    )

    assert "/" not in site.fetch_counts()
    assert result.returncode == 1, result.stderr
    assert (
        f"Could not reach {site.url('/robots.txt')} (the fetch took longer than 1.5s); "
        "its host's pages wait until it answers."
    ) in result.stderr
    assert f"Giving up on URL {site.url('/')!r} after 4 attempts" in result.stderr
    assert ": 0 pages fetched" in result.stdout and "1 failed." in result.stdout


def test_a_robots_txt_answering_503_then_200_holds_the_pages_until_it_answers(
    site: SiteServer,
) -> None:
    rules = Page(b"User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.behaviors["/robots.txt"] = faults.failing_then(rules, failures=1, fail=faults.status(503))
    site.pages["/"] = html(site.url("/1.html"), site.url("/private"))
    site.pages["/1.html"] = html()
    site.pages["/private"] = html()

    backoff = {"CRAWLER_LOCAL_MIN_BACKOFF_MS": "1100", "CRAWLER_LOCAL_MAX_BACKOFF_MS": "2000"}
    result = crawl_locally(site.url("/"), "--obey-robots", env=backoff, timeout=90)

    assert result.returncode == 0, result.stderr
    assert site.fetch_counts() == {"/robots.txt": 2, "/": 1, "/1.html": 1}
    first_page = min(r.time for r in site.requests if r.path == "/")
    assert all(r.time < first_page for r in site.requests if r.path == "/robots.txt")


def test_an_unreachable_robots_txt_is_remembered_briefly_with_one_warning(
    site: SiteServer, session: requests.Session, caplog: pytest.LogCaptureFixture
) -> None:
    site.behaviors["/robots.txt"] = faults.status(503)
    client = MemoryClient()

    with caplog.at_level(logging.INFO, logger="crawler.frontier.politeness"):
        for path in ("/page", "/other"):  # the second page asks the store, not the site
            with pytest.raises(TransientError, match="HTTP 503 Service Unavailable"):
                politeness.robots_for(
                    client, session, site.url(path), "test-agent", limits=Limits()
                )
    assert site.fetch_counts() == {"/robots.txt": 1}  # the second page asked the store
    key = politeness.robots_key(site.url("/"))
    expires = client._items[key][1]  # the store's own clock: remembered briefly, not an hour
    assert 0 < expires - memory._now() <= politeness.ROBOTS_UNREACHABLE_TTL
    assert caplog.messages == [
        f"Could not reach {site.url('/robots.txt')} (HTTP 503 Service Unavailable); "
        "its host's pages wait until it answers."
    ]


@pytest.mark.parametrize(("hops", "allowed"), [(5, False), (6, True)])
def test_robots_txt_is_followed_through_five_redirects_and_no_more(
    site: SiteServer, session: requests.Session, hops: int, allowed: bool
) -> None:
    """RFC 9309 §2.3.1.2: five redirects are followed; past them robots.txt counts as
    unavailable, which allows everything."""
    for hop in range(hops):
        following = f"/hop-{hop + 1}" if hop + 1 < hops else "/rules.txt"
        site.behaviors["/robots.txt" if hop == 0 else f"/hop-{hop}"] = faults.redirect(
            site.url(following)
        )
    site.pages["/rules.txt"] = Page(b"User-agent: *\nDisallow: /\n", content_type="text/plain")

    robots = politeness.robots_for(
        MemoryClient(), session, site.url("/"), "test-agent", limits=Limits()
    )

    assert robots.can_fetch(site.url("/page"), "test-agent") is allowed


def test_a_missing_robots_txt_allows_every_page_without_a_warning(
    site: SiteServer, session: requests.Session, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.politeness"):
        robots = politeness.robots_for(
            MemoryClient(), session, site.url("/page"), "test-agent", limits=Limits()
        )

    assert robots.can_fetch(site.url("/page"), "test-agent")
    assert site.fetch_counts() == {"/robots.txt": 1}
    assert caplog.messages == []


def test_a_huge_robots_txt_is_read_up_to_its_cap_as_google_does(
    site: SiteServer, session: requests.Session
) -> None:
    rules = b"User-agent: *\nDisallow: /private\n"
    filler = b"# " + b"x" * 1000 + b"\n"
    body = rules + filler * (politeness.ROBOTS_MAX_BYTES // len(filler) + 10)
    site.pages["/robots.txt"] = Page(body + b"Disallow: /too-late\n", content_type="text/plain")

    robots = politeness.robots_for(
        MemoryClient(), session, site.url("/"), "test-agent", limits=Limits()
    )

    assert not robots.can_fetch(site.url("/private"), "test-agent")
    assert robots.can_fetch(site.url("/too-late"), "test-agent")


def test_read_body_can_truncate_instead_of_failing(
    site: SiteServer, session: requests.Session
) -> None:
    site.pages["/big"] = Page(b"x" * 300_000, content_type="text/plain")
    limits = Limits(max_body_bytes=100_000)

    with bounded_fetch.fetch(
        session, site.url("/big"), Limits(), "test-agent", via_public=False
    ) as response:
        assert bounded_fetch.read_body(response, limits, truncate_at=1000) == b"x" * 1000
    with (
        bounded_fetch.fetch(
            session, site.url("/big"), Limits(), "test-agent", via_public=False
        ) as response,
        pytest.raises(PermanentError, match="over 100000 bytes"),
    ):
        bounded_fetch.read_body(response, limits)


def test_waiting_for_another_workers_robots_txt_ends_soon_after_the_fetch_deadline(
    site: SiteServer, session: requests.Session
) -> None:
    limits = Limits(fetch_deadline=1.0)
    client = MemoryClient()
    # Another worker took the lock and died before it stored the rules.
    client.add(politeness.robots_key(site.url("/")) + ":lock", 1, time=60)

    started = time.monotonic()
    politeness.robots_for(client, session, site.url("/"), "test-agent", limits=limits)
    waited = time.monotonic() - started

    assert limits.fetch_deadline <= waited < limits.fetch_deadline + 1.5
    assert politeness.robots_wait(Limits(fetch_deadline=9.9)) < ACTOR_TIME_LIMIT
