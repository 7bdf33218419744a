"""The page handlers of ``tests/test_chosen_links.py`` (``tests.link_handlers:chooser``):
a module of their own, which workers import without the tests' modules."""

from __future__ import annotations

from typing import Any

from crawler.handlers import Page


def chooser(page: Page) -> dict[str, Any]:
    """The start page enqueues its ``a.keep`` links under ``/sub/kept/`` but those
    saying ``skip``, labelled ``kept``; every page says what it was given."""
    if page.url.endswith("/start.html"):
        added = page.enqueue_links(
            "a.keep", include="*/sub/kept/*", exclude="*skip*", label="kept", data={"from": "start"}
        )
        return {"enqueued": [request.url for request in added]}
    return {"label": page.label, "data": page.data}
