"""Page handlers: a function of the user's that workers call for every HTML page fetched.

A handler takes a :class:`Page` and returns a ``dict`` (the page record's ``data``), or
None, or a :class:`Handled` naming extra URLs to follow besides the data.  A worker
loads the handlers its own configuration names (``crawler worker --handler
package.module:function``, or ``CRAWLER_HANDLERS``), never one a message names; a crawl
chooses one of them (the seeder's ``--handler``), and a message naming one the worker
did not load is refused and dead-lettered.

A handler that raises, or runs past ``CRAWLER_HANDLER_TIMEOUT`` seconds, fails that
page's handler step only: the page's record says ``handler_error`` (``handler-failed:``
and the exception's one-line summary), its links are followed, and the fetch is not
retried.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urljoin

import requests
from selectolax.lexbor import LexborHTMLParser

from crawler.errors import InvalidMessage, shown
from crawler.links.extraction import decoded


@dataclass(frozen=True)
class Page:
    """What a handler is given of a page.

    Parameters:
      url(str): The URL the crawl asked for.
      final_url(str): The URL the body came from, after redirects.
      status(int): The HTTP status.
      headers(Mapping): The response's headers (case-insensitive keys).
      body(bytes): The body, decompressed.
    """

    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    @cached_property
    def text(self) -> str:
        """The body decoded in the page's encoding, as the link extractor decodes it
        (on first use)."""
        return decoded(self.body, self.headers.get("Content-Type"))

    @cached_property
    def tree(self) -> LexborHTMLParser:
        """The parsed document (selectolax's Lexbor tree): parsed once, on first use,
        and shared with the link extractor."""
        return LexborHTMLParser(self.text)


def page_of(url: str, response: requests.Response, body: bytes) -> Page:
    """The :class:`Page` of a response whose ``body`` was read."""
    return Page(
        url=url,
        final_url=response.url,
        status=response.status_code,
        headers=response.headers,
        body=body,
    )


def followed(outcome: Outcome | None, base: str) -> list[str]:
    """The http(s) URLs a handler asked to follow, resolved against the page's URL."""
    if outcome is None:
        return []
    urls = (urljoin(base, url) for url in outcome.follow)
    return [url for url in urls if url.startswith(("http://", "https://"))]


@dataclass(frozen=True)
class Handled:
    """What a handler may return instead of a ``dict``: the data and extra URLs to
    follow (absolute, or relative to the page), each subject to the crawl's scope,
    robots.txt and budgets like the page's own links."""

    data: dict[str, Any] | None = None
    follow: list[str] = field(default_factory=list)


Handler = Callable[[Page], "dict[str, Any] | Handled | None"]


@dataclass(frozen=True)
class Outcome:
    """What came of a handler on one page: ``data`` for the record, URLs to ``follow``,
    or the ``error`` that failed the step."""

    data: dict[str, Any] | None = None
    follow: list[str] = field(default_factory=list)
    error: str | None = None


def load(spec: str) -> Handler:
    """The function ``package.module:function`` names; ValueError saying what is wrong."""
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise ValueError(f"{spec!r} is not package.module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"cannot import {module_name!r}: {e}") from e
    handler = getattr(module, name, None)
    if not callable(handler):
        raise ValueError(f"{module_name!r} has no function {name!r}")
    return handler  # type: ignore[no-any-return]


class Handlers:
    """The handlers a process loaded, by the name a crawl chooses them with.

    Parameters:
      specs(Iterable): Their names, ``package.module:function``.
      timeout(float): Seconds a handler may take on one page.
    """

    def __init__(self, specs: Iterable[str] = (), timeout: float = 1.5) -> None:
        self.timeout = timeout
        self._loaded: dict[str, Handler] = {}
        for spec in specs:
            self.load(spec)

    def load(self, spec: str) -> None:
        """Load one more (``--local --handler``); ValueError when it cannot be loaded."""
        self._loaded[spec] = load(spec)

    def add(self, name: str, handler: Handler) -> None:
        """Take a function as the handler ``name`` (:class:`crawler.api.Crawl`'s)."""
        self._loaded[name] = handler

    @property
    def names(self) -> list[str]:
        return list(self._loaded)

    def chosen(self, name: str | None) -> Handler | None:
        """The handler a crawl's messages name (None: none); a name this process did not
        load is an :class:`~crawler.errors.InvalidMessage`."""
        if name is None:
            return None
        handler = self._loaded.get(name)
        if handler is None:
            loaded = ", ".join(self._loaded) or "none"
            raise InvalidMessage(
                f"message options: handler {shown(repr(name))} is not one this worker"
                f" loaded (CRAWLER_HANDLERS: {loaded})"
            )
        return handler

    def run(self, handler: Handler, page: Page) -> Outcome:
        """Call ``handler`` on ``page``, within :attr:`timeout` seconds."""
        try:
            with _watchdog.bound(self.timeout):
                returned = handler(page)
        except HandlerTimeout:
            return Outcome(error=f"handler-failed: took longer than {self.timeout:g}s")
        except Exception as e:  # the user's code: any failure is that page's handler step's
            return Outcome(error=f"handler-failed: {_one_line(e)}")
        if isinstance(returned, Handled):
            data, follow = returned.data, list(returned.follow)
        else:
            data, follow = returned, []
        if data is not None and not isinstance(data, dict):
            return Outcome(error=f"handler-failed: returned {type(data).__name__}, not a dict")
        try:
            json.dumps(data)
        except (TypeError, ValueError) as e:
            return Outcome(error=f"handler-failed: its data is not JSON: {_one_line(e)}")
        if not all(isinstance(url, str) for url in follow):
            return Outcome(error="handler-failed: URLs to follow must be strings")
        return Outcome(data=data, follow=follow)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return shown(f"{type(error).__name__}: {text}" if text else type(error).__name__)


class HandlerTimeout(BaseException):
    """Raised in a handler's thread when it ran past its time (a BaseException, so that
    the handler's own ``except Exception`` does not swallow it)."""


class _Watchdog:
    """One thread for every handler's time bound: it raises :class:`HandlerTimeout` in
    a thread whose handler ran past its deadline, as Dramatiq's ``time_limit`` does for
    a whole message (an asynchronous exception: it lands when the handler runs Python
    code next).  Checked every :data:`TICK` seconds: no thread, nor timer, a page."""

    TICK = 0.05

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deadlines: dict[int, float] = {}
        self._thread: threading.Thread | None = None

    def _watch(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                late = [thread for thread, at in self._deadlines.items() if at <= now]
                for thread in late:
                    del self._deadlines[thread]
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(thread), ctypes.py_object(HandlerTimeout)
                    )

    @contextmanager
    def bound(self, seconds: float) -> Iterator[None]:
        """Run the block within ``seconds``, or have it interrupted."""
        thread = threading.get_ident()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="handlers", daemon=True)
                self._thread.start()
            self._deadlines[thread] = time.monotonic() + seconds
        try:
            yield
        finally:
            with self._lock:
                self._deadlines.pop(thread, None)


_watchdog = _Watchdog()
