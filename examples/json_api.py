"""A JSON API crawled page by page, as a Scrapy spider or a Crawlee router does it
(docs/extracting.md, "Handlers that yield, await and read JSON").

The seed is an HTML page that links to the API; the API answers JSON (``{"products":
[...], "next": "/api/products?page=2"}``): its route takes ``application/json`` and
yields an item per product and a request for the next page, with the same label. In one
process::

    crawler crawl --local https://shop.example/ --handler examples.json_api:router \\
        --items products.jsonl

The handlers are a generator and an async generator: a handler may also return, as
the shop's do, or be a plain ``async def``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from crawler import Page, Request, Router

router = Router()


@router.default  # the seed: an HTML page that names the API
def front_page(page: Page) -> Iterator[Request]:
    for a in page.tree.css("a.api"):
        if href := a.attributes.get("href"):
            yield Request(page.urljoin(href), label="api")


@router.route("api", content_types=["application/json"])
async def api_page(page: Page) -> AsyncIterator[dict[str, Any] | Request]:
    answer = page.json()
    for product in answer["products"]:
        yield {"sku": product["sku"], "name": product["name"], "price": product["price"]}
    if answer.get("next"):
        yield Request(page.urljoin(answer["next"]), label="api")
