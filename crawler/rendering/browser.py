"""``--render``: a page the crawler fetched, loaded again in headless Chromium, so that
what scripts add to it (links above all) can be read.

One browser a process, driven by Playwright from an event loop on a thread of its own;
a worker thread hands it a :class:`RenderJob` and waits for the :class:`Rendered` page
(:meth:`Renderer.render`), no longer than the job's deadline.  Nothing starts until the
first render: a worker that never renders never starts a browser.

What the browser may do:

- The page itself is never fetched twice: its request is answered with the response
  the crawler fetched (robots.txt, ``--max-rate``, ``--max-per-host`` and the network
  guard were applied to it), and any other navigation of the page's window is refused.
- Every other request it makes (scripts, styles, XHR, frames, WebSockets) is seen
  first: from a page that was on a public address, one to a host with a private
  address is refused (the network guard's rule; the name is checked as it resolves
  here, the browser resolves it again itself, as behind a proxy); images, fonts and
  media are refused unless the crawl asks for them (``--render-media``); each carries
  the crawl's ``--header``s, its ``--auth-env`` credentials for their host only, its
  User-Agent, and goes through its ``--proxy``.  Service workers are blocked.
- Each crawl has a browser context of its own (cookies, storage, cache), whose tabs
  serve its renders one after another (:data:`TAB_USES` each; a tab whose render
  failed is closed): the crawl's cookies are copied in, none come back.
- The page settles (the network idle for 500 ms, or ``--render-wait`` seconds after
  its load event) within the job's deadline, else the attempt fails and is retried as
  a failed fetch is; so does a crashed tab or browser.  The DOM read back is capped.

At most ``CRAWLER_RENDER_PAGES`` tabs are open at once; the browser is replaced after
``CRAWLER_RENDER_RESTART`` pages, or once it crashed.  It runs on Chromium's
``--remote-debugging-pipe``: it exits when the process that drives it does, however
that ends (a clean exit closes it first; a killed process closes its pipe).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from crawler.errors import PermanentError, TransientError, shown
from crawler.fetching import network_guard
from crawler.rendering.chromium import CannotRender, check

if TYPE_CHECKING:
    from playwright.async_api import (
        Browser,
        BrowserContext,
        Page,
        Playwright,
        Route,
        WebSocketRoute,
    )

logger = logging.getLogger(__name__)

#: Resource types refused unless the crawl loads media (``--render-media``).
MEDIA = frozenset({"image", "font", "media"})
#: Response headers that describe the bytes on the wire, not the decoded body the page
#: is answered with.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
#: Seconds a thread waits past a job's deadline for the browser to give the page up:
#: within what the deadline leaves of the actor's time limit
#: (:data:`crawler.rendering.MARGIN`), so that Dramatiq's time limit never has to
#: interrupt a render (its exception, raised in a thread at any point, can leave a lock
#: such as a logging handler's held for good).
GRACE = 0.5
#: The DOM read back: the document's HTML, or None when it is longer than ``cap``
#: characters; its links' resolved ``href``s, the first ``most``.
_READ = """([cap, most]) => {
  const html = document.documentElement ? document.documentElement.outerHTML : "";
  const links = [];
  for (const a of document.querySelectorAll("a[href]")) {
    if (links.length >= most) break;
    links.push(a.href);
  }
  return {html: html.length > cap ? null : html, links: links, url: document.URL};
}"""


@dataclass(frozen=True)
class RenderJob:
    """A fetched page to render, and the crawl's rules for what the browser does.

    Parameters:
      url(str): The URL the body came from (after redirects).
      status(int): Its HTTP status.
      headers(tuple): Its response headers, ``(name, value)`` pairs.
      body(bytes): Its body, decoded.
      deadline(float): The ``time.monotonic()`` by which the render must have ended.
      crawl(str): The crawl's id: its pages share a browser context (cookies, storage),
        no other crawl's.
      public_only(bool): The page was on a public address: the browser may reach no
        other kind.
      user_agent(str): The crawl's User-Agent.
      headers_sent(tuple): The crawl's ``--header``s, ``(name, value)`` pairs.
      authorization(Mapping): Host to ``Authorization`` value (``--auth-env``).
      proxy(str): The crawl's proxy, or None.
      cookies(tuple): The crawl's cookies, as Playwright takes them.
      wait(float): Seconds to wait after the load event; None: until the network is idle.
      media(bool): Load images, fonts and media.
      max_chars(int): The longest DOM read back, in characters.
      max_links(int): Links read back at most.
    """

    url: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    deadline: float
    crawl: str = ""
    public_only: bool = False
    user_agent: str | None = None
    headers_sent: tuple[tuple[str, str], ...] = ()
    authorization: Mapping[str, str] = field(default_factory=dict)
    proxy: str | None = None
    cookies: tuple[Mapping[str, Any], ...] = ()
    wait: float | None = None
    media: bool = False
    max_chars: int = 10 * 1024 * 1024
    max_links: int = 1000


@dataclass(frozen=True)
class Rendered:
    """What the browser made of a page: the DOM as HTML, the resolved ``href`` of each
    ``a[href]`` in it, and the milliseconds the render took (from the job handed over to
    the DOM read back)."""

    html: str
    links: tuple[str, ...]
    ms: float = 0.0


#: Renders a tab serves before it is closed and a new one opened.
TAB_USES = 100
#: Browser contexts (one a crawl) a browser keeps at most; the least recently used
#: without a page in use is closed past it.
CONTEXTS = 8


class _Tab:
    """A page of a crawl's context, kept for the crawl's next render: the rules of the
    render it serves now route its requests."""

    def __init__(self, key: tuple[str, str | None, str | None], page: Page) -> None:
        self.key, self.page = key, page
        self.uses = 0
        self.rules: _Rules | None = None

    async def route(self, route: Route) -> None:
        if self.rules is None:
            await route.abort("blockedbyclient")
        else:
            await self.rules.route(route)

    async def web_socket(self, socket: WebSocketRoute) -> None:
        if self.rules is None:
            await socket.close(code=1008, reason="no render in progress")
        else:
            await self.rules.web_socket(socket)


class _Launched:
    """A browser, its contexts (one a crawl: its cookies stay its own) and their tabs,
    open or idle: no more than ``pages`` tabs at once.  Once retired it closes with its
    last tab in use."""

    def __init__(self, browser: Browser, pages: int) -> None:
        self.browser, self.pages = browser, pages
        self.contexts: OrderedDict[tuple[str, str | None, str | None], BrowserContext] = (
            OrderedDict()
        )
        self.idle: list[_Tab] = []
        self.using: Counter[tuple[str, str | None, str | None]] = Counter()
        self.open = 0
        self.rendered = 0
        self.retired = False

    async def tab_for(self, job: RenderJob) -> _Tab:
        """An idle tab of the job's crawl, or a new one (an idle tab of another crawl
        closed first, when as many as :attr:`pages` are open)."""
        key = (job.crawl, job.user_agent, job.proxy)
        self.using[key] += 1
        try:
            return await self._tab(key, job)
        except BaseException:
            self.using[key] -= 1
            raise

    async def _tab(self, key: tuple[str, str | None, str | None], job: RenderJob) -> _Tab:
        for tab in self.idle:
            if tab.key == key:
                self.idle.remove(tab)
                return tab
        if self.idle and len(self.idle) + self.open >= self.pages:
            await _close_page(self.idle.pop(0).page)
        context = self.contexts.get(key)
        if context is None:
            context = self.contexts[key] = await self.browser.new_context(
                user_agent=job.user_agent,
                proxy=None if job.proxy is None else {"server": job.proxy},
                service_workers="block",
            )
            await self._close_old_contexts()
        self.contexts.move_to_end(key)
        tab = _Tab(key, await context.new_page())
        await tab.page.route("**/*", tab.route)
        await tab.page.route_web_socket(lambda _url: True, tab.web_socket)
        return tab

    async def done_with(self, tab: _Tab, healthy: bool) -> None:
        """Keep ``tab`` for its crawl's next render, or close it (it failed, or served
        :data:`TAB_USES` renders, or its browser is retired)."""
        tab.rules, tab.uses = None, tab.uses + 1
        self.using[tab.key] -= 1
        if healthy and tab.uses < TAB_USES and not self.retired:
            self.idle.append(tab)
        else:
            await _close_page(tab.page)

    async def _close_old_contexts(self) -> None:
        """Past :data:`CONTEXTS`, close the least recently used contexts that have no
        tab in use (their idle tabs with them)."""
        for key in list(self.contexts)[: max(len(self.contexts) - CONTEXTS, 0)]:
            if self.using[key] > 0:
                continue
            self.idle = [tab for tab in self.idle if tab.key != key]
            del self.using[key]
            with contextlib.suppress(Exception):
                await self.contexts.pop(key).close()


async def _close_page(page: Page) -> None:
    with contextlib.suppress(Exception):
        await page.close()


class Renderer:
    """One process's browser (see the module): :meth:`render`, :meth:`close`.

    Parameters:
      pages(int): Pages open at once at most.
      restart_after(int): Pages a browser renders before it is replaced.
      executable(str): The Chromium to launch; None: :func:`crawler.rendering.chromium.check`'s.
    """

    def __init__(self, pages: int = 4, restart_after: int = 500) -> None:
        self.pages, self.restart_after = pages, restart_after
        self.launched = 0  # browsers started, for tests and figures
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._playwright: Playwright | None = None
        self._current: _Launched | None = None
        self._executable: str | None = None
        self._launching: asyncio.Lock | None = None
        self._open: asyncio.Semaphore | None = None
        self._at_exit = False

    def render(self, job: RenderJob) -> Rendered:
        """``job``'s page as the browser renders it; :class:`TransientError` when it does
        not settle by the deadline or the browser fails (retried as a failed fetch),
        :class:`PermanentError` when this machine cannot render or the DOM is too large."""
        loop, started = self._running_loop(), time.monotonic()
        future = asyncio.run_coroutine_threadsafe(self._render(job, started), loop)
        try:
            rendered = future.result(timeout=max(job.deadline - time.monotonic(), 0) + GRACE)
            return dataclasses.replace(rendered, ms=(time.monotonic() - started) * 1000)
        except concurrent.futures.TimeoutError:
            raise TransientError(f"the render of {shown(job.url)!r} took too long") from None
        finally:
            future.cancel()  # the time limit, say, interrupted the wait: the page is closed

    def close(self) -> None:
        """Close the browser and the driver, and stop the loop (at exit, by itself)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shut_down(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()
        self._open = self._launching = None  # bound to that loop: the next one makes its own

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                try:
                    self._executable = check()
                except CannotRender as e:
                    raise PermanentError(str(e)) from e
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_run_loop, args=(loop, ready), name="renderer", daemon=True
                )
                thread.start()
                ready.wait()
                if self._thread is None and not self._at_exit:
                    atexit.register(self.close)
                    self._at_exit = True
                self._loop, self._thread = loop, thread
            return self._loop

    async def _render(self, job: RenderJob, started: float) -> Rendered:
        if self._open is None or self._launching is None:
            self._open, self._launching = asyncio.Semaphore(self.pages), asyncio.Lock()
        left = job.deadline - time.monotonic()
        if left <= 0:
            raise TransientError("no time was left to render the page")
        try:
            await asyncio.wait_for(self._open.acquire(), left)
        except asyncio.TimeoutError:
            raise TransientError(f"no browser page came free within {left:.1f}s") from None
        try:
            launched = await self._browser()
            launched.open += 1
            try:
                return await _rendered(launched, job, started)
            finally:
                launched.open -= 1
                launched.rendered += 1
                await self._retire_if_done(launched)
        finally:
            self._open.release()

    async def _browser(self) -> _Launched:
        """The browser in use: started when there is none, replaced when it crashed or
        rendered :attr:`restart_after` pages."""
        assert self._launching is not None
        async with self._launching:
            current = self._current
            if (
                current is not None
                and current.browser.is_connected()
                and current.rendered + current.open < self.restart_after
            ):
                return current
            if current is not None:
                current.retired = True
                await self._retire_if_done(current)
            self._current = await self._launch()
            return self._current

    async def _launch(self) -> _Launched:
        from playwright.async_api import Error, async_playwright

        try:
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            browser = await self._playwright.chromium.launch(
                executable_path=self._executable, headless=True, args=["--disable-dev-shm-usage"]
            )
        except Error as e:
            raise TransientError(f"Chromium did not start: {_first_line(e)}") from e
        self.launched += 1
        logger.info("Started Chromium %s for --render.", browser.version)
        return _Launched(browser, self.pages)

    async def _retire_if_done(self, launched: _Launched) -> None:
        if launched.retired and launched.open == 0:
            with contextlib.suppress(Exception):
                await launched.browser.close()

    async def _shut_down(self) -> None:
        if self._current is not None:
            with contextlib.suppress(Exception):
                await self._current.browser.close()
            self._current = None
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None


def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


async def _rendered(launched: _Launched, job: RenderJob, started: float) -> Rendered:
    """Load ``job``'s page in a tab of its crawl's context and read it back once it
    settled (``started``: when the job was handed over).  The tab is kept for the
    crawl's next page unless this one failed."""
    from playwright.async_api import Error
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    rules, healthy = _Rules(job), False
    try:
        tab = await launched.tab_for(job)
    except Error as e:
        raise TransientError(f"the browser failed: {_first_line(e)}") from e
    tab.rules = rules
    try:
        if job.cookies:
            await tab.page.context.add_cookies(list(job.cookies))  # type: ignore[arg-type]
        left = _ms_left(job)
        if job.wait is None:
            await tab.page.goto(job.url, wait_until="networkidle", timeout=left)
        else:
            await tab.page.goto(job.url, wait_until="load", timeout=left)
            await tab.page.wait_for_timeout(min(job.wait * 1000, _ms_left(job)))
        read = await tab.page.evaluate(_READ, [job.max_chars, job.max_links])
        healthy = True
    except PlaywrightTimeout:
        raise TransientError(
            f"the page did not settle within {job.deadline - started:.1f}s"
            + (" (the network never went idle)" if job.wait is None else "")
        ) from None
    except Error as e:
        raise TransientError(f"the browser failed: {_first_line(e)}") from e
    finally:
        await launched.done_with(tab, healthy)
    if read["html"] is None:
        raise PermanentError(f"the rendered page is over {job.max_chars} characters")
    return Rendered(read["html"], tuple(read["links"]))


def _ms_left(job: RenderJob) -> float:
    left = job.deadline - time.monotonic()
    if left <= 0:
        raise TransientError("the render ran out of time")
    return left * 1000


class _Rules:
    """What the browser may fetch for one page (see the module)."""

    def __init__(self, job: RenderJob) -> None:
        self.job = job
        self.answered = False
        self.headers = {name.lower(): value for name, value in job.headers_sent}

    async def route(self, route: Route) -> None:
        request = route.request
        frame = request.frame if request.is_navigation_request() else None
        if frame is not None and frame.parent_frame is None:  # the page's own window
            if self.answered or request.url.split("#")[0] != self.job.url.split("#")[0]:
                await self._refuse(route, "another page")
                return
            self.answered = True
            await route.fulfill(
                status=self.job.status,
                headers={n: v for n, v in self.job.headers if n.lower() not in _WIRE_HEADERS},
                body=self.job.body,
            )
            return
        if request.resource_type in MEDIA and not self.job.media:
            await self._refuse(route, request.resource_type)
            return
        host = urlsplit(request.url).hostname or ""
        if not await self._reachable(host):
            await self._refuse(route, f"{host}, not public")
            return
        headers = {**request.headers, **self.headers}
        authorization = self.job.authorization.get(host.lower())
        if authorization is not None:
            headers["authorization"] = authorization
        await route.continue_(headers=headers)

    async def web_socket(self, socket: WebSocketRoute) -> None:
        if await self._reachable(urlsplit(socket.url).hostname or ""):
            socket.connect_to_server()
        else:
            await socket.close(code=1008, reason="refused by the crawler's network guard")

    async def _reachable(self, host: str) -> bool:
        """Whether the page may reach ``host``: any host, from a page that was not on a
        public address; a public one only, from one that was."""
        if not self.job.public_only:
            return True
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, network_guard.is_public, host)

    async def _refuse(self, route: Route, what: str) -> None:
        logger.debug("--render: refused %s (%s)", shown(route.request.url), what)
        await route.abort("blockedbyclient")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return shown(text[0]) if text else type(error).__name__
