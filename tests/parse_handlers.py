"""The page handlers of ``tests/test_parse_and_cache.py`` (``tests.parse_handlers:router``):
a generator for the shop's listing, a route returning a product's data, a JSON route,
and a route that raises; a module of their own, which ``crawler parse`` loads by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawler.handlers import Page, Request, Router

router = Router()


@router.default
def listing(page: Page) -> Iterator[Any]:
    """The front page: an item and a request for each product, and the JSON API's."""
    for a in page.tree.css("a.product"):
        href = a.attributes["href"] or ""
        yield {"listed": href}
        yield Request(page.urljoin(href), "product", {"from": page.url})
    yield Request("/api?page=1", "api", method="POST", json={"q": "tea"})
    yield Request("mailto:shop@example.com")


@router.route("product")
def product(page: Page) -> dict[str, Any]:
    """A product page: its name, and what the page that found it passed on."""
    h1 = page.tree.css_first("h1")
    return {"name": None if h1 is None else h1.text(), "data": page.data}


@router.route("api", content_types=["application/json"])
def api(page: Page) -> Iterator[Any]:
    """A JSON API's answer: each product an item."""
    yield from page.json()["products"]


@router.route("broken")
def broken(page: Page) -> dict[str, Any]:
    """A handler with a bug."""
    raise KeyError("price")
