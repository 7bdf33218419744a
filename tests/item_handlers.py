"""Page handlers yielding items, for tests/test_items.py (``tests.item_handlers:NAME``)."""

from __future__ import annotations

from crawler.handlers import Handled, Page

#: Items each page yields.
PER_PAGE = 3


def three_items(page: Page) -> Handled:
    """Three items a page: its path and their number; the last one has a key more
    (``note``), and a key named as one of the CSV sink's columns (``_url``)."""
    path = page.url.split("/", 3)[3]
    items: list[dict[str, object]] = [
        {"path": path, "n": n, "tags": ["a", n]} for n in range(PER_PAGE)
    ]
    items[-1] |= {"note": "the last, ä", "_url": "mine"}
    return Handled(data={"items": PER_PAGE}, items=items)
