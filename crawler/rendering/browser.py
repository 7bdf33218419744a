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
- Every other request of the page (scripts, styles, XHR, frames, a dedicated worker's)
  is made for it here, hop by hop (:class:`_Rules`): each hop's host is checked first
  (from a page that was on a public address, one with a private address is refused:
  the network guard's rule, the name checked as it resolves here, Playwright's driver
  resolving it again itself, as behind a proxy), a redirect is followed here, never by
  the browser, and the page is answered with the last hop's response; images, fonts and
  media are refused unless the crawl asks for them (``--render-media``); each hop
  carries the crawl's ``--header``s, its ``--auth-env`` credentials for their host only,
  its User-Agent, and goes through its ``--proxy``.  WebSockets are checked likewise.
- Nothing else reaches the network: a window the page opens (``window.open``, a link
  with ``target=_blank``) has every request refused and is closed; service workers are
  blocked, shared workers disabled (:data:`crawler.rendering.chromium.SWITCHES`: no
  route of Playwright's sees their requests), downloads refused.
- Each crawl has a browser context of its own (cookies, storage, cache), whose tabs
  serve its renders one after another (:data:`TAB_USES` each; a tab whose render
  failed is closed): the crawl's cookies are copied in, none come back.
- The page settles (the network idle for 500 ms, or ``--render-wait`` seconds after
  its load event) by :data:`GRACE` before the job's deadline, else the attempt fails
  and is retried as a failed fetch is; so does a crashed tab or browser.  The DOM read
  back is capped.

At most ``CRAWLER_RENDER_PAGES`` tabs render at once, shared fairly (:class:`_Slots`:
the page due first gets the next free one, and a page that would otherwise run out of
time takes the one a loading page has held for :data:`FAIR_SHARE` seconds already);
the browser is replaced after ``CRAWLER_RENDER_RESTART`` pages, or once it
crashed.  It runs on Chromium's ``--remote-debugging-pipe``: it exits when the process
that drives it does, however that ends (a clean exit closes it first; a killed process
closes its pipe).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import heapq
import itertools
import logging
import random
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin, urlsplit

from crawler.errors import PermanentError, TransientError, shown
from crawler.fetching import network_guard
from crawler.fetching.bounded_fetch import retry_after_ms
from crawler.rendering.chromium import CannotRender, arguments, check

if TYPE_CHECKING:
    from playwright.async_api import (
        APIRequestContext,
        APIResponse,
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
#: Seconds before a job's deadline by which the browser gives the page up, so that the
#: thread waiting for it has it back by the deadline itself: within the actor's time
#: limit (:func:`crawler.rendering.job_of`), so that Dramatiq's time limit never has to
#: interrupt a render (its exception, raised in a thread at any point, can leave a lock
#: such as a logging handler's held for good).
GRACE = 0.5
#: Seconds a render is sure to hold its browser page: a page waiting for one while all
#: are in use, once it has this long left, takes the one a loading page has held
#: longest, if that one has held it this long (:class:`_Slots`).
FAIR_SHARE = 3.0
#: Redirects one request of the browser follows at most (the Fetch standard's 20).
REDIRECTS = 20
#: The statuses of a redirect, followed hop by hop (:meth:`_Rules.fetched`).
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Request headers that describe one hop's body, dropped when a redirect turns it into a GET.
_BODY_HEADERS = ("content-type", "content-length", "content-encoding", "content-language")
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


class HopPace(Protocol):
    """The host's turns and places for the browser's requests (``--render``): see
    :class:`crawler.frontier.politeness.BrowserPace`."""

    def turn(self, url: str, seconds_left: float) -> float: ...

    def place(self, url: str) -> Any: ...

    def answered(
        self, place: Any, status: int | None, retry_after: int | None, latency: float
    ) -> None: ...


#: Threads for the store's calls of :class:`HopPace` (quick, none waits): the event
#: loop's default ones are shared with the network guard's lookups.
_PACING_THREADS = 8
_pacing: concurrent.futures.ThreadPoolExecutor | None = None
_pacing_lock = threading.Lock()


def _pacing_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pacing
    with _pacing_lock:
        if _pacing is None:
            _pacing = concurrent.futures.ThreadPoolExecutor(
                _PACING_THREADS, thread_name_prefix="render-pace"
            )
        return _pacing


@dataclass(frozen=True)
class RenderJob:
    """A fetched page to render, and the crawl's rules for what the browser does.

    Parameters:
      url(str): The URL the body came from (after redirects).
      status(int): Its HTTP status.
      headers(tuple): Its response headers, ``(name, value)`` pairs.
      body(bytes): Its body, decoded.
      deadline(float): The ``time.monotonic()`` by which the render must have ended
        (:meth:`Renderer.render` has returned); the browser gives the page up
        :data:`GRACE` earlier.
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
      pace(HopPace): The host's turns and places for the requests the browser makes,
        as the crawl's own requests take theirs (None: none).
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
    pace: HopPace | None = None


@dataclass(frozen=True)
class Rendered:
    """What the browser made of a page: the DOM as HTML, the resolved ``href`` of each
    ``a[href]`` in it, the milliseconds the render took (from the job handed over to
    the DOM read back), and the requests the browser made for it (each hop counted;
    the page's own, answered with the crawler's response, not)."""

    html: str
    links: tuple[str, ...]
    ms: float = 0.0
    requests: int = 0


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
        self.tabs: set[Page] = set()  # the pages of the tabs, idle or in use
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
            await self._close_tab(self.idle.pop(0))
        context = self.contexts.get(key)
        if context is None:
            context = self.contexts[key] = await _new_context(self.browser, job)
            await self._close_old_contexts()
        self.contexts.move_to_end(key)
        tab = _Tab(key, await context.new_page())
        self.tabs.add(tab.page)
        await tab.page.route("**/*", tab.route)  # a tab's own: before the context's refusal
        await tab.page.route_web_socket(lambda _url: True, tab.web_socket)
        return tab

    async def done_with(self, tab: _Tab, healthy: bool) -> None:
        """Keep ``tab`` for its crawl's next render, or close it (it failed, or served
        :data:`TAB_USES` renders, or its browser is retired); close any window its page
        opened that is still open."""
        tab.rules, tab.uses = None, tab.uses + 1
        self.using[tab.key] -= 1
        for page in tab.page.context.pages:
            if page not in self.tabs:
                await _close_page(page)
        if healthy and tab.uses < TAB_USES and not self.retired:
            self.idle.append(tab)
        else:
            await self._close_tab(tab)

    async def _close_tab(self, tab: _Tab) -> None:
        self.tabs.discard(tab.page)
        await _close_page(tab.page)

    async def _close_old_contexts(self) -> None:
        """Past :data:`CONTEXTS`, close the least recently used contexts that have no
        tab in use (their idle tabs with them)."""
        for key in list(self.contexts)[: max(len(self.contexts) - CONTEXTS, 0)]:
            if self.using[key] > 0:
                continue
            for tab in [tab for tab in self.idle if tab.key == key]:
                self.idle.remove(tab)
                self.tabs.discard(tab.page)
            del self.using[key]
            with contextlib.suppress(Exception):
                await self.contexts.pop(key).close()


async def _new_context(browser: Browser, job: RenderJob) -> BrowserContext:
    """A crawl's context: no service worker, no download, and every request or
    WebSocket of a page that is not one of its tabs (a window a page opened) refused,
    that window closed as soon as it opens."""
    context = await browser.new_context(
        user_agent=job.user_agent,
        proxy=None if job.proxy is None else {"server": job.proxy},
        service_workers="block",
        accept_downloads=False,
    )
    await context.route("**/*", _refuse_stray)  # a tab's own routes come first
    await context.route_web_socket(lambda _url: True, _refuse_stray_socket)
    context.on("page", _close_if_opened)
    return context


async def _refuse_stray(route: Route) -> None:
    logger.debug("--render: refused %s (a window the page opened)", shown(route.request.url))
    await route.abort("blockedbyclient")


async def _refuse_stray_socket(socket: WebSocketRoute) -> None:
    await socket.close(code=1008, reason="refused: a window the page opened")


async def _close_if_opened(page: Page) -> None:
    """Close a window a page opened (a tab has no opener); one whose opener is closed
    already is closed when its tab's render ends (:meth:`_Launched.done_with`)."""
    with contextlib.suppress(Exception):
        if await page.opener() is not None:
            await page.close()


async def _close_page(page: Page) -> None:
    with contextlib.suppress(Exception):
        await page.close()


@dataclass(eq=False)
class _Slot:
    """A render's hold on one of the browser's pages: its task, since when it has held
    it (a browser's start counts), whether its page is loading (the only time it may be
    taken over) and whether a page waiting took it over."""

    task: asyncio.Task[Any] | None
    since: float = field(default_factory=time.monotonic)
    loading: bool = False
    taken_over: bool = False


#: A render waiting for a place: when it is due, its turn, what hands it the place, its task.
_Waiting = tuple[float, int, "asyncio.Future[_Slot]", "asyncio.Task[Any] | None"]


class _Slots:
    """The browser's ``pages`` places to render in, shared fairly.

    A render that finds every place in use waits; a place that comes free goes to the
    waiting render due first.  A waiting render that has only :data:`FAIR_SHARE`
    seconds left takes over the place of the loading render that has held its place
    longest, if that one has held it for :data:`FAIR_SHARE` seconds at least: that render
    fails its attempt (retried as a failed fetch), so that a page that never settles
    cannot keep the others from their render.  None of it waits past the render's own
    deadline.

    Parameters:
      pages(int): Places at most.
    """

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.held: list[_Slot] = []
        self.waiting: list[_Waiting] = []  # a heap: the one due first on top
        self._order = itertools.count()

    async def take(self, due: float) -> _Slot:
        """A place, by ``due`` (``time.monotonic()``), else :class:`TransientError`."""
        task = asyncio.current_task()
        if len(self.held) < self.pages and not self.waiting:
            return self._hold(task)
        future: asyncio.Future[_Slot] = asyncio.get_running_loop().create_future()
        entry = (due, next(self._order), future, task)
        heapq.heappush(self.waiting, entry)
        try:
            await self._wait(future, due)
        except BaseException:
            self._forget(entry)
            raise
        return future.result()

    async def _wait(self, future: asyncio.Future[_Slot], due: float) -> None:
        started = time.monotonic()
        while not future.done():
            now = time.monotonic()
            if now >= due:
                raise TransientError(
                    f"no browser page came free within {now - started:.1f}s ({self.pages} in use)"
                )
            wake = due - FAIR_SHARE
            if now >= wake:
                wake = min(due, self._take_over(now))
            await asyncio.wait({future}, timeout=max(wake - now, 0.01))

    def _take_over(self, now: float) -> float:
        """Take over the place of the loading render that has held its place longest,
        if it has had its fair share and no take-over already under way serves a render
        due as early; when the next look is due."""
        short = sum(1 for due, *_ in self.waiting if due - FAIR_SHARE <= now)
        under_way = sum(1 for slot in self.held if slot.taken_over)
        loading = [slot for slot in self.held if slot.loading and not slot.taken_over]
        if under_way >= short or not loading:
            return now + 0.1  # a render only now starting to load, or a place coming free
        longest = min(loading, key=lambda slot: slot.since)
        if now - longest.since < FAIR_SHARE:
            return longest.since + FAIR_SHARE
        longest.taken_over = True
        if longest.task is not None:
            longest.task.cancel()
        return now + 0.1

    def _hold(self, task: asyncio.Task[Any] | None) -> _Slot:
        slot = _Slot(task)
        self.held.append(slot)
        return slot

    def give_back(self, slot: _Slot) -> None:
        """Free ``slot``'s place: the waiting render due first holds it now."""
        if slot in self.held:
            self.held.remove(slot)
        while self.waiting and len(self.held) < self.pages:
            _, _, future, task = heapq.heappop(self.waiting)
            if not future.done():
                future.set_result(self._hold(task))

    def _forget(self, entry: _Waiting) -> None:
        """A waiting render gave up (its deadline, or its thread stopped waiting): out of
        the queue, and the place it was handed meanwhile handed on."""
        if entry in self.waiting:
            self.waiting.remove(entry)
            heapq.heapify(self.waiting)
        future = entry[2]
        if future.done() and not future.cancelled():
            self.give_back(future.result())


class Renderer:
    """One process's browser (see the module): :meth:`render`, :meth:`close`.

    Parameters:
      pages(int): Pages open at once at most.
      restart_after(int): Pages a browser renders before it is replaced.
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
        self._slots: _Slots | None = None
        self._at_exit = False

    def render(self, job: RenderJob) -> Rendered:
        """``job``'s page as the browser renders it, by the job's deadline;
        :class:`TransientError` when it does not settle in time, cannot get a browser
        page in time (or gives its own up to a page due sooner, :class:`_Slots`), or the
        browser fails (retried as a failed fetch), :class:`PermanentError` when this
        machine cannot render or the DOM is too large."""
        loop, started = self._running_loop(), time.monotonic()
        future = asyncio.run_coroutine_threadsafe(self._render(job, started), loop)
        try:
            rendered = future.result(timeout=max(job.deadline - time.monotonic(), 0))
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
        self._slots = self._launching = None  # bound to that loop: the next one makes its own

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
        if self._slots is None or self._launching is None:
            self._slots, self._launching = _Slots(self.pages), asyncio.Lock()
        slots, due = self._slots, _due(job)
        if due <= time.monotonic():
            raise TransientError("no time was left to render the page")
        slot = await slots.take(due)
        try:
            launched = await self._browser()
            launched.open += 1
            try:
                return await _rendered(launched, job, started, slot)
            finally:
                launched.open -= 1
                launched.rendered += 1
                await self._retire_if_done(launched)
        except asyncio.CancelledError:
            if not slot.taken_over:
                raise
            raise TransientError(
                f"the page had held its browser page for {FAIR_SHARE:g}s without settling,"
                " and it went to a page that would otherwise have run out of time"
            ) from None
        finally:
            slots.give_back(slot)

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
                executable_path=self._executable, headless=True, args=arguments()
            )
        except (Error, CannotRender) as e:
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


def _due(job: RenderJob) -> float:
    """When the browser gives ``job``'s page up: :data:`GRACE` before its deadline."""
    return job.deadline - GRACE


async def _rendered(launched: _Launched, job: RenderJob, started: float, slot: _Slot) -> Rendered:
    """Load ``job``'s page in a tab of its crawl's context and read it back once it
    settled (``started``: when the job was handed over; ``slot``: the render's place,
    to be taken over only while the page loads).  The tab is kept for the crawl's next
    page unless this one failed."""
    from playwright.async_api import Error
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    healthy = False
    try:
        tab = await launched.tab_for(job)
    except Error as e:
        raise TransientError(f"the browser failed: {_first_line(e)}") from e
    tab.rules = rules = _Rules(job, tab.page.context.request)
    try:
        if job.cookies:
            await tab.page.context.add_cookies(list(job.cookies))  # type: ignore[arg-type]
        slot.loading = True
        if job.wait is None:
            await tab.page.goto(job.url, wait_until="networkidle", timeout=_ms_left(job))
        else:
            await tab.page.goto(job.url, wait_until="load", timeout=_ms_left(job))
            await tab.page.wait_for_timeout(min(job.wait * 1000, _ms_left(job)))
        read = await tab.page.evaluate(_READ, [job.max_chars, job.max_links])
        slot.loading = False
        healthy = True
    except PlaywrightTimeout:
        raise TransientError(
            f"the page did not settle within {_due(job) - started:.1f}s"
            + (" (the network never went idle)" if job.wait is None else "")
        ) from None
    except Error as e:
        raise TransientError(f"the browser failed: {_first_line(e)}") from e
    finally:
        slot.loading = False
        await launched.done_with(tab, healthy)
    if read["html"] is None:
        raise PermanentError(f"the rendered page is over {job.max_chars} characters")
    return Rendered(read["html"], tuple(read["links"]), requests=rules.requests)


def _ms_left(job: RenderJob) -> float:
    left = _due(job) - time.monotonic()
    if left <= 0:
        raise TransientError("the render ran out of time")
    return left * 1000


class _Rules:
    """What the browser may fetch for one page (see the module), and how.

    Parameters:
      job(RenderJob): The render.
      fetcher(APIRequestContext): The crawl's context's own requests (its cookies, its
        proxy), which make the page's requests hop by hop.
    """

    def __init__(self, job: RenderJob, fetcher: APIRequestContext) -> None:
        self.job, self.fetcher = job, fetcher
        self.answered = False
        #: The requests made for the page (each hop).
        self.requests = 0
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
        await self.fetched(route)

    async def fetched(self, route: Route) -> None:
        """Make ``route``'s request here, hop by hop, each hop's host checked before it
        is asked and sent the crawl's headers; answer the page with the last hop's
        response, or refuse the request."""
        request = route.request
        url, method, body = request.url, request.method, request.post_data_buffer
        headers = {n: v for n, v in request.headers.items() if n.lower() != "cookie"}
        origin = _origin(url)
        for _hop in range(REDIRECTS + 1):
            host = urlsplit(url).hostname or ""
            if not await self._reachable(host):
                await self._refuse(route, f"{host}, not public")
                return
            response = await self._hop(route, url, method, headers, body, origin)
            if response is None:
                return
            target = _redirect_target(response, url)
            if target is None:
                await _answer(route, response)
                return
            await response.dispose()
            if urlsplit(target).scheme not in ("http", "https"):
                await self._refuse(route, f"a redirect to {shown(target)}")
                return
            url, method, body = target, *_redirected_method(response.status, method, body)
            if body is None:
                headers = {n: v for n, v in headers.items() if n.lower() not in _BODY_HEADERS}
        await self._refuse(route, f"more than {REDIRECTS} redirects")

    def _hop_headers(self, headers: Mapping[str, str], url: str, origin: str) -> dict[str, str]:
        """A hop's headers: the browser's (an ``Authorization`` a script set kept on its
        own origin only, as the Fetch standard drops it on a cross-origin redirect), the
        crawl's ``--header``s, and its ``--auth-env`` credentials for the hop's host."""
        sent = {n: v for n, v in headers.items() if _origin(url) == origin or n != "authorization"}
        sent.update(self.headers)
        authorization = self.job.authorization.get((urlsplit(url).hostname or "").lower())
        if authorization is not None:
            sent["authorization"] = authorization
        return sent

    async def web_socket(self, socket: WebSocketRoute) -> None:
        if await self._reachable(urlsplit(socket.url).hostname or ""):
            socket.connect_to_server()
        else:
            await socket.close(code=1008, reason="refused by the crawler's network guard")

    async def _hop(
        self,
        route: Route,
        url: str,
        method: str,
        headers: Mapping[str, str],
        body: bytes | None,
        origin: str,
    ) -> APIResponse | None:
        """One hop of a request: its host's turn (:attr:`RenderJob.pace`), the request,
        its answer told to the host's pace.  None when it was not made or failed (the
        route aborted)."""
        from playwright.async_api import Error

        place = await self._paced(url)
        left = _due(self.job) - time.monotonic()
        if place is None or left <= 0:
            await self._told(place, None, None, -1.0)  # never sent: its place given back
            await route.abort("timedout")
            return None
        self.requests += 1
        started = time.monotonic()
        try:
            response = await self.fetcher.fetch(
                url, method=method, headers=self._hop_headers(headers, url, origin),
                data=body, max_redirects=0, fail_on_status_code=False, timeout=left * 1000,
            )  # fmt: skip
        except Error as e:
            logger.debug("--render: %s failed: %s", shown(url), _first_line(e))
            await self._told(place, None, None, time.monotonic() - started)
            await route.abort("failed")
            return None
        retry_after = retry_after_ms(response.headers.get("retry-after", ""))
        await self._told(place, response.status, retry_after, time.monotonic() - started)
        return response

    async def _paced(self, url: str) -> Any:
        """The host's turn and place for a hop to ``url`` (:attr:`RenderJob.pace`),
        awaited here, not in a thread: the place, to tell the answer to; None when none
        came before the render's deadline, or the store failed."""
        pace = self.job.pace
        if pace is None:
            return _UNPACED
        loop, pool = asyncio.get_running_loop(), _pacing_pool()
        try:
            left = _due(self.job) - time.monotonic()
            due = await loop.run_in_executor(pool, pace.turn, url, left)
            await asyncio.sleep(max(0.0, due - time.time()))
            while time.monotonic() < _due(self.job):
                place = await loop.run_in_executor(pool, pace.place, url)
                if place is not None:
                    return place
                await asyncio.sleep(random.uniform(*PLACE_POLL))
        except Exception as e:  # TransientError, or the store's: the hop is not made
            logger.debug("--render: %s not paced in time: %s", shown(url), _first_line(e))
        return None

    async def _told(
        self, place: Any, status: int | None, retry_after: int | None, latency: float
    ) -> None:
        """Tell ``place``'s host the hop's answer (:meth:`HopPace.answered`)."""
        pace = self.job.pace
        if pace is None or place is None or place is _UNPACED:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(
                _pacing_pool(), pace.answered, place, status, retry_after, latency
            )
        except Exception as e:  # the store's: its place frees itself in time
            logger.debug("--render: %s: its answer not told: %s", shown(self.job.url), e)

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


#: The place of a hop of a render without a pace.
_UNPACED = object()
#: Seconds between two tries at a place of a host (``--max-per-host``) for a hop.
PLACE_POLL = (0.02, 0.08)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2].lower()}"


def _redirect_target(response: APIResponse, url: str) -> str | None:
    """The absolute URL ``response`` redirects to, or None when it is no redirect."""
    location = response.headers.get("location")
    if response.status not in _REDIRECT_STATUSES or not location:
        return None
    return urljoin(url, location)


def _redirected_method(status: int, method: str, body: bytes | None) -> tuple[str, bytes | None]:
    """The method and body of the request a redirect leads to (the Fetch standard's
    rule: a 303 makes it a GET, and so do a 301 and a 302 of a POST)."""
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        return "GET", None
    return method, body


async def _answer(route: Route, response: APIResponse) -> None:
    """Answer ``route`` with ``response`` (its body decoded already), then free it."""
    try:
        await route.fulfill(
            response=response,
            headers={n: v for n, v in response.headers.items() if n.lower() not in _WIRE_HEADERS},
        )
    finally:
        with contextlib.suppress(Exception):
            await response.dispose()


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return shown(text[0]) if text else type(error).__name__
