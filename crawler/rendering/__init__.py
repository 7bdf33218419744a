"""``--render``: pages loaded in headless Chromium (:mod:`crawler.rendering.browser`),
the system's own (:mod:`crawler.rendering.chromium`)."""

from __future__ import annotations

import contextlib
import threading

import requests

from crawler.environment import ACTOR_TIME_LIMIT, Limits
from crawler.errors import PermanentError
from crawler.fetching import Fetched
from crawler.fetching.sessions import HostAuth, HttpSettings
from crawler.options import CrawlOptions
from crawler.rendering.browser import HopPace, Rendered, Renderer, RenderJob
from crawler.rendering.chromium import CannotRender, check

__all__ = ["CannotRender", "RenderJob", "Rendered", "Renderer", "check", "job_of"]

#: Seconds of the actor's time limit a render leaves for what follows it (the page's
#: links and record), besides its page handler's time.
MARGIN = 1.0


def job_of(
    fetched: Fetched,
    body: bytes,
    session: requests.Session,
    crawl_options: CrawlOptions,
    limits: Limits,
    handler_seconds: float = 0.0,
    pace: HopPace | None = None,
) -> RenderJob:
    """The render of a page fetched with ``limits`` (its deadline, its size cap) in
    ``session`` (the crawl's, for its cookies), by ``crawl_options``' rules; due to end
    within the actor's time limit (:func:`time_limit_ends`), ``handler_seconds`` and
    :data:`MARGIN` left over; ``pace`` waits for the host's turn of each request the
    browser makes (:attr:`RenderJob.pace`)."""
    ends = fetched.deadline - limits.fetch_deadline + ACTOR_TIME_LIMIT  # from the fetch's start
    interrupted = time_limit_ends()
    if interrupted is not None:  # what came before the fetch counts too
        ends = min(ends, interrupted)
    response, settings = fetched.response, HttpSettings.of(crawl_options)
    authorization: dict[str, str] = {}
    if isinstance(session.auth, HostAuth):  # each host's own credentials, for its requests
        for host in session.auth.variables:
            with contextlib.suppress(PermanentError):  # a host the page may never ask
                value = session.auth.header_for(host)
                if value is not None:
                    authorization[host] = value
    return RenderJob(
        url=response.url,
        status=response.status_code,
        headers=tuple(response.headers.items()),
        body=body,
        deadline=ends - MARGIN - handler_seconds,
        crawl=str(crawl_options.crawl_id),
        public_only=fetched.public,
        user_agent=crawl_options.user_agent,
        headers_sent=settings.headers,
        authorization=authorization,
        proxy=settings.proxy,
        cookies=tuple(_cookies(session)) if settings.cookies else (),
        wait=crawl_options.render_wait,
        media=crawl_options.render_media,
        max_chars=limits.max_body_bytes,
        max_links=limits.max_links_per_page,
        pace=pace,
    )


def time_limit_ends() -> float | None:
    """When Dramatiq's time limit ends for the message the calling thread processes
    (``time.monotonic()``), or None outside one.

    Its ``TimeLimit`` middleware starts the clock before any other middleware's hook,
    so this counts what came before the fetch too (the message's claim, robots.txt, a
    turn at its host).  The deadline is read where the watchdog keeps it, its thread's
    ``deadlines``, so that it is the one that interrupts, on whichever broker (a
    worker's, ``--local``'s); a watchdog without them (gevent's) leaves None.
    """
    me, ends = threading.get_ident(), []
    for thread in threading.enumerate():
        deadlines = getattr(thread, "deadlines", None)
        if isinstance(deadlines, dict) and isinstance(deadlines.get(me), float):
            ends.append(float(deadlines[me]))
    return min(ends, default=None)


def _cookies(session: requests.Session) -> list[dict[str, object]]:
    """The session's cookies as Playwright takes them (those with a domain)."""
    cookies: list[dict[str, object]] = []
    for cookie in session.cookies:
        if cookie.domain and cookie.value is not None:
            one: dict[str, object] = {
                "name": cookie.name,
                "value": cookie.value,
                "domain": cookie.domain,
                "path": cookie.path or "/",
                "secure": bool(cookie.secure),
            }
            if cookie.expires is not None:
                one["expires"] = float(cookie.expires)
            cookies.append(one)
    return cookies
