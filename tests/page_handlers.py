"""Page handlers the tests load (``tests.page_handlers:NAME``)."""

from __future__ import annotations

import time
from typing import Any

from crawler.handlers import Handled, Page


def heading(page: Page) -> dict[str, Any]:
    """The first ``<h1>``, and the size of the body."""
    h1 = page.tree.css_first("h1")
    return {"h1": h1.text() if h1 is not None else None, "bytes": len(page.body)}


def failing(page: Page) -> dict[str, Any]:
    """Raises on the pages whose URL ends with 3.html or 4.html; on 5.html, runs too long."""
    if page.url.endswith(("3.html", "4.html")):
        raise ValueError(f"no price on\n{page.url}")
    if page.url.endswith("5.html"):
        time.sleep(5)
    return {"ok": True}


def hidden_links(page: Page) -> Handled:
    """Asks to follow ``hidden.html`` (relative), which no page links to."""
    return Handled(data={"status": page.status}, follow=["hidden.html"])
