"""A handler that asks for requests the crawler refuses, besides its data, an item and
a good link (``tests/test_requests_with_bodies.py``)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from crawler.handlers import MAX_BODY_BYTES, Page, Request


def asks_badly(page: Page) -> Generator[dict[str, Any] | Request | str, None, Any] | None:
    if not page.url.endswith("/"):
        return None
    return _front()


def _front() -> Generator[dict[str, Any] | Request | str, None, dict[str, Any]]:
    yield "file:///etc/passwd"
    yield Request("/huge", method="POST", body=b"a" * (MAX_BODY_BYTES + 1))
    yield Request("/x", method="DELETE")
    yield {"kind": "item"}
    return {"kind": "front"}
