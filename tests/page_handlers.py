"""Page handlers the tests load (``tests.page_handlers:NAME``)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from crawler.handlers import Handled, Page, Request


def heading(page: Page) -> dict[str, Any]:
    """The first ``<h1>``, and the size of the body."""
    h1 = page.tree.css_first("h1")
    return {"h1": h1.text() if h1 is not None else None, "bytes": len(page.body)}


def links_seen(page: Page) -> dict[str, Any]:
    """Whether the page was rendered, and the ``href``s of its tree's links (``--render``:
    the rendered DOM's)."""
    hrefs = [a.attributes.get("href") for a in page.tree.css("a[href]")]
    return {"rendered": page.rendered is not None, "links": hrefs}


def failing(page: Page) -> dict[str, Any]:
    """Raises on the pages whose URL ends with 3.html or 4.html; on 5.html, runs too long."""
    if page.url.endswith(("3.html", "4.html")):
        raise ValueError(f"no price on\n{page.url}")
    if page.url.endswith("5.html"):
        time.sleep(1)
    return {"ok": True}


def hidden_links(page: Page) -> Handled:
    """Asks to follow ``hidden.html`` (relative), which no page links to."""
    return Handled(data={"status": page.status}, follow=["hidden.html"])


#: The URLs ``malformed_follow`` asks for that cannot be parsed: a page's record counts
#: them dropped.
MALFORMED = ("http://[::1", "//[::2", Request("http://[::3", "item", {"from": "here"}))


def malformed_follow(page: Page) -> Handled:
    """Asks to follow the :data:`MALFORMED` URLs (a malformed authority: absolute,
    network-path, and a labelled request's) and ``hidden.html``."""
    return Handled(data={"ok": True}, follow=[*MALFORMED, "hidden.html"])


#: What ``misbehaving`` on 7.html waits for (12 s at most): a test sets it to let go.
STUCK = threading.Event()


def _recurse(depth: int) -> int:
    return _recurse(depth + 1) + 1


def misbehaving(page: Page) -> dict[str, Any]:
    """Each misbehaviour issue 41 names, on a page of its own (``N.html``); other pages
    get ``{"ok": True}``."""
    name = page.url.rsplit("/", 1)[-1]
    if name == "1.html":
        sys.exit(3)
    if name == "2.html":
        raise KeyboardInterrupt
    if name == "3.html":
        deep: dict[str, Any] = {}
        for _ in range(10_000):  # past the recursion limit (1,000)
            deep = {"a": deep}
        return deep
    if name == "4.html":
        return {"price": float("nan")}
    if name == "5.html":
        return {"price": [1, {"max": float("inf")}]}
    if name == "6.html":
        return {"title": "caf\udce9"}
    if name == "7.html":
        STUCK.wait(12)  # blocked in C: no exception of Python's lands before it returns
    if name == "8.html":
        _recurse(0)
    if name == "9.html":
        threading.Event().wait()  # blocked in C for ever
    return {"ok": True}


def products(page: Page) -> Handled:
    """An item a ``.product`` element of the page's tree (``--render``: the rendered DOM's)."""
    return Handled(items=[{"name": node.text()} for node in page.tree.css(".product")])
