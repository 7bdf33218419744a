"""Misbehaving pages for the test site: each a :data:`~tests.site_server.Behavior`."""

from __future__ import annotations

import gzip
import select
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from http.server import BaseHTTPRequestHandler

from tests.site_server import Behavior, Page, send


def reset(handler: BaseHTTPRequestHandler) -> None:
    """Close the connection with a TCP reset, before any answer."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True
    handler.connection.close()


def failing_then(page: Page, *, failures: int, fail: Behavior) -> Behavior:
    def behave(handler: BaseHTTPRequestHandler, nth: int) -> None:
        if nth <= failures:
            fail(handler, nth)
        else:
            send(handler, page)

    return behave


def reset_then(page: Page, *, failures: int = 1) -> Behavior:
    return failing_then(page, failures=failures, fail=lambda handler, nth: reset(handler))


def status(code: int, **headers: str) -> Behavior:
    return lambda handler, nth: send(
        handler, Page(f"status {code}".encode(), "text/html", status=code), **headers
    )


def redirect(location: str) -> Behavior:
    return lambda handler, nth: send(handler, Page(b"", status=302), Location=location)


def slow_drip(held: list[float], *, size: int = 2000, interval: float = 0.1) -> Behavior:
    """Announce ``size`` bytes and send one every ``interval``; log how long the client stayed."""

    def behave(handler: BaseHTTPRequestHandler, nth: int) -> None:
        started = time.monotonic()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        try:
            for _ in range(size):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(interval)
        except OSError:
            pass
        finally:
            held.append(time.monotonic() - started)
            handler.close_connection = True

    return behave


#: Where an "endless" body ends after all (the test's server stops there).
ENDLESS = 60 * 1024 * 1024


def endless_body(sent: list[int], *, announce: int | None = None) -> Behavior:
    """An HTML body that never ends (or announces ``announce`` bytes); logs bytes sent:
    :data:`ENDLESS` when the client read it all, less when it hung up."""

    def behave(handler: BaseHTTPRequestHandler, nth: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        if announce is not None:
            handler.send_header("Content-Length", str(announce))
        handler.end_headers()
        handler.close_connection = True
        chunk = b"<p>" + b"x" * 65536 + b"</p>"
        total = 0
        try:
            while total < ENDLESS:
                handler.wfile.write(chunk)
                total += len(chunk)
        except OSError:
            pass
        finally:
            sent.append(total)

    return behave


@cache
def gzip_bomb_body() -> bytes:
    """100 MiB of HTML once decompressed, about 100 KiB on the wire; compressed once,
    and taking most of a second: call it before a crawl fetches it."""
    return gzip.compress(b"<p>" + b"\0" * (100 * 1024 * 1024), compresslevel=9)


def gzip_bomb(handler: BaseHTTPRequestHandler, nth: int) -> None:
    body = gzip_bomb_body()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Encoding", "gzip")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    with suppress(OSError):
        handler.wfile.write(body)


@contextmanager
def unanswered_port() -> Iterator[int]:
    """A port whose listen queue is full, so a new connect is never answered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    select.select([], fillers, [], 1)
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
