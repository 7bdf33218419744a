"""A site behind a login form, and a JSON API that wants a POST: what
``examples/login_form.py`` and ``examples/search_api.py`` crawl in the tests."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

from tests.site_server import Behavior, Page, SiteServer, send

USER, PASSWORD, SESSION = "ada", "analytical-engine", "s3cret-session"
ORDERS = 12
#: The search API's pages, and results a page.
SEARCH_PAGES, RESULTS = 4, 3
FORBIDDEN = Page(b"log in first", content_type="text/plain", status=403)


def logged_in(handler: BaseHTTPRequestHandler) -> bool:
    return f"session={SESSION}" in (handler.headers.get("Cookie") or "")


def log_in(handler: BaseHTTPRequestHandler, nth: int) -> None:
    """The form's target: a session cookie and a redirect to the account, for the
    right user and password in a POST; 403 otherwise."""
    form = parse_qs(getattr(handler, "body", b"").decode())
    if handler.command != "POST" or form != {"user": [USER], "password": [PASSWORD]}:
        send(handler, FORBIDDEN)
        return
    cookie = f"session={SESSION}; Path=/; HttpOnly"
    send(handler, Page(b"", status=303, headers=(("Set-Cookie", cookie), ("Location", "/account"))))


def account(handler: BaseHTTPRequestHandler, nth: int) -> None:
    links = "".join(f'<a class="order" href="/orders/{n}">Order {n}</a>' for n in range(ORDERS))
    send(handler, Page(f"<h1>Account</h1>{links}".encode()) if logged_in(handler) else FORBIDDEN)


def order(n: int) -> Behavior:
    def answer(handler: BaseHTTPRequestHandler, nth: int) -> None:
        body = f'<h1>Order {n}</h1><p class="total">{n * 10} EUR</p>'.encode()
        send(handler, Page(body) if logged_in(handler) else FORBIDDEN)

    return answer


def search(handler: BaseHTTPRequestHandler, nth: int) -> None:
    """The search API: ``{"query": ..., "page": N}`` in a POST's JSON body."""
    try:
        asked = json.loads(getattr(handler, "body", b""))
        query, page = asked["query"], int(asked["page"])
    except (ValueError, KeyError, TypeError):
        send(handler, Page(b"bad query", content_type="text/plain", status=400))
        return
    results = [{"query": query, "page": page, "n": k} for k in range(RESULTS)]
    answer = {"results": results, "page": page, "pages": SEARCH_PAGES}
    send(handler, Page(json.dumps(answer).encode(), content_type="application/json"))


def serve_forms(site: SiteServer) -> SiteServer:
    """``site`` with the login form (``/login``), the account and its orders, and the
    search page (``/search.html``) and its API."""
    site.pages["/login"] = Page(
        b'<form id="login" action="/session" method="post">'
        b'<input name="user"><input name="password" type="password"></form>'
        b'<a href="/account">Your account</a>'
    )
    site.behaviors["/session"] = log_in
    site.behaviors["/account"] = account
    for n in range(ORDERS):
        site.behaviors[f"/orders/{n}"] = order(n)
    site.pages["/search.html"] = Page(
        b'<form data-api="/api/search" data-query="tea"><input name="q"></form>'
    )
    site.behaviors["/api/search"] = search
    return site


def every_order() -> list[dict[str, str]]:
    return [{"order": f"Order {n}", "total": f"{n * 10} EUR"} for n in range(ORDERS)]
