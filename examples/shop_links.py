"""The shop of ``examples/shop.py``, its links chosen by its handlers (docs/extracting.md,
"Choosing links"): each page follows only what its handler enqueues, and a product page
is labelled ``product`` wherever it is linked, plainly from the home page too. In one
process::

    crawler crawl --local https://shop.example/ --handler examples.shop_links:router \\
        --follow handlers --items products.jsonl

or on workers::

    crawler worker --handler examples.shop_links:router
    crawler crawl --workers https://shop.example/ --handler examples.shop_links:router \\
        --follow handlers --wait --items products.jsonl

The selectors fit the test shop of ``tests/shop_site.py``; change them for yours.
"""

from __future__ import annotations

from typing import Any

from crawler import Handled, Page, Router

router = Router()
# Every link to a product page is labelled so, wherever the crawl finds it.
router.label_links("product", "*://*/product/*")


@router.default  # the seed and the listings
def listing(page: Page) -> None:
    heading = page.tree.css_first("h1.category")
    category = heading.text(strip=True) if heading is not None else None
    page.enqueue_links("ul.categories a")  # the home page's categories
    page.enqueue_links("a.product", label="product", data={"category": category})
    page.enqueue_links("a[rel=next]")  # a listing again: no label


@router.route("product")
def product(page: Page) -> Handled:
    breadcrumb = page.tree.css_first("p.breadcrumb a")  # when no listing said the category
    category = (page.data or {}).get("category") or (
        breadcrumb.text(strip=True) if breadcrumb is not None else None
    )
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
