"""Item pipelines for the shop's items (``examples/shop.py``), as Scrapy's are: each item
passes through them in the order the crawl names them, and may be changed or dropped.

    crawler crawl --local https://shop.example/ --handler examples.shop:router \\
        --pipeline examples.shop_pipelines:at_least_ten \\
        --pipeline examples.shop_pipelines:InCents --items products.jsonl
"""

from __future__ import annotations

from typing import Any

from crawler import DropItem, Page


def at_least_ten(item: dict[str, Any], page: Page) -> dict[str, Any]:
    """Keep the variants of 10 EUR or more (and those whose price is unknown)."""
    if item["price"] is not None and item["price"] < 10:
        raise DropItem(f"{item['sku']} costs under 10 EUR")
    return item


class InCents:
    """Scrapy's shape: a class with ``process_item``, made once per worker process."""

    def process_item(self, item: dict[str, Any], page: Page) -> dict[str, Any]:
        price = item.pop("price")
        item["price_cents"] = None if price is None else round(price * 100)
        return item
