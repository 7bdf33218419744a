"""A router for a shop: one item per product variant (docs/extracting.md).

Listing pages (the seed, categories, their next pages) lead to product pages, labelled
``product`` and told the listing's category; each product page yields an item per
variant: its SKU, product, variant, price, currency and category. In one process::

    crawler crawl --local https://shop.example/ --handler examples.shop:router \\
        --items products.jsonl

into PostgreSQL, with ``--items 'postgresql://user@host:5432/db?table=products'``, or on
workers::

    crawler worker --handler examples.shop:router
    crawler crawl --workers https://shop.example/ --handler examples.shop:router --wait \\
        --items products.jsonl

The selectors fit the test shop of ``tests/shop_site.py``; change them for yours.
"""

from __future__ import annotations

from typing import Any

from crawler import Handled, Page, Request, Router

router = Router()


@router.default  # the seed, and every page no request labelled: listings
def listing(page: Page) -> Handled:
    heading = page.tree.css_first("h1.category")
    category = heading.text(strip=True) if heading is not None else None
    follow: list[str | Request] = [
        Request(page.urljoin(href), label="product", data={"category": category})
        for a in page.tree.css("a.product")
        if (href := a.attributes.get("href"))
    ]
    next_page = page.tree.css_first("a[rel=next]")
    if next_page is not None and (href := next_page.attributes.get("href")):
        follow.append(page.urljoin(href))  # a listing again: no label
    return Handled(follow=follow)


@router.route("product")
def product(page: Page) -> Handled:
    category = (page.data or {}).get("category")
    name = page.tree.css_first("h1")
    items: list[dict[str, Any]] = []
    for row in page.tree.css("tr.variant"):
        variant, price = row.css_first("td.name"), row.css_first("td.price")
        amount = price.attributes.get("data-amount") if price is not None else None
        items.append(
            {
                "sku": row.attributes.get("data-sku"),
                "product": name.text(strip=True) if name is not None else None,
                "variant": variant.text(strip=True) if variant is not None else None,
                "price": float(amount) if amount else None,
                "currency": "EUR",
                "category": category,
            }
        )
    return Handled(items=items)
