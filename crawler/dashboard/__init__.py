"""``crawler dashboard``: a live page for any crawl, read-only.

A small Starlette app served by uvicorn, bound to 127.0.0.1 by default: ``/`` lists the
recent crawls, ``/crawl/ID`` shows one (its page polls ``/api/crawls/ID`` every
second), and its chart is uPlot, vendored in ``static/`` (MIT licence) so that no
network is needed.  The same page serves ``--wait --dashboard`` and ``--local
--dashboard``, from a thread of the seeder's own.  Nothing it does changes a crawl.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from crawler.dashboard.reading import Reader

STATIC = Path(__file__).parent / "static"
#: ``crawler dashboard``'s port by default.
PORT = 8500


def app(reader: Reader) -> Starlette:
    """The dashboard's ASGI app, reading crawls through ``reader``."""

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def crawl_page(request: Request) -> Response:
        return FileResponse(STATIC / "crawl.html")

    async def crawls(request: Request) -> Response:
        return JSONResponse(reader.crawls())

    async def crawl(request: Request) -> Response:
        figures = reader.crawl(request.path_params["crawl_id"])
        if figures is None:
            return JSONResponse({"error": "no such crawl"}, status_code=404)
        return JSONResponse(figures)

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

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
