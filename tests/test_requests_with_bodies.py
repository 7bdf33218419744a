"""Requests as Scrapy and Crawlee users make them: a method, headers and a body
(``body``, ``json``, ``form``), deduplicated by method, URL and body unless
``unique_key`` says otherwise, ``always`` to fetch a URL again; a login whose cookie
holds on every worker of the crawl and no other; a bad request refused alone, in one
line in the page's record and the log.  On ``--local`` and workers (both brokers)."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from crawler import messages
from crawler.errors import InvalidMessage
from crawler.fetching import Asking
from crawler.frontier import scope
from crawler.handlers import MAX_BODY_BYTES, Handled, Handlers, Page, Request, requests_followed
from crawler.options import CrawlOptions
from tests.form_site import (
    ORDERS,
    PASSWORD,
    RESULTS,
    SEARCH_PAGES,
    SESSION,
    USER,
    every_order,
    serve_forms,
)  # fmt: skip
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer
from tests.support import FAST_FAILURES, read_records
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

LOGIN = "examples.login_form:router"
SEARCH = "examples.search_api:router"
PAGE = Page("http://h/a/b.html", "http://h/a/b.html", 200, {}, b"<p>")


def outcome_of(*asked: Any) -> Any:
    return Handlers(timeout=5).run(lambda page: Handled(data={"ok": 1}, follow=list(asked)), PAGE)


def test_a_request_s_body_is_made_bytes_with_its_content_type() -> None:
    outcome = outcome_of(
        Request("/api", method="post", json={"q": "tea", "page": 1}),
        Request("/login", method="POST", form={"user": "ada", "tags": ["a", "b"]}),
        Request("/raw", method="POST", body="é", headers={"Content-Type": "text/plain"}),
        Request("/plain", headers={"Accept": "application/json"}),
    )
    assert outcome.refused == []
    api, login, raw, plain = outcome.follow
    assert (api.method, api.body, dict(api.headers)) == (
        "POST", b'{"q": "tea", "page": 1}', {"Content-Type": "application/json"}
    )  # fmt: skip
    assert login.body == b"user=ada&tags=a&tags=b"
    assert login.headers == {"Content-Type": "application/x-www-form-urlencoded"}
    assert raw.body == "é".encode() and raw.headers == {"Content-Type": "text/plain"}
    assert plain.method == "GET" and plain.body is None and not plain.keyed
    assert api.arguments() == {
        "method": "POST",
        "headers": {"Content-Type": "application/json"},
        "body": base64.b64encode(b'{"q": "tea", "page": 1}').decode(),
    }


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (
            Request("/x", method="DELETE"),
            "method 'DELETE' is not one the crawler sends (GET, HEAD, POST)",
        ),
        (Request("/x", method="POST", body=b"a" * (MAX_BODY_BYTES + 1)), f"over {MAX_BODY_BYTES}"),
        (Request("/x", body=b"a"), "a GET request carries no body"),
        (Request("/x", method="POST", json=1, form={"a": 1}), "one of body, json and form"),
        (Request("/x", headers={"Bad Name": "1"}), "is not a header name"),
        (Request("/x", headers={"X-A": "1\r\nX-B: 2"}), "must be a string of one line"),
        (Request("/x", headers={"Host": "evil.example"}), "the header Host is the crawler's"),
        (Request("/x", unique_key=""), "unique_key must be a string of 1 to 256"),
    ],
)
def test_a_bad_request_is_refused_alone_in_one_line(request_: Request, reason: str) -> None:
    outcome = outcome_of(request_, "ok.html")
    assert outcome.error is None and outcome.data == {"ok": 1}
    assert outcome.follow == [Request("ok.html")]
    assert len(outcome.refused) == 1 and outcome.refused[0].startswith("request-refused: '/x': ")
    assert reason in outcome.refused[0], outcome.refused


def test_a_url_the_crawler_does_not_fetch_is_refused_once_resolved() -> None:
    outcome = outcome_of("file:///etc/passwd", "mailto:a@b.example", "c.html")
    followed, refused = requests_followed(outcome, PAGE.final_url)
    assert followed == [Request("http://h/a/c.html")]
    assert refused == [
        "request-refused: 'file:///etc/passwd': a file: URL is not one the crawler fetches",
        "request-refused: 'mailto:a@b.example': a mailto: URL is not one the crawler fetches",
    ]


def test_requests_are_deduplicated_by_method_url_and_body_unless_their_key_says_otherwise() -> None:
    checked = outcome_of(
        "http://h/p",  # a plain GET: its URL
        Request("http://h/p", method="POST", json={"page": 1}),
        Request("http://h/p", method="POST", json={"page": 1}),  # the same: once
        Request("http://h/p", method="POST", json={"page": 2}),
        Request("http://h/p", method="POST", json={"page": 3}, unique_key="p"),
        Request("http://h/q", method="POST", json={"page": 4}, unique_key="p"),  # another URL
        Request("http://h/p", always=True),
        Request("http://h/p", always=True),  # asked twice: fetched twice
        Request("http://h/p", headers={"Accept": "text/html"}),  # a GET with headers: its URL
    ).follow
    options = CrawlOptions()
    follow, own, dropped = scope.page_links_to_follow([], checked, options, 0, origin="m1")
    assert dropped == []
    urls = [scope.url_in(entry) for entry in follow]
    assert urls == ["http://h/p"] * 4 + ["http://h/q"] + ["http://h/p"] * 2
    assert follow[0] == "http://h/p" and "request" in own["http://h/p"]  # its headers
    keys = [own[entry]["request"]["key"] for entry in follow[1:]]
    assert [key.split(":")[0] for key in keys] == ["POST", "POST", "key", "key", "always", "always"]
    assert len(set(follow)) == len(follow)
    again, _, _ = scope.page_links_to_follow([], checked, options, 0, origin="m1")
    assert again == follow  # the page redone asks for the same requests
    other, _, _ = scope.page_links_to_follow([], checked, options, 0, origin="m2")
    assert [e for e in other if "always:" in e] != [e for e in follow if "always:" in e]
    # a request's message says how to ask, and is of format 4
    message = scope.message_of(example_crawl(), "http://h/p", {"depth": 1, **own[follow[1]]}, None)
    assert message.options["format"] == scope.FORMAT == 4
    asking = Asking.of(message.kwargs["request"])
    assert (asking.method, asking.body) == ("POST", b'{"page": 1}')


def example_crawl() -> Any:
    from crawler import example

    return example.crawl


def test_a_message_s_request_argument_is_checked() -> None:
    def check(request: Any) -> None:
        messages.check_arguments({"request": request})

    check({"method": "POST", "body": base64.b64encode(b"{}").decode(), "key": "POST:ab"})
    for bad, said in (
        ({"method": "PUT"}, "method 'PUT' is not one the crawler sends"),
        ({"method": "POST", "body": "not base64!"}, "its body is not base64"),
        ({"body": base64.b64encode(b"x").decode()}, "a GET request carries no body"),
        ({"headers": {"Host": "x"}}, "the header Host is the crawler's"),
        ({"url": "http://h/"}, ""),
        ([], ""),
    ):
        with pytest.raises(InvalidMessage, match="message arguments: request must be") as e:
            check(bad)
        assert said in str(e.value)


def test_a_post_redirected_by_303_goes_on_as_a_get_without_its_body() -> None:
    post = Asking("POST", (("Content-Type", "application/json"), ("X-A", "1")), b"{}")
    assert post.redirected(303) == Asking("GET", (("X-A", "1"),), None)
    assert post.redirected(302).method == "GET"
    assert post.redirected(307) is post and post.redirected(308) is post


def check_login(site: SiteServer, records_file: Path, items_file: Path) -> None:
    asked = site.asked()
    form = f"user={USER}&password={PASSWORD}".encode()
    assert asked[("POST", "/session", form)] == 1  # logged in once
    for n in range(ORDERS):  # every order fetched once, logged in
        assert site.fetch_counts()[f"/orders/{n}"] == 1
    orders = [r for r in site.requests if r.path.startswith("/orders/")]
    assert all(f"session={SESSION}" in r.headers.get("cookie", "") for r in orders)
    items = [json.loads(line)["item"] for line in items_file.read_text().splitlines()]
    assert sorted(items, key=str) == sorted(every_order(), key=str)
    records = read_records(records_file)
    login = [r for r in records if r.get("method") == "POST"]
    assert len(login) == 1 and login[0]["url"] == site.url("/session")
    assert login[0]["request_key"].startswith("POST:") and login[0]["status"] == 200


def test_a_login_holds_for_the_crawl_s_pages_on_local(site: SiteServer, tmp_path: Path) -> None:
    serve_forms(site)
    records, items = tmp_path / "records.jsonl", tmp_path / "orders.jsonl"
    env = environment(SHOP_USER=USER, SHOP_PASSWORD=PASSWORD)
    done = seed(
        env, site.url("/login"), "--local", "--handler", LOGIN, "--records", str(records),
        "--items", str(items),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    check_login(site, records, items)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_login_on_one_worker_holds_on_every_worker_and_in_no_other_crawl(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    memcached: object,
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_HANDLERS=LOGIN,
        SHOP_USER=USER, SHOP_PASSWORD=PASSWORD,
    )  # fmt: skip
    serve_forms(site)
    site.delay = 0.05  # each worker process takes some of the orders
    records, items = tmp_path / "records.jsonl", tmp_path / "orders.jsonl"
    workers = WorkerProcesses(env, processes=2, threads=2)
    try:
        done = seed(
            env, site.url("/login"), "--handler", LOGIN, "--wait", "--records", str(records),
            "--items", str(items),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        check_login(site, records, items)
        # Another crawl of the account, on the same workers, is not logged in.
        before = len(site.requests)
        other = seed(env, site.url("/account"), "--wait", "-o", str(tmp_path / "other.jsonl"))
        assert other.returncode == 0, other.stderr[-2000:]
        later = site.requests[before:]
        assert [r.path for r in later] == ["/account"]
        assert "cookie" not in later[0].headers
        assert read_records(tmp_path / "other.jsonl")[0]["status"] == 403
    finally:
        assert workers.stop() == 0
    pids = {
        line.split("[PID ")[1].split("]")[0]
        for line in workers.lines
        if "Crawling" in line and "[PID " in line
    }
    assert len(pids) == 2, "both worker processes fetched pages"


def check_search(site: SiteServer, items_file: Path, pages: Path | None = None) -> None:
    if pages is not None:
        results = [r for r in read_records(pages) if r.get("method") == "POST"]
        assert len(results) == SEARCH_PAGES, results
        assert all(len(r.get("items", [])) == RESULTS for r in results), results
    posts = [(r.path, json.loads(r.body)) for r in site.requests if r.method == "POST"]
    assert sorted(page["page"] for _, page in posts) == list(range(1, SEARCH_PAGES + 1))
    lines = [json.loads(line) for line in items_file.read_text().splitlines()]
    got = sorted((line["item"]["page"], line["item"]["n"]) for line in lines)
    assert got == [(p, n) for p in range(1, SEARCH_PAGES + 1) for n in range(RESULTS)]
    # each POST's items are kept apart: the sink names the page by URL and request key
    assert len({line["url"] for line in lines}) == SEARCH_PAGES


def test_the_search_api_example_posts_each_page_s_query_once(
    site: SiteServer, tmp_path: Path
) -> None:
    serve_forms(site)
    items, pages = tmp_path / "results.jsonl", tmp_path / "pages.jsonl"
    done = seed(
        environment(), site.url("/search.html"), "--local", "--handler", SEARCH,
        "--items", str(items), "--records", str(pages),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    check_search(site, items, pages)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_post_each_page_s_query_once_and_refuse_a_bad_request_alone(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    memcached: object,
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES,
        CRAWLER_HANDLERS=f"{SEARCH},tests.bad_requests:asks_badly",
    )  # fmt: skip
    serve_forms(site)
    site.pages["/"] = SitePage(f'<a href="{site.url("/next.html")}">next</a>'.encode())
    site.pages["/next.html"] = SitePage(b"<p>next</p>")
    items, records = tmp_path / "results.jsonl", tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        pages = tmp_path / "pages.jsonl"
        done = seed(
            env, site.url("/search.html"), "--handler", SEARCH, "--wait", "--items", str(items),
            "--records", str(pages),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        check_search(site, items, pages)
        bad = seed(
            env, site.url("/"), "--handler", "tests.bad_requests:asks_badly", "--wait",
            "--records", str(records),
        )  # fmt: skip
        assert bad.returncode == 0, bad.stderr[-2000:]
    finally:
        assert workers.stop() == 0
    front = {r["url"]: r for r in read_records(records)}[site.url("/")]
    assert len(front["refused_requests"]) == 3 and front["data"] == {"kind": "front"}
    assert site.fetch_counts()["/next.html"] == 1
    assert sum("request-refused" in line for line in workers.lines) == 3


def test_a_refused_request_is_said_in_the_record_and_the_log_and_the_page_stands(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = SitePage(f'<a href="{site.url("/next.html")}">next</a>'.encode())
    site.pages["/next.html"] = SitePage(b"<p>next</p>")
    records = tmp_path / "records.jsonl"
    items = tmp_path / "items.jsonl"
    done = seed(
        environment(), site.url("/"), "--local", "--handler", "tests.bad_requests:asks_badly",
        "--records", str(records), "--items", str(items),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    front = {r["url"]: r for r in read_records(records)}[site.url("/")]
    assert front["data"] == {"kind": "front"} and "handler_error" not in front
    assert front["refused_requests"] == [  # checked as made, then resolved
        "request-refused: '/huge': a request's body takes 65537 bytes, over 65536",
        "request-refused: '/x': method 'DELETE' is not one the crawler sends (GET, HEAD, POST)",
        "request-refused: 'file:///etc/passwd': a file: URL is not one the crawler fetches",
    ]
    said = [line for line in done.stderr.splitlines() if "request-refused" in line]
    assert len(said) == 3, done.stderr[-2000:]
    assert site.fetch_counts()["/next.html"] == 1  # its own link followed
    assert len(items.read_text().splitlines()) == 1  # its item kept


def test_the_guide_shows_the_examples_code_as_it_is() -> None:
    guide = (PROJECT_ROOT / "docs" / "extracting.md").read_text()
    for name, start in (
        ("login_form.py", "@router.default  # the seed: the login page"),
        ("search_api.py", "@router.default  # the seed: the search page"),
    ):
        code = start + guide.split("```python\n" + start)[1].split("```")[0]
        assert code in (PROJECT_ROOT / "examples" / name).read_text()


def test_a_request_hook_of_the_crawl_s_own_adds_a_header_to_each_request(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = SitePage(f'<a href="{site.url("/b.html")}">b</a>'.encode())
    site.pages["/b.html"] = SitePage(b"<p>b</p>")
    done = seed(environment(), site.url("/"), "--local", "--handler", "tests.request_hooks:router")
    assert done.returncode == 0, done.stderr[-2000:]
    pages = [r for r in site.requests if r.path in ("/", "/b.html")]
    assert len(pages) == 2 and all(r.headers.get("x-signed") == "yes" for r in pages)


def test_page_urljoin_and_a_handler_s_requests_resolve_as_the_crawler_s_links() -> None:
    """WHATWG, against ``<base href>``: a backslash is a slash in an http(s) URL, so
    ``\\\\evil.example/x`` leaves the page's host for the handler as for the crawler."""
    from crawler.links.extraction import html_links

    body = b'<a href="\\\\evil.example/x">x</a>'
    page = Page("http://a.example/b/c", "http://a.example/b/c", 200, {}, body)
    assert page.urljoin("\\\\evil.example/x") == "http://evil.example/x"
    assert html_links(body, page.final_url) == ["http://evil.example/x"]
    based = b'<base href="/shop/"><a href="item/1">1</a>'
    shop = Page("http://a.example/b/c", "http://a.example/b/c", 200, {}, based)
    assert (
        shop.urljoin("item/1") == "http://a.example/shop/item/1" == html_links(based, shop.url)[0]
    )
    outcome = Handlers(timeout=5).run(
        lambda p: Handled(follow=["item/2", "\\\\evil.example/y"]), shop
    )
    followed, _ = requests_followed(outcome, shop.base)
    assert [r.url for r in followed] == ["http://a.example/shop/item/2", "http://evil.example/y"]
    api = Page(
        "http://a.example/api",
        "http://a.example/api",
        200,
        {"Content-Type": "application/json"},
        b"{}",
    )
    assert api.base == api.final_url and api.urljoin("?page=2") == "http://a.example/api?page=2"


def test_the_shared_jar_merges_two_workers_cookies_and_keeps_within_its_bound(
    memcached: Any,
) -> None:
    from requests.cookies import RequestsCookieJar, create_cookie

    from crawler.fetching import shared_cookies
    from crawler.stores.client import StoreClient

    client: StoreClient = memcached
    crawl_id = f"jar-{uuid.uuid4().hex}"
    first, second = RequestsCookieJar(), RequestsCookieJar()
    first.set_cookie(create_cookie("session", "a", domain="h.example"))  # type: ignore[no-untyped-call]
    second.set_cookie(create_cookie("theme", "dark", domain="h.example"))  # type: ignore[no-untyped-call]
    assert shared_cookies.merge(client, crawl_id, first, 60) == 1
    assert shared_cookies.merge(client, crawl_id, second, 60) == 2
    version, cookies = shared_cookies.read(client, crawl_id)
    assert version == 2 and {(c["name"], c["value"]) for c in cookies} == {
        ("session", "a"), ("theme", "dark"),
    }  # fmt: skip
    assert {c.name for c in second} == {"session", "theme"}  # the merger gets both
    huge = RequestsCookieJar()
    big = create_cookie("big", "x" * shared_cookies.MAX_JAR_BYTES, domain="h.example")  # type: ignore[no-untyped-call]
    huge.set_cookie(big)
    assert shared_cookies.merge(client, crawl_id, huge, 60) == 2  # not stored: past the bound
    assert shared_cookies.read(client, crawl_id)[0] == 2
