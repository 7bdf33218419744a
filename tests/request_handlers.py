"""The page handlers of ``tests/test_requests_and_routes.py``
(``tests.request_handlers:router``): a module of their own, which workers import without
the tests' modules."""

from __future__ import annotations

import time
from typing import Any

from crawler.handlers import Handled, Page, Request, Router

router = Router()


@router.default
def other_page(page: Page) -> dict[str, Any] | Handled:
    """A listing asks for its detail pages, labelled ``item``, with where they were
    found; any other page says what it was given (children inherit nothing)."""
    if page.url.endswith("/listing.html"):
        follow: list[str | Request] = [
            Request(page.urljoin(a.attributes["href"] or ""), "item", {"from": page.url})
            for a in page.tree.css("a.detail")
        ]
        return Handled(data={"kind": "listing"}, follow=follow)
    if page.url.endswith("/slow.html"):
        time.sleep(1.5)
    return {"kind": "other", "label": page.label, "data": page.data}


@router.route("item")
def item_page(page: Page) -> dict[str, Any]:
    """A detail page: its record built from the label and data its request carried."""
    assert page.data is not None
    h1 = page.tree.css_first("h1")
    return {
        "kind": page.label,
        "found_on": page.data["from"],
        "title": None if h1 is None else h1.text(),
    }
