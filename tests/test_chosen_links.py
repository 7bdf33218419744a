"""Links the handler chooses: ``--follow handlers`` follows only what the page handler
asks (and the seeds); ``page.enqueue_links(selector, include, exclude, label, data)``
follows the page's links a CSS selector picks, filtered by globs, resolved as the
crawler resolves its own; a :class:`~crawler.handlers.Router`'s ``label_links`` rules
label the links followed by their URL, wherever they are found.  Real sites and real
crawls: ``--local``, the API, and workers on RabbitMQ and on Redis."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler import Crawl, CrawlError
from crawler.crawl_spec import CrawlSpec
from crawler.errors import InvalidMessage
from crawler.frontier.scope import page_links_to_follow
from crawler.handlers import Handled, Handlers, Page, Request, Router, with_enqueued
from crawler.links.extraction import html_links
from crawler.links.url_patterns import url_matcher
from crawler.options import CrawlOptions
from tests.link_handlers import chooser
from tests.shop_site import every_path, expected_items, shop
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer, html
from tests.support import FAST_FAILURES, read_records, usage_error
from tests.test_examples import EXAMPLES, guide_block, items_by_sku, read_items
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

CHOOSER = "tests.link_handlers:chooser"
SHOP_LINKS = "examples.shop_links:router"


def crawler_command(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``crawler`` command run from the repository root as a user runs it, nothing on
    PYTHONPATH: ``python -m crawler.command``, so that it is this tree's crawler."""
    env = {k: v for k, v in environment().items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "crawler.command", *args], cwd=PROJECT_ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_glob_matches_the_whole_url_and_a_regex_anywhere_in_it() -> None:
    product = url_matcher("https://shop.example/product/*")
    assert product("https://shop.example/product/mug/")
    assert product("https://shop.example/product/mug/?colour=red")  # * takes / and ? too
    assert not product("https://shop.example/category/product/mug/")  # the whole URL
    assert not product("https://SHOP.example/product/mug/")  # case counts
    assert url_matcher("*://*/product/?*")("http://127.0.0.1:8/product/a/")
    regex = url_matcher(re.compile(r"/product/[^/]+/$"))
    assert regex("http://h/x/product/a/") and not regex("http://h/product/a/b/")
    several = url_matcher(["*.pdf", re.compile("print=1")])
    assert several("http://h/a.pdf") and several("http://h/a?print=1")
    assert not several("http://h/a.html")
    with pytest.raises(TypeError, match=r"a glob \(str\) or a compiled regex, not int"):
        url_matcher([7])  # type: ignore[list-item]


def latin1_page(body: str, url: str = "http://h/dir/page.html") -> Page:
    return Page(
        url, url, 200, {"Content-Type": "text/html; charset=latin-1"}, body.encode("latin-1")
    )


def test_enqueue_links_resolves_the_selected_hrefs_as_the_crawler_resolves_its_own() -> None:
    body = (
        '<base href="/base/"><a class="p" href="one.html#top">1</a>'
        '<a class="p" href="../up.html?q=é">2</a><a class="p" href="//other.example/x">3</a>'
        '<a class="p" href="mailto:a@b.c">mail</a><a class="p" href="one.html#again">1 again</a>'
        '<a class="p">no href</a><a href="plain.html">plain</a><link class="p" href="style.css">'
    )
    page = latin1_page(body)
    added = page.enqueue_links(".p")

    assert [request.url for request in added] == [
        "http://h/base/one.html",  # its fragment gone, as the crawler's links: once
        "http://h/up.html?q=%E9",  # the query in the page's encoding, as html_links does
        "http://other.example/x",
        "http://h/base/style.css",  # any element the selector picks, with an href
    ]
    assert all(request.label is None and request.data is None for request in added)
    everything = [request.url for request in latin1_page(body).enqueue_links()]
    crawler_s = html_links(page.body, page.final_url, page.headers["Content-Type"])
    assert everything == [link for link in dict.fromkeys(crawler_s) if link.startswith("http")]


def test_enqueue_links_keeps_what_include_matches_and_exclude_does_not_labelled_with_data() -> None:
    body = "".join(
        f'<a href="{href}">x</a>'
        for href in ("/product/a/", "/product/b/?print=1", "/product/skip-c/", "/about/", "/p.pdf")
    )
    page = Page("http://h/", "http://h/", 200, {}, body.encode())
    added = page.enqueue_links(
        include=["http://h/product/*", re.compile(r"\.pdf$")],
        exclude=["*skip*", re.compile("print=")],
        label="product",
        data={"from": "home"},
    )
    assert added == [
        Request("http://h/product/a/", "product", {"from": "home"}),
        Request("http://h/p.pdf", "product", {"from": "home"}),
    ]
    assert page.enqueue_links("a", include=[]) != []  # none given: every link, as Crawlee's
    with pytest.raises(ValueError, match="label must be a string of 1 to 100 characters"):
        page.enqueue_links(label="")
    with pytest.raises(ValueError, match="data is not strict JSON"):
        page.enqueue_links(data={"n": float("nan")})


def test_what_a_handler_enqueues_is_followed_with_its_requests_unless_its_step_fails() -> None:
    handlers = Handlers(timeout=5)
    body = b'<a class="p" href="/1.html">1</a><a href="/2.html">2</a>'

    def enqueuing(page: Page) -> Handled:
        page.enqueue_links("a.p", label="item")
        return Handled(data={"ok": True}, follow=["/3.html"])

    def failing(page: Page) -> Handled:
        page.enqueue_links()
        raise RuntimeError("late")

    def bad_selector(page: Page) -> None:
        page.enqueue_links("a[")

    page = Page("http://h/", "http://h/", 200, {}, body)
    outcome = with_enqueued(handlers.run(enqueuing, page), page)
    assert outcome.data == {"ok": True}
    assert outcome.follow == [Request("http://h/1.html", "item"), Request("/3.html")]
    page = Page("http://h/", "http://h/", 200, {}, body)
    failed = with_enqueued(handlers.run(failing, page), page)
    assert failed.error == "handler-failed: RuntimeError: late" and failed.follow == []
    page = Page("http://h/", "http://h/", 200, {}, body)
    refused = with_enqueued(handlers.run(bad_selector, page), page)
    assert refused.error == "handler-failed: SelectolaxError: Can't parse CSS selector."


def test_a_router_s_label_rules_label_the_links_no_request_labelled() -> None:
    router = Router()
    router.label_links("product", "http://h/product/*", re.compile(r"/item/\d+$"))
    router.label_links("other", "*")
    anchors = ["http://h/product/1", "http://H:80/product/2#x", "http://h/about", "http://h/item/7"]
    asked = [
        Request("http://h/product/2", None, {"n": 2}),  # data kept, the rule's label added
        Request("http://h/item/7", "mine"),  # its own label stands
    ]
    follow, own, dropped = page_links_to_follow(
        anchors, asked, CrawlOptions(), 0, router.link_label
    )
    assert follow == [
        "http://h/product/1",
        "http://h/product/2",
        "http://h/about",
        "http://h/item/7",
    ]
    assert own == {
        "http://h/product/1": {"label": "product"},
        "http://h/product/2": {"label": "product", "data": {"n": 2}},  # matched canonical
        "http://h/about": {"label": "other"},  # the first rule that matches
        "http://h/item/7": {"label": "mine"},
    }
    assert dropped == []
    assert page_links_to_follow(anchors, asked, CrawlOptions(), 0)[1] == {
        "http://h/product/2": {"data": {"n": 2}},
        "http://h/item/7": {"label": "mine"},
    }
    for label in ("", "x" * 101, 7):
        with pytest.raises(ValueError, match="label must be a string of 1 to 100"):
            router.label_links(label, "*")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs at least one URL pattern"):
        router.label_links("x")
    with pytest.raises(TypeError, match="not bytes"):
        router.label_links("x", b"*")  # type: ignore[arg-type]


def test_follow_handlers_is_refused_without_a_handler_and_travels_checked() -> None:
    said = "--follow handlers works with --handler only: it follows what the handler asks"
    with pytest.raises(CrawlError, match=f"^{said}$"):
        CrawlSpec.from_options(["http://h/"], {"follow": "handlers"})
    with pytest.raises(CrawlError, match=f"^{said}$"):
        Crawl(["http://h/"], follow="handlers")
    for refused, prog in (
        (seed(environment(), "--follow", "handlers", "http://h/"), "python -m crawler.example"),
        (crawler_command("crawl", "--local", "--follow", "handlers", "http://h/"), "crawler crawl"),
    ):
        assert refused.returncode == 2
        assert usage_error(refused.stderr, prog).endswith(said), refused.stderr
    with pytest.raises(CrawlError, match="argument --follow: 'some' is not all or handlers"):
        CrawlSpec.from_options(["http://h/"], {"follow": "some", "handler": CHOOSER})
    chosen = CrawlSpec.from_options(["http://h/"], {"follow": "handlers", "handler": CHOOSER})
    assert (chosen.options.to_message() or {})["follow"] == "handlers"
    assert "follow" not in (CrawlSpec.from_options(["http://h/"], {}).options.to_message() or {})
    assert CrawlOptions.from_message({"follow": "handlers"}).follow == "handlers"
    with pytest.raises(InvalidMessage, match="follow must be all or handlers, got 'none'"):
        CrawlOptions.from_message({"follow": "none"})


def chosen_site(site: SiteServer) -> None:
    """``/start.html`` (its ``<base href>`` is ``/sub/``) has ``a.keep`` links to two
    pages under ``/sub/kept/``, one saying ``skip`` and one elsewhere, and a plain link;
    each page it leads to links plainly to a leaf."""
    keep = ("kept/1.html", "kept/2.html", "kept/skip-3.html", "/elsewhere/4.html")
    anchors = "".join(f'<a class="keep" href="{href}">k</a>\n' for href in keep)
    site.pages["/start.html"] = SitePage(
        f'<html><head><base href="/sub/"></head><body>{anchors}'
        '<a href="/plain.html">plain</a></body></html>'.encode()
    )
    for path in ("/sub/kept/1.html", "/sub/kept/2.html", "/sub/kept/skip-3.html"):
        site.pages[path] = html(site.url("/leaf.html"))
    site.pages["/elsewhere/4.html"] = site.pages["/plain.html"] = html(site.url("/leaf.html"))
    site.pages["/leaf.html"] = html()


def chosen_data(site: SiteServer, *, everything: bool) -> dict[str, Any]:
    """Each page's record data: the enqueued pages with the start page's label and data."""
    kept = {"label": "kept", "data": {"from": "start"}}
    plain = {"label": None, "data": None}
    data: dict[str, Any] = {
        site.url("/start.html"): {
            "enqueued": [site.url("/sub/kept/1.html"), site.url("/sub/kept/2.html")]
        },
        site.url("/sub/kept/1.html"): kept,
        site.url("/sub/kept/2.html"): kept,
    }
    if everything:  # --follow all: the page's own links too, plainly
        for path in ("/sub/kept/skip-3.html", "/elsewhere/4.html", "/plain.html", "/leaf.html"):
            data[site.url(path)] = plain
    return data


@pytest.mark.parametrize("follow", ["handlers", "all"])
def test_a_local_crawl_follows_only_what_its_handler_enqueues_with_follow_handlers(
    follow: str, site: SiteServer, tmp_path: Path
) -> None:
    chosen_site(site)
    output = tmp_path / "records.jsonl"
    crawled = seed(environment(), site.url("/start.html"), "--local", "--follow-relative",
                   "--handler", CHOOSER, "--follow", follow, "--records", str(output))  # fmt: skip

    assert crawled.returncode == 0, crawled.stderr[-3000:]
    records = {record["url"]: record.get("data") for record in read_records(output)}
    expected = chosen_data(site, everything=follow == "all")
    assert records == expected
    assert site.fetch_counts() == Counter({url.removeprefix(site.base_url): 1 for url in expected})


def test_the_api_follows_only_what_its_handler_enqueues(site: SiteServer) -> None:
    chosen_site(site)
    records = list(Crawl([site.url("/start.html")], threads=2, handler=chooser, follow="handlers"))

    assert {r["url"]: r.get("data") for r in records} == chosen_data(site, everything=False)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_follow_only_what_the_handler_enqueues(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES,
                      CRAWLER_HANDLERS=CHOOSER)  # fmt: skip
    chosen_site(site)
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        crawled = seed(env, site.url("/start.html"), "--handler", CHOOSER, "--follow",
                       "handlers", "--wait", "--records", str(output))  # fmt: skip
    finally:
        assert workers.stop() == 0

    assert crawled.returncode == 0, crawled.stderr[-3000:]
    records = {record["url"]: record.get("data") for record in read_records(output)}
    expected = chosen_data(site, everything=False)
    assert records == expected
    assert site.fetch_counts() == Counter({url.removeprefix(site.base_url): 1 for url in expected})
    assert workers.tracebacks() == []


def featured_shop(site: SiteServer) -> str:
    """The shop of ``tests/shop_site.py``, its home page also linking plainly to a
    product ("featured") and to an about page."""
    seed_url = shop(site)
    home = site.pages["/"].body.replace(
        b"</body>",
        b"<p class='featured'><a href='/product/travel-mug/'>Travel mug</a></p>"
        b"<a href='/about.html'>About</a></body>",
    )
    site.pages["/"] = SitePage(home)
    site.pages["/about.html"] = html()
    return seed_url


@pytest.mark.parametrize("follow", ["handlers", "all"])
def test_a_product_linked_plainly_from_home_reaches_its_route_by_the_label_rule(
    follow: str, site: SiteServer, tmp_path: Path
) -> None:
    """The guide's example (``examples/shop_links.py``): every variant an item, once,
    with its category, the featured product's too (linked plainly from the home page
    first, it is labelled ``product`` by the router's rule, and its handler reads the
    category off its breadcrumb); with ``--follow handlers`` the about page, which no
    handler enqueues, is not fetched."""
    products = tmp_path / "products.jsonl"
    done = crawler_command("crawl", "--local", featured_shop(site), "--handler", SHOP_LINKS,
                           "--follow", follow, "--items", str(products))  # fmt: skip

    assert done.returncode == 0, done.stderr[-2000:]
    assert items_by_sku(read_items(products)) == expected_items()
    counts = site.fetch_counts()
    assert counts["/product/travel-mug/"] == 1
    assert {path: n for path, n in counts.items() if n != 1} == {}
    about = {"/about.html"} if follow == "all" else set()
    assert set(counts) == every_path() | {"/robots.txt"} | about


def test_the_guide_shows_the_link_choosing_example_s_code_as_it_is() -> None:
    code = guide_block("python", "router = Router()\n# Every link")
    assert "label_links" in code and "enqueue_links" in code
    assert code in (EXAMPLES / "shop_links.py").read_text()
