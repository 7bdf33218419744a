"""The page handlers of ``tests/test_handler_kinds.py`` (``tests.yield_handlers:router``):
a generator, an ``async def`` and an async generator, and a route that takes a JSON
API's answers; a module of their own, which workers import without the tests'."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

from crawler.fetching import Fetched
from crawler.handlers import Page, Request, Router, content_types
from crawler.pipeline import PageVisit, Stage

router = Router()


@router.default
def listing(page: Page) -> Generator[Any, None, dict[str, Any]]:
    """The shop's front page, as a Scrapy callback: items and requests in any order,
    its data returned."""
    for n, a in enumerate(page.tree.css("a.product")):
        yield {"kind": "listed", "n": n}
        yield Request(page.urljoin(a.attributes["href"] or ""), "product")
    yield Request(page.urljoin("/api/products?page=1"), "api")
    return {"kind": "listing"}


@router.route("product")
async def product(page: Page) -> dict[str, Any]:
    """A product page, read by an ``async def`` handler."""
    await asyncio.sleep(0)
    h1 = page.tree.css_first("h1")
    return {"kind": "product", "name": None if h1 is None else h1.text()}


@router.route("api", content_types=["application/json"])
async def api(page: Page) -> AsyncIterator[Any]:
    """A JSON API's page, by an async generator: each product an item, the next page a
    request with the same label."""
    answer = page.json()
    for product in answer["products"]:
        yield {"kind": "api", "name": product}
    if answer.get("next"):
        yield Request(page.urljoin(answer["next"]), "api")


@content_types("text/plain")
def plain_text(page: Page) -> dict[str, Any]:
    """A handler that takes plain text besides HTML."""
    return {"text": page.text.strip()}


def bad_yield(page: Page) -> Iterator[Any]:
    yield {"kind": "fine"}
    yield 42


async def too_slow(page: Page) -> dict[str, Any]:
    await asyncio.sleep(30)
    return {}


class Hooked(Stage):
    """A stage of the user's own: notes each hook it is given, in order, and puts them
    in the page's data with the status it saw."""

    def before_request(self, visit: PageVisit) -> None:
        visit.notes["hooks"] = ["before_request"]

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        visit.notes["hooks"].append("after_response")
        visit.notes["status"] = fetched.response.status_code

    def on_page(self, visit: PageVisit) -> None:
        visit.notes["hooks"].append("on_page")

    def on_links(self, visit: PageVisit) -> None:
        visit.notes["hooks"].append(f"on_links {len(visit.anchors or [])}")

    def on_record(self, visit: PageVisit) -> None:
        data = dict(visit.record.get("data") or {})
        visit.record["data"] = {
            **data,
            **visit.notes,
            "hooks": [*visit.notes["hooks"], "on_record"],
        }


def hooked(page: Page) -> dict[str, Any]:
    h1 = page.tree.css_first("h1")
    return {"title": None if h1 is None else h1.text()}


hooked.stages = [Hooked()]  # type: ignore[attr-defined]
