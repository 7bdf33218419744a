"""Handlers as Scrapy and Crawlee users write them: generators that yield items and
requests in any order, ``async def`` handlers and async generators (run on the
process's event loop), and routes that take responses other than HTML by content type
(a JSON API); on workers (both brokers) and ``--local``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from crawler.handlers import Handlers, Page, Request, takes
from tests import yield_handlers
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer
from tests.support import FAST_FAILURES, read_records
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

ROUTER = "tests.yield_handlers:router"
PRODUCTS = 3
API_PAGES = 3


def page(body: str, content_type: str = "text/html", label: str | None = None) -> Page:
    url = "http://127.0.0.1:1/a"
    return Page(url, url, 200, {"Content-Type": content_type}, body.encode(), label)


def test_a_generator_s_yields_are_items_and_requests_and_what_it_returns_its_data() -> None:
    handlers = Handlers()
    html = '<a class="product" href="/p/1">1</a><a class="product" href="p/2">2</a>'
    outcome = handlers.run(yield_handlers.listing, page(html))
    assert outcome.error is None
    assert outcome.data == {"kind": "listing"}
    assert outcome.items == [{"kind": "listed", "n": 0}, {"kind": "listed", "n": 1}]
    assert outcome.follow == [
        Request("http://127.0.0.1:1/p/1", "product"),
        Request("http://127.0.0.1:1/p/2", "product"),
        Request("http://127.0.0.1:1/api/products?page=1", "api"),
    ]
    bad = handlers.run(yield_handlers.bad_yield, page("<p>"))
    assert bad.error == (
        "handler-failed: yielded int: yield dicts (items), crawler.File, crawler.Request or URLs"
        " (to follow)"
    )
    assert bad.items == []  # the step failed whole: nothing of it kept


def test_async_handlers_run_on_one_event_loop_and_are_cancelled_past_their_timeout() -> None:
    handlers = Handlers(timeout=0.3)
    product = handlers.run(yield_handlers.product, page("<h1>Lamp</h1>", label="product"))
    assert product.data == {"kind": "product", "name": "Lamp"}
    answer = json.dumps({"products": ["a", "b"], "next": "/api?page=2"})
    api = handlers.run(yield_handlers.api, page(answer, "application/json", "api"))
    assert api.items == [{"kind": "api", "name": "a"}, {"kind": "api", "name": "b"}]
    assert api.follow == [Request("http://127.0.0.1:1/api?page=2", "api")]

    slow = handlers.run(yield_handlers.too_slow, page("<p>"))
    assert slow.error == "handler-failed: took longer than 0.3s"
    assert handlers.loop._loop is not None  # one loop served them all; the slow task ended

    async def tasks() -> int:
        return len(asyncio.all_tasks())

    assert handlers.loop.submit(tasks()).result(timeout=5) == 1  # only this one: cancelled


def test_a_route_takes_the_content_types_it_names_and_every_handler_takes_html() -> None:
    router = yield_handlers.router
    assert takes(router, "api", "application/json; charset=utf-8")
    assert not takes(router, "product", "application/json")
    assert not takes(router, None, "application/json")  # the default route: HTML only
    assert not takes(router, "api", "image/png")
    assert takes(yield_handlers.plain_text, None, "Text/Plain")
    assert not takes(yield_handlers.plain_text, None, "application/pdf")
    assert not takes(yield_handlers.product, "product", None)


def shop(site: SiteServer) -> None:
    links = "".join(f'<a class="product" href="/product/{i}.html">{i}</a>' for i in range(PRODUCTS))
    pdf = f'<a href="{site.url("/about.pdf")}">pdf</a>'  # upstream follows absolute links
    site.pages["/"] = SitePage(f"<html><body>{links}{pdf}".encode())
    site.pages["/about.pdf"] = SitePage(b"%PDF-1.4", content_type="application/pdf")
    for i in range(PRODUCTS):
        site.pages[f"/product/{i}.html"] = SitePage(f"<h1>Product {i}</h1>".encode())
    for n in range(1, API_PAGES + 1):
        answer: dict[str, Any] = {"products": [f"api-{n}-{k}" for k in range(2)]}
        if n < API_PAGES:
            answer["next"] = f"/api/products?page={n + 1}"
        site.pages[f"/api/products?page={n}"] = SitePage(
            json.dumps(answer).encode(), content_type="application/json"
        )


def check_shop(site: SiteServer, records_file: Path) -> None:
    records = {record["url"]: record for record in read_records(records_file)}
    front = records[site.url("/")]
    assert front["data"] == {"kind": "listing"}
    assert [item["n"] for item in front["items"]] == list(range(PRODUCTS))
    for i in range(PRODUCTS):
        product = records[site.url(f"/product/{i}.html")]
        assert product["data"] == {"kind": "product", "name": f"Product {i}"}
    for n in range(1, API_PAGES + 1):
        api = records[site.url(f"/api/products?page={n}")]
        assert api["outcome"] == "crawled" and api["content_type"] == "application/json"
        assert [item["name"] for item in api["items"]] == [f"api-{n}-{k}" for k in range(2)]
    assert records[site.url("/about.pdf")]["outcome"] == "not-html"  # nobody asked for PDF
    assert "items" not in records[site.url("/about.pdf")]


def test_local_crawl_runs_generator_async_and_json_handlers(
    site: SiteServer, tmp_path: Path
) -> None:
    shop(site)
    output = tmp_path / "records.jsonl"
    done = seed(
        environment(), site.url("/"), "--local", "--handler", ROUTER, "--records", str(output)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    check_shop(site, output)
    skipped = [line for line in done.stderr.splitlines() if "since it's not HTML" in line]
    assert len(skipped) == 1 and "about.pdf" in skipped[0], done.stderr[-2000:]


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_run_generator_async_and_json_handlers(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    memcached: object,
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_HANDLERS=ROUTER
    )
    shop(site)
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = seed(env, site.url("/"), "--handler", ROUTER, "--wait", "--records", str(output))
    finally:
        assert workers.stop() == 0
    assert done.returncode == 0, done.stderr[-2000:]
    check_shop(site, output)


def test_the_json_api_example_yields_every_product_of_every_page_once(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = SitePage(b'<a class="api" href="/api/products?page=1">API</a>')
    for n in range(1, API_PAGES + 1):
        answer: dict[str, Any] = {
            "products": [
                {"sku": f"{n}-{k}", "name": f"Product {n}-{k}", "price": n + k / 10}
                for k in range(4)
            ],
            "next": f"/api/products?page={n + 1}" if n < API_PAGES else None,
        }
        site.pages[f"/api/products?page={n}"] = SitePage(
            json.dumps(answer).encode(), content_type="application/json; charset=utf-8"
        )
    items = tmp_path / "products.jsonl"
    done = seed(
        environment(), site.url("/"), "--local", "--handler", "examples.json_api:router",
        "--items", str(items),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in items.read_text().splitlines()]
    assert sorted(line["item"]["sku"] for line in lines) == sorted(
        f"{n}-{k}" for n in range(1, API_PAGES + 1) for k in range(4)
    )
    assert f"{API_PAGES * 4} items" in done.stdout


def test_the_guide_shows_the_json_api_example_s_code_as_it_is() -> None:
    guide = (PROJECT_ROOT / "docs" / "extracting.md").read_text()
    block = guide.split("```python\n@router.default  # the seed: an HTML page that names")[1]
    code = "@router.default  # the seed: an HTML page that names" + block.split("```")[0]
    assert code in (PROJECT_ROOT / "examples" / "json_api.py").read_text()


def test_a_handler_s_own_stages_run_each_hook_in_order_at_its_place(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = SitePage(f'<h1>Home</h1><a href="{site.url("/b")}">b</a>'.encode())
    site.pages["/b"] = SitePage(b"<h1>B</h1>")
    output = tmp_path / "records.jsonl"
    done = seed(
        environment(), site.url("/"), "--local", "--handler", "tests.yield_handlers:hooked",
        "--records", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = {record["url"]: record["data"] for record in read_records(output)}
    hooks = ["before_request", "after_response", "on_page"]
    assert data == {
        site.url("/"): {
            "title": "Home",
            "status": 200,
            "hooks": [*hooks, "on_links 1", "on_record"],
        },
        site.url("/b"): {"title": "B", "status": 200, "hooks": [*hooks, "on_links 0", "on_record"]},
    }
