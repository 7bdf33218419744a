"""A small shop for ``examples/shop.py`` to crawl (tests/test_examples.py, and
docs/extracting.md): a home page linking to two categories; their listing pages (3 in
all, paginated with ``<a rel="next">``) lead to 8 product pages with 1 to 3 variants
each, every variant with its SKU, name and price."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from tests.site_server import Page, SiteServer


@dataclass(frozen=True)
class Variant:
    sku: str
    name: str
    price: str  # as the page writes it: "12.50"


@dataclass(frozen=True)
class Product:
    slug: str
    name: str
    variants: tuple[Variant, ...]


#: Each category's listing pages, each page's products, in order.
CATALOGUE: dict[str, list[list[Product]]] = {
    "Mugs": [
        [
            Product(
                "classic-mug",
                "Classic mug",
                (
                    Variant("MUG-CL-S", "Small", "9.00"),
                    Variant("MUG-CL-L", "Large", "12.50"),
                ),
            ),
            Product("travel-mug", "Travel mug", (Variant("MUG-TR", "One size", "18.90"),)),
            Product(
                "espresso-cup",
                "Espresso cup",
                (
                    Variant("CUP-ES-W", "White", "6.00"),
                    Variant("CUP-ES-B", "Black", "6.00"),
                    Variant("CUP-ES-R", "Red", "6.50"),
                ),
            ),
        ],
        [
            Product(
                "tea-mug",
                "Tea mug, ä l'ancienne",
                (
                    Variant("MUG-TEA-1", "With lid", "15.00"),
                    Variant("MUG-TEA-2", "Without lid", "13.00"),
                ),
            ),
            Product("camp-mug", "Camp mug", (Variant("MUG-CAMP", "Enamel", "11.00"),)),
        ],
    ],
    "T-shirts": [
        [
            Product(
                "logo-tee",
                "Logo tee",
                (
                    Variant("TEE-LOGO-S", "S", "20.00"),
                    Variant("TEE-LOGO-M", "M", "20.00"),
                    Variant("TEE-LOGO-L", "L", "22.00"),
                ),
            ),
            Product("plain-tee", "Plain tee", (Variant("TEE-PLAIN", "One size", "14.00"),)),
            Product(
                "long-sleeve",
                "Long sleeve",
                (
                    Variant("TEE-LS-M", "M", "26.00"),
                    Variant("TEE-LS-L", "L", "26.00"),
                ),
            ),
        ],
    ],
}


def listing_path(category: str, number: int) -> str:
    """The path of a category's listing page ``number`` (from 1)."""
    base = f"/category/{category.lower()}/"
    return base if number == 1 else f"{base}page/{number}/"


def product_path(product: Product) -> str:
    return f"/product/{product.slug}/"


def _next_href(number: int) -> str:
    """The link from listing page ``number`` to the next one, relative to it."""
    return f"page/{number + 1}/" if number == 1 else f"../{number + 1}/"


def _document(title: str, body: str) -> Page:
    return Page(
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)} | Demo shop</title></head>\n<body>\n"
        f"<nav><a href='/'>Demo shop</a></nav>\n{body}</body></html>\n".encode()
    )


def shop_pages() -> dict[str, Page]:
    """The shop's pages, by path: every link in them is relative."""
    pages: dict[str, Page] = {}
    categories = "".join(
        f"<li><a href='{listing_path(name, 1)}'>{escape(name)}</a></li>" for name in CATALOGUE
    )
    pages["/"] = _document(
        "Home", f"<h1>Demo shop</h1>\n<ul class='categories'>{categories}</ul>\n"
    )
    for category, listing in CATALOGUE.items():
        for number, products in enumerate(listing, start=1):
            cards = "".join(
                f"<li class='card'><a class='product' href='{product_path(product)}'>"
                f"{escape(product.name)}</a></li>\n"
                for product in products
            )
            pagination = ""
            if number > 1:
                pagination += (
                    f"<a rel='prev' href='{listing_path(category, number - 1)}'>Previous</a> "
                )
            if number < len(listing):  # relative to this page: page.urljoin resolves it
                pagination += f"<a rel='next' href='{_next_href(number)}'>Next</a>"
            pages[listing_path(category, number)] = _document(
                category,
                f"<h1 class='category'>{escape(category)}</h1>\n"
                f"<ul class='products'>\n{cards}</ul>\n"
                f"<nav class='pagination'>{pagination}</nav>\n",
            )
            for product in products:
                rows = "".join(
                    f"<tr class='variant' data-sku='{v.sku}'><td class='name'>{escape(v.name)}</td>"
                    f"<td class='price' data-amount='{v.price}'>{v.price} EUR</td></tr>\n"
                    for v in product.variants
                )
                pages[product_path(product)] = _document(
                    product.name,
                    f"<p class='breadcrumb'><a href='{listing_path(category, 1)}'>"
                    f"{escape(category)}</a></p>\n<h1>  {escape(product.name)}\n</h1>\n"
                    f"<table class='variants'>\n{rows}</table>\n",
                )
    return pages


def shop(site: SiteServer) -> str:
    """Serve the shop on ``site``; the URL of its home page, the crawl's seed."""
    site.pages.update(shop_pages())
    return site.url("/")


def expected_items() -> dict[str, dict[str, object]]:
    """Every variant as the shop's router makes it an item, by SKU."""
    return {
        variant.sku: {
            "sku": variant.sku,
            "product": product.name,
            "variant": variant.name,
            "price": float(variant.price),
            "currency": "EUR",
            "category": category,
        }
        for category, listing in CATALOGUE.items()
        for products in listing
        for product in products
        for variant in product.variants
    }


def every_path() -> set[str]:
    """The paths of every page of the shop (what a crawl of it fetches, robots.txt aside)."""
    return set(shop_pages())
