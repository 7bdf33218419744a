"""Nothing crosses crawls: a cookie one crawl's site set, or a header one crawl sends,
never reaches another crawl's requests, even on the one worker thread both use; and a
crawl keeps its own cookies (``--cookies off``: none)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crawler.fetching.sessions import NoCookies, Sessions
from crawler.options import CrawlOptions
from tests.site_server import Page, SiteServer, html
from tests.support import FAST_FAILURES
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

SECRET = "session=tenantA-secret"


def tenant_site(site: SiteServer) -> str:
    """A seed that sets a cookie and links to a page that shows what it got back."""
    base = site.base_url
    site.pages["/a/0.html"] = Page(
        html(f"{base}/a/1.html").body, headers=(("Set-Cookie", f"{SECRET}; Path=/"),)
    )
    site.pages["/a/1.html"] = html()
    site.pages["/b/0.html"] = html(f"{base}/b/1.html")
    site.pages["/b/1.html"] = html()
    return base


def headers_of(site: SiteServer, prefix: str) -> list[dict[str, str]]:
    return [request.headers for request in site.requests if request.path.startswith(prefix)]


def check_isolated(site: SiteServer) -> None:
    a, b = headers_of(site, "/a/1"), headers_of(site, "/b/")
    assert a[0].get("cookie") == SECRET  # a crawl keeps its own cookies
    assert all(h.get("x-tenant") == "A" for h in headers_of(site, "/a/"))
    assert len(b) == 2 and all("cookie" not in h and "x-tenant" not in h for h in b)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_one_worker_thread_keeps_each_crawl_s_cookies_and_headers_to_it(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest
) -> None:
    base = tenant_site(site)
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    workers = WorkerProcesses(env, processes=1, threads=1)
    try:
        # robots.txt too: the first crawl's, fetched with its header, is not the second's.
        first = seed(env, f"{base}/a/0.html", "--wait", "--obey-robots", "--header", "X-Tenant: A")
        second = seed(env, f"{base}/b/0.html", "--wait", "--obey-robots")
        off = seed(env, f"{base}/a/0.html", "--wait", "--cookies", "off", "--header", "X-Tenant: A")
    finally:
        assert workers.stop() == 0
    for done in (first, second, off):
        assert done.returncode == 0, done.stderr[-2000:]
    check_isolated(site)
    assert [h.get("cookie") for h in headers_of(site, "/a/1")] == [SECRET, None]
    assert [h.get("x-tenant") for h in headers_of(site, "/robots.txt")] == ["A", None]


#: Crawls from code, one after another in one process of their own (as a host program
#: runs them): each ``(url, options)`` of argv's JSON, and the exit statuses printed.
CRAWLS_FROM_CODE = """
import json, sys
from crawler import Crawl
crawls = json.loads(sys.argv[1])
print(json.dumps([Crawl([url], threads=1, **options).run() for url, options in crawls]))
"""


def crawls_from_code(*crawls: tuple[str, dict[str, object]]) -> list[int]:
    command = [sys.executable, "-c", CRAWLS_FROM_CODE, json.dumps(crawls)]
    ran = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    statuses: list[int] = json.loads(ran.stdout.splitlines()[-1])
    return statuses


def test_crawls_one_after_another_in_one_process_keep_their_cookies_apart(
    site: SiteServer,
) -> None:
    base = tenant_site(site)
    tenant: dict[str, object] = {"header": ["X-Tenant: A"]}
    assert crawls_from_code(
        (f"{base}/a/0.html", tenant),
        (f"{base}/b/0.html", {}),
        (f"{base}/a/0.html", {**tenant, "cookies": "off"}),
    ) == [0, 0, 0]
    check_isolated(site)
    assert [h.get("cookie") for h in headers_of(site, "/a/1")] == [SECRET, None]


def test_bad_http_settings_are_refused_in_one_line_naming_the_option(site: SiteServer) -> None:
    url = site.url("/a/0.html")
    for args, said in [
        (["--header", "no colon"], "--header: 'no colon' is not 'Name: value'"),
        (["--header", "X-A: 1\r\nX-B: 2"], "--header: "),
        (["--cookies", "maybe"], "--cookies: "),
        (["--proxy", "ftp://127.0.0.1:1"], "--proxy: "),
        (["--auth-env", "example.com=HOME"], "--auth-env: "),
        (["--timeout", "0"], "--timeout: "),
        (["--retries", "9"], "--retries: "),
    ]:
        refused = seed(environment(), url, "--local", *args)
        assert refused.returncode == 2, args
        assert said in refused.stderr and refused.stderr.count("\n") == 2, refused.stderr


def test_auth_env_sends_the_worker_s_credentials_to_that_host_only(site: SiteServer) -> None:
    other = SiteServer(host="127.0.0.2").start()
    try:
        other.pages["/x.html"] = html()
        site.pages["/a/0.html"] = html(other.url("/x.html"))
        env = environment(CRAWLER_AUTH_SITE="user:pass word")
        url, pair = site.url("/a/0.html"), "127.0.0.1=CRAWLER_AUTH_SITE"
        crawled = seed(env, url, "--local", "--auth-env", pair)
        missing = seed(environment(), url, "--local", "--auth-env", pair, "-o", "-")
    finally:
        other.stop()
    assert crawled.returncode == 0, crawled.stderr[-2000:]
    assert site.requests[0].headers.get("authorization") == "Basic dXNlcjpwYXNzIHdvcmQ="
    assert [r.headers.get("authorization") for r in other.requests[:1]] == [None]
    assert missing.returncode == 1 and len(site.requests) == 1  # not fetched, not retried
    assert "this worker has no CRAWLER_AUTH_SITE" in missing.stdout + missing.stderr


def test_a_crawl_s_timeout_and_retries_bound_its_fetches(site: SiteServer) -> None:
    site.pages["/slow.html"] = html()
    site.delay = 1.5
    env = environment(**FAST_FAILURES)
    crawled = seed(env, site.url("/slow.html"), "--local", "--timeout", "0.3", "--retries", "1")
    assert crawled.returncode == 1
    assert "Read timed out. (read timeout=0.2" in crawled.stdout  # the crawl's, not 8 s
    assert [r.path for r in site.requests] == ["/slow.html"] * 2  # one try and one retry


def test_a_crawl_s_proxy_carries_that_crawl_s_requests_only(site: SiteServer) -> None:
    base = tenant_site(site)
    proxy = SiteServer().start()  # a forward proxy's view: absolute URLs in the request line
    try:
        proxy.pages.update({base + path: page for path, page in site.pages.items()})
        seed_b = f"{base}/b/0.html"
        assert crawls_from_code((seed_b, {"proxy": proxy.base_url}), (seed_b, {})) == [0, 0]
    finally:
        proxy.stop()
    through_proxy = [r.path for r in proxy.requests if "/b/" in r.path]
    assert through_proxy == [f"{base}/b/0.html", f"{base}/b/1.html"]
    assert [r.path for r in site.requests if "/b/" in r.path] == ["/b/0.html", "/b/1.html"]


def test_a_thread_keeps_the_sessions_of_its_last_crawls_and_closes_the_others() -> None:
    sessions = Sessions(kept=2)
    a, b, c = (CrawlOptions(crawl_id=name) for name in "abc")
    first = sessions.get(a)
    assert sessions.get(a) is first  # found again: one session a crawl, not a request
    assert sessions.get(b) is not first
    sessions.get(c)  # a is the oldest: closed, and made anew when a comes back
    assert sessions.get(a) is not first
    assert sessions.get(CrawlOptions(crawl_id="a", headers=("X-A: 1",))).headers["X-A"] == "1"
    off = sessions.get(CrawlOptions(crawl_id="d", cookies=False))
    off.cookies.set("session", "x")
    assert isinstance(off.cookies, NoCookies) and len(off.cookies) == 0
    sessions.close()
