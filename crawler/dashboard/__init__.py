"""``crawler dashboard``: a live page for any crawl, read-only.

A small Starlette app served by uvicorn, bound to 127.0.0.1 by default: ``/`` lists the
recent crawls, ``/crawl/ID`` shows one (its page polls ``/api/crawls/ID`` every
second), and its chart is uPlot, vendored in ``static/`` (MIT licence) so that no
network is needed.  The same page serves ``--wait --dashboard`` and ``--local
--dashboard``, from a thread of the seeder's own.  Nothing it does changes a crawl.
A dedup store that does not answer is a 503 and its reason (logged once while it
stays down), not an error of the dashboard's own.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from crawler.dashboard.reading import Reader
from crawler.environment import dedup_store_name, dedup_url
from crawler.errors import why
from crawler.stores import store_errors

STATIC = Path(__file__).parent / "static"
#: ``crawler dashboard``'s port by default.
PORT = 8500

logger = logging.getLogger("crawler.dashboard")


class _StoreWatch:
    """Whether the dedup store answered lately: what a request that could not reach it
    answers, logged once an outage (not at every poll of every page)."""

    def __init__(self) -> None:
        self._down = False
        self._lock = threading.Lock()

    def unreachable(self, error: BaseException) -> Response:
        said = store_unreachable(error)
        with self._lock:
            first, self._down = not self._down, True
        if first:
            logger.warning("dashboard: %s", said)
        return JSONResponse({"error": said}, status_code=503)

    def answered(self) -> None:
        with self._lock:
            back, self._down = self._down, False
        if back:
            logger.warning("dashboard: %s answers again", dedup_store_name())


def store_unreachable(error: BaseException) -> str:
    """What the dashboard says of a dedup store that did not answer: where, why, and
    what to do."""
    setting = "MEMCACHED_SERVERS (or DEDUP_URL for Redis)" if dedup_url() is None else "DEDUP_URL"
    return f"cannot reach {dedup_store_name()}: {why(error)}; start it or set {setting}"


def app(reader: Reader) -> Starlette:
    """The dashboard's ASGI app, reading crawls through ``reader``."""
    store = _StoreWatch()

    def read(what: Callable[[], Any]) -> Response:
        try:
            figures = what()
        except store_errors() as e:
            return store.unreachable(e)
        store.answered()
        if figures is None:
            return JSONResponse({"error": "no such crawl"}, status_code=404)
        return JSONResponse(figures)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def crawl_page(request: Request) -> Response:
        return FileResponse(STATIC / "crawl.html")

    async def crawls(request: Request) -> Response:
        return read(reader.crawls)

    async def crawl(request: Request) -> Response:
        return read(lambda: reader.crawl(request.path_params["crawl_id"]))

    return Starlette(
        routes=[
            Route("/", index),
            Route("/crawl/{crawl_id}", crawl_page),
            Route("/api/crawls", crawls),
            Route("/api/crawls/{crawl_id}", crawl),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )


def server(reader: Reader, host: str = "127.0.0.1", port: int = PORT) -> uvicorn.Server:
    config = uvicorn.Config(app(reader), host=host, port=port, log_level="warning")
    return uvicorn.Server(config)


def serve(reader: Reader, host: str = "127.0.0.1", port: int = PORT) -> int:
    """``crawler dashboard``: serve until Ctrl-C."""
    print(f"dashboard: http://{host}:{port}/", flush=True)
    server(reader, host, port).run()
    return 0


class Background:
    """The dashboard served from a thread while this process crawls or waits
    (``--dashboard``); :meth:`close` stops it."""

    def __init__(self, reader: Reader, port: int, host: str = "127.0.0.1") -> None:
        self.reader = reader
        self._server = server(reader, host, port)  # off the main thread: no signal handlers
        self._thread = threading.Thread(target=self._server.run, name="dashboard", daemon=True)
        self._thread.start()
        self.address = f"http://{host}:{port}"

    def wait_started(self, timeout: float = 10.0) -> bool:
        """Whether it listens within ``timeout`` seconds (uvicorn says so by a flag)."""
        deadline = time.monotonic() + timeout
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return bool(self._server.started)

    @property
    def serving(self) -> bool:
        return bool(self._server.started) and self._thread.is_alive()

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)


def until_stopped(ready: Callable[[], None] = lambda: None) -> None:
    """Wait for Ctrl-C or SIGTERM (``--local --dashboard``, once the crawl ended: the page
    stays until the command is stopped); the signals' handlers then as they were.  From
    the main thread only, the one Python hands signals to.  ``ready`` is called once the
    signals are taken (what it says may be answered by one at once)."""
    stopped = threading.Event()
    kinds = (signal.SIGINT, signal.SIGTERM)
    before = {kind: signal.signal(kind, lambda *_: stopped.set()) for kind in kinds}
    try:
        ready()
        while not stopped.wait(0.5):
            pass
    finally:
        for kind, handler in before.items():
            signal.signal(kind, handler)
