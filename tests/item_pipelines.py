"""A handler with item pipelines of its own, and pipelines a crawl names with
``--pipeline`` (``tests/test_item_pipelines.py``): each page yields six items; the
router's pipelines strip their titles and drop the odd ones, ``with_url`` adds the
page's URL, ``breaks_on_four`` fails on the fourth (which goes on as it was)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawler import DropItem, Page, Router

#: The items each page yields; the odd ones are dropped.
PER_PAGE = 6

router = Router()


@router.default
def six_items(page: Page) -> Iterator[dict[str, Any]]:
    for n in range(PER_PAGE):
        yield {"n": n, "title": f"  item {n}  "}


@router.item_pipeline
def stripped(item: dict[str, Any], page: Page) -> dict[str, Any]:
    item["title"] = item["title"].strip()
    return item


@router.item_pipeline
class DropOdd:
    """A pipeline in Scrapy's shape: a class with ``process_item``, made once."""

    def __init__(self) -> None:
        self.seen = 0

    def process_item(self, item: dict[str, Any], spider: Any) -> dict[str, Any]:
        self.seen += 1
        if item["n"] % 2:
            raise DropItem(f"odd: {item['n']}")
        return item


def with_url(item: dict[str, Any], page: Page) -> dict[str, Any]:
    item["url"] = page.url
    return item


def breaks_on_four(item: dict[str, Any], page: Page) -> dict[str, Any]:
    if item["n"] == 4:
        item["broken"] = True  # changed, then failed: the change is not kept
        raise RuntimeError("four")
    return item


async def drops_all(item: dict[str, Any], page: Page) -> None:
    return None
