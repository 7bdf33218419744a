"""A JSON API that wants a POST, crawled page by page (docs/extracting.md, "Requests
with a method and a body").

The seed is an HTML page whose search form names the API (``data-api``); its handler
POSTs the first query, ``{"query": ..., "page": 1}``, and each answer's handler yields
its results as items and POSTs the next page's query to the same URL: each body is a
request of its own (deduplicated by method, URL and body), so every page is fetched
once however many answers ask for it.  In one process::

    crawler crawl --local https://shop.example/search.html \\
        --handler examples.search_api:router --items results.jsonl
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawler import Page, Request, Router

router = Router()


@router.default  # the seed: the search page
def search_page(page: Page) -> Iterator[Request]:
    form = page.tree.css_first("form[data-api]")
    if form is None:
        return
    query = {"query": form.attributes.get("data-query") or "", "page": 1}
    api = page.urljoin(form.attributes.get("data-api") or "")
    yield Request(api, method="POST", json=query, label="results", data=query)


@router.route("results", content_types=["application/json"])
def results(page: Page) -> Iterator[dict[str, Any] | Request]:
    answer = page.json()
    yield from answer["results"]
    asked = dict(page.data or {})
    if answer["page"] < answer["pages"]:
        query = {"query": asked.get("query", ""), "page": answer["page"] + 1}
        yield Request(page.url, method="POST", json=query, label="results", data=query)
