"""The GET behind ``crawl``: what ``fetching.fetch`` sends, as ``session.get`` would."""

from __future__ import annotations

import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler

import pytest

from crawler.environment import Limits
from crawler.fetching import new_session
from crawler.fetching.bounded_fetch import fetch, read_body, retry_after_ms
from tests.site_server import Page, SiteServer, send


@pytest.mark.parametrize("trust_env", [False, True], ids=["lean path", "requests' own path"])
def test_fetch_sends_headers_credentials_and_cookies_like_session_get(
    trust_env: bool,
) -> None:
    seen: list[dict[str, str]] = []

    def set_cookie(handler: BaseHTTPRequestHandler, nth: int) -> None:
        seen.append(dict(handler.headers))
        send(handler, Page(b"<html></html>"), Set_Cookie="visit=1; Path=/")

    def echo(handler: BaseHTTPRequestHandler, nth: int) -> None:
        seen.append(dict(handler.headers))
        send(handler, Page(b"<html>second</html>"))

    site = SiteServer(behaviors={"/first": set_cookie, "/second": echo}).start()
    try:
        session = new_session()
        session.trust_env = trust_env
        # the last URL carries credentials, which requests sends as basic auth
        with_credentials = site.url("/second").replace("://", "://user:pw@")
        for url in (site.url("/first"), site.url("/second"), with_credentials):
            response = fetch(session, url, Limits(), "test-agent/1", via_public=False)
            body = read_body(response, Limits())
            response.close()
        assert body == b"<html>second</html>"
    finally:
        site.stop()
    first, second, third = seen
    assert first["User-Agent"] == second["User-Agent"] == "test-agent/1"
    assert "gzip" in first["Accept-Encoding"] and first["Accept"] == "*/*"
    assert "Cookie" not in first and "Authorization" not in first
    assert third["Authorization"] == "Basic dXNlcjpwdw=="
    assert second["Cookie"] == "visit=1"
    assert session.cookies.get("visit") == "1"


def test_a_session_fetches_from_more_hosts_than_its_pool_manager_keeps_and_back_again() -> None:
    # requests' pool manager keeps 10 hosts' pools open and closes the oldest: the
    # adapter's own lookup must not hand back a closed one.
    sites = [SiteServer().start() for _ in range(12)]
    try:
        session = new_session()
        for site in [*sites, *sites[:3]]:
            site.pages["/"] = Page(b"<html>hi</html>", content_type="text/html; charset=latin-1")
            response = fetch(session, site.url("/"), Limits(), "test-agent/1", via_public=False)
            with response:
                assert read_body(response, Limits()) == b"<html>hi</html>"
            assert response.response.status_code == 200 and response.response.reason == "OK"
            assert response.response.url == site.url("/")
            assert response.response.encoding == "latin-1"
            assert response.response.headers["content-type"].startswith("text/html")
    finally:
        for site in sites:
            site.stop()
    assert len(sites[0].fetch_counts()) == 1 and sites[0].fetch_counts()["/"] == 2


def test_retry_after_is_read_in_seconds_or_as_an_http_date() -> None:
    """The one reading of ``Retry-After`` (the crawl's fetches and the browser's
    requests both): seconds, or the wait until an HTTP date; nothing else."""
    assert retry_after_ms(" 2 ") == 2000
    assert 8000 <= retry_after_ms(formatdate(time.time() + 10, usegmt=True)) <= 10_000  # type: ignore[operator]
    assert retry_after_ms(formatdate(time.time() - 60, usegmt=True)) == 0
    assert retry_after_ms("") is None
    assert retry_after_ms("soon") is None
