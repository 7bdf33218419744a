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


#: The item ``nul_items`` adds on ``/page/1.html``: U+0000 in a value, in keys, and in a
#: key that, U+0000 replaced, is another key of its object.
NUL_ITEM = {"title": "a\x00b", "k\x00": [{"\x00": "x"}], "k\ufffd": "mine"}
#: ``NUL_ITEM`` as a PostgreSQL table holds it.
NUL_ITEM_STORED = {"title": "a\ufffdb", "k\ufffd\ufffd": [{"\ufffd": "x"}], "k\ufffd": "mine"}


def nul_items(page: Page) -> Handled:
    """:func:`three_items`, and on ``/page/1.html`` :data:`NUL_ITEM` after them."""
    handled = three_items(page)
    if page.url.endswith("/page/1.html"):
        return Handled(data=handled.data, items=[*handled.items, NUL_ITEM])
    return handled


def one_file_each(page: Page) -> Handled:
    """An item a page, naming one file of its own (``/files/N.txt``, N the page's)."""
    number = page.url.rsplit("/", 1)[1].split(".")[0]
    return Handled(items=[{"page": number, "file_urls": [f"/files/{number}.txt"]}])
