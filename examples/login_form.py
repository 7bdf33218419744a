"""A site behind a login form, crawled as a Scrapy spider's ``FormRequest`` or a
Crawlee crawler's POST does it (docs/extracting.md, "Requests with a method and a body").

The seed is the login page: its handler POSTs the form with the user and password of
the worker's environment (``SHOP_USER``, ``SHOP_PASSWORD``: never in the code nor in
the messages' options), labelled ``account``.  The site answers with a session cookie
and a redirect to the account page, whose orders are then fetched with that cookie on
whichever worker takes them: a crawl's cookies are its workers' (``--cookies``, on by
default).  In one process, with ``SHOP_USER`` and ``SHOP_PASSWORD`` set::

    crawler crawl --local https://shop.example/login \\
        --handler examples.login_form:router --follow handlers --items orders.jsonl
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from crawler import Page, Request, Router

router = Router()


@router.default  # the seed: the login page and its form
def login_page(page: Page) -> Iterator[Request]:
    form = page.tree.css_first("form#login")
    if form is None:
        return
    yield Request(
        page.urljoin(form.attributes.get("action") or ""),
        method="POST",
        form={"user": os.environ["SHOP_USER"], "password": os.environ["SHOP_PASSWORD"]},
        label="account",
    )


@router.route("account")  # where the login's redirect lands: the orders
def account(page: Page) -> None:
    page.enqueue_links("a.order", label="order")


@router.route("order")
def order(page: Page) -> Iterator[dict[str, Any]]:
    heading = page.tree.css_first("h1")
    total = page.tree.css_first(".total")
    if heading is not None and total is not None:
        yield {"order": heading.text(strip=True), "total": total.text(strip=True)}
