"""A tiny threaded HTTP server that serves a generated site on 127.0.0.1 (or another
loopback address).

It records every request it answers, so tests assert on what a crawler really
fetched rather than on what it says it did.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    #: More headers of the answer: ``(("Set-Cookie", "a=1"),)``.
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Request:
    path: str
    time: float
    host: str = ""
    user_agent: str = ""
    wall_time: float = 0.0
    #: Every header of the request, by its lower-case name.
    headers: dict[str, str] = field(default_factory=dict, compare=False)
    method: str = "GET"
    body: bytes = b""


#: Answers a request itself: given the handler and how many times (1, 2, ...)
#: this path has been requested, this one included.
Behavior = Callable[[BaseHTTPRequestHandler, int], None]


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up early (a crawler stopped, a deadline) is no error here."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class SiteServer:
    """Serves ``pages`` (path -> Page) or ``behaviors`` (path -> Behavior) and logs each request."""

    pages: dict[str, Page] = field(default_factory=dict)
    behaviors: dict[str, Behavior] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    #: Seconds every answer waits, so a crawl is still running when a test intervenes.
    delay: float = 0.0

    #: Requests waiting out ``delay`` right now (before any byte of the answer is sent,
    #: so within the time the crawler holds the request open), and the most at once.
    in_flight: int = 0
    peak_in_flight: int = 0
    #: The loopback address and port to listen on (0: any free port), so that two sites
    #: can answer one URL from two addresses.
    host: str = "127.0.0.1"
    port: int = 0
    #: From this request on (counting from 1), answers wait until ``release()``: a crawl
    #: cannot finish before the test has done what it must do while it runs.
    hold_from: int | None = None
    #: Requests held right now.
    held: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._released = threading.Event()
        self._httpd = _QuietServer((self.host, self.port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def start(self) -> SiteServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def record(
        self,
        path: str,
        host: str = "",
        user_agent: str = "",
        headers: dict[str, str] | None = None,
        method: str = "GET",
        body: bytes = b"",
    ) -> tuple[int, int]:
        """Logs a request: how many of this path so far, and of all paths."""
        with self._lock:
            now = time.monotonic()
            request = Request(path, now, host, user_agent, time.time(), headers or {}, method, body)
            self.requests.append(request)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._lock.notify_all()
            return sum(request.path == path for request in self.requests), len(self.requests)

    def release(self) -> None:
        """Lets every held answer go, and the ones after it."""
        self._released.set()

    def hold(self, from_request: int) -> None:
        """Hold the answers from request ``from_request`` on (counting every request so
        far) until the next :meth:`release`: a crawl cannot end before the test stops it."""
        self.hold_from = from_request
        self._released.clear()

    def wait_if_held(self, count: int) -> None:
        if self.hold_from is not None and count >= self.hold_from:
            with self._lock:
                self.held += 1
                self._lock.notify_all()
            try:
                assert self._released.wait(60), "the site held a request for 60 s: never released"
            finally:
                with self._lock:
                    self.held -= 1

    def wait_for_held(self, count: int, *, timeout: float = 60) -> None:
        """Wait until ``count`` requests are held at once (``hold_from``): a crawler with
        that many threads has each of them in a fetch, none between pages."""
        with self._lock:
            held = self._lock.wait_for(lambda: self.held >= count, timeout)
        assert held, f"the site held {self.held} requests, not {count}, in {timeout}s"

    def answered(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def wait_for_requests(self, count: int, *, timeout: float = 30) -> None:
        with self._lock:
            answered = self._lock.wait_for(lambda: len(self.requests) >= count, timeout)
        assert answered, f"the site saw {len(self.requests)} requests, not {count}, in {timeout}s"

    def fetched(self, paths: Iterable[str]) -> bool:
        """True once every one of ``paths`` has been requested."""
        return set(paths) <= set(self.fetch_counts())

    def fetch_counts(self) -> Counter[str]:
        with self._lock:
            return Counter(request.path for request in self.requests)

    def asked(self) -> Counter[tuple[str, str, bytes]]:
        """Each request's method, path and body, counted."""
        with self._lock:
            return Counter((r.method, r.path, r.body) for r in self.requests)


def _handler_for(server: SiteServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        #: A POST's body (``behaviors`` read it here).
        body = b""

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.body = self.rfile.read(length)
            self.do_GET()

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            nth, count = server.record(
                self.path,
                self.headers.get("Host", ""),
                self.headers.get("User-Agent", ""),
                {name.lower(): value for name, value in self.headers.items()},
                self.command,
                self.body,
            )
            try:
                server.wait_if_held(count)
                time.sleep(server.delay)
            finally:
                server.answered()
            behavior = server.behaviors.get(self.path)
            page = server.pages.get(self.path, NOT_FOUND)
            etag = dict(page.headers).get("ETag")
            if behavior is not None:
                behavior(self, nth)
            elif etag is not None and self.headers.get("If-None-Match") == etag:
                send(self, Page(b"", status=304, headers=(("ETag", etag),)))  # not modified
            else:
                send(self, page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


NOT_FOUND = Page(b"not found", content_type="text/plain", status=404)


def send(handler: BaseHTTPRequestHandler, page: Page, **headers: str) -> None:
    handler.send_response(page.status)
    handler.send_header("Content-Type", page.content_type)
    handler.send_header("Content-Length", str(len(page.body)))
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    for name, value in page.headers:
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(page.body)


def html(*hrefs: str, extra: str = "") -> Page:
    """An HTML page linking to each of ``hrefs`` the way upstream expects."""
    anchors = "".join(f'<a href="{href}">link</a>\n' for href in hrefs)
    return Page(f"<html><body>\n{anchors}{extra}</body></html>\n".encode())


def generate_site(
    base_url: str, *, pages: int, links_per_page: int, seed: int = 1
) -> dict[str, Page]:
    """``pages`` pages, each with ``links_per_page`` absolute links.

    Page ``i`` always links to page ``i + 1``, so every page is reachable from
    ``/page/0.html``; the other links point at random pages.
    """
    rng = random.Random(seed)
    site = {}
    for i in range(pages):
        targets = [(i + 1) % pages] + [rng.randrange(pages) for _ in range(links_per_page - 1)]
        site[page_path(i)] = html(*(base_url + page_path(t) for t in targets))
    return site


def page_path(i: int) -> str:
    return f"/page/{i}.html"


@dataclass(frozen=True)
class DepthSite:
    """A site for breadth-first ordering: the seed links to one fast depth-1 page, which
    leads to ``wide`` depth-2 pages of ``fanout`` depth-3 pages each, and to ``slow``
    depth-1 pages whose first answer takes ``stall`` seconds (past the crawler's fetch
    deadline: they come back as retries, while the deeper pages are queued)."""

    seed: str
    slow: int
    depth_3: int


def depth_site(
    server: SiteServer, *, slow: int = 5, wide: int = 20, fanout: int = 15, stall: float = 1.0
) -> DepthSite:
    base = server.base_url
    server.pages["/d0.html"] = html(
        base + "/d1/fast.html", *(f"{base}/d1/slow/{i}.html" for i in range(slow))
    )
    server.pages["/d1/fast.html"] = html(*(f"{base}/d2/{j}.html" for j in range(wide)))
    for j in range(wide):
        server.pages[f"/d2/{j}.html"] = html(
            *(f"{base}/d3/{j * fanout + k}.html" for k in range(fanout))
        )
    for n in range(wide * fanout):
        server.pages[f"/d3/{n}.html"] = html()

    def stalls_once(handler: BaseHTTPRequestHandler, nth: int) -> None:
        if nth == 1:
            time.sleep(stall)  # the crawler has given up this try by now: no answer
            handler.close_connection = True
        else:
            send(handler, html())

    for i in range(slow):
        server.behaviors[f"/d1/slow/{i}.html"] = stalls_once
    return DepthSite(base + "/d0.html", slow, wide * fanout)


def overtaken(requests: list[Request]) -> int:
    """Depth-3 pages fetched before the last depth-1 page was (its last request)."""
    last = max(i for i, request in enumerate(requests) if request.path.startswith("/d1/"))
    return sum(request.path.startswith("/d3/") for request in requests[:last])
