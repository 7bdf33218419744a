"""A worker thread's HTTP sessions, one per crawl: nothing a crawl sets or receives
(cookies, ``--header``, ``--proxy``, ``--auth-env``) reaches another crawl's requests.

Each crawl a thread works for gets a ``requests.Session`` of its own, with its own
cookie jar and connection pools; a thread keeps the :data:`KEPT` it used last and
closes the others.  A crawl of upstream's kind (no HTTP option) costs what one session
a thread always cost: the session is made once and found again by the crawl's id.
"""

from __future__ import annotations

import base64
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.cookies import RequestsCookieJar

from crawler.errors import PermanentError
from crawler.fetching.bounded_fetch import new_session
from crawler.options import CrawlOptions

#: Sessions a thread keeps open at once (the crawls it worked for last).
KEPT = 8


@dataclass(frozen=True)
class HttpSettings:
    """A crawl's HTTP settings (its options ``--header``, ``--cookies``, ``--proxy``,
    ``--auth-env``).

    Parameters:
      headers(tuple): ``(name, value)`` pairs sent with every request of the crawl.
      cookies(bool): Keep the cookies the crawl's sites set, and send them back.
      proxy(str): The proxy every request of the crawl goes through (None: none).
      auth_env(tuple): ``(host, variable)`` pairs: requests to ``host`` carry HTTP
        Basic credentials, ``user:password`` in the worker's ``variable``.
    """

    headers: tuple[tuple[str, str], ...] = ()
    cookies: bool = True
    proxy: str | None = None
    auth_env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, crawl_options: CrawlOptions) -> HttpSettings:
        """A crawl's HTTP settings, from its options (each checked already)."""
        return cls(
            headers=tuple(_pair(line, ":") for line in crawl_options.headers),
            cookies=crawl_options.cookies,
            proxy=crawl_options.proxy,
            auth_env=tuple(_pair(pair, "=") for pair in crawl_options.auth_env),
        )


def _pair(text: str, separator: str) -> tuple[str, str]:
    name, _, value = text.partition(separator)
    return name.strip(), value.strip()


class NoCookies(RequestsCookieJar):
    """A jar that keeps nothing (``--cookies off``)."""

    def set_cookie(self, cookie: Any, *args: Any, **kwargs: Any) -> None:
        return None


class HostAuth(requests.auth.AuthBase):
    """HTTP Basic credentials for the hosts they belong to, read from the worker's
    environment when a request goes to such a host (never sent elsewhere)."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.variables = dict(variables)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        authorization = self.header_for(urlsplit(request.url or "").hostname or "")
        if authorization is not None:
            request.headers["Authorization"] = authorization
        return request

    def header_for(self, host: str) -> str | None:
        """The ``Authorization`` header a request to ``host`` carries (None: none);
        :class:`PermanentError` when the worker lacks the variable named for it."""
        variable = self.variables.get(host.lower())
        if variable is None:
            return None
        secret = os.environ.get(variable)
        if secret is None or ":" not in secret:
            raise PermanentError(
                f"--auth-env {host}={variable}: this worker has no {variable}"
                " (user:password) in its environment"
            )
        user, _, password = secret.partition(":")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return f"Basic {token}"


def session_for(settings: HttpSettings) -> requests.Session:
    """A new session with ``settings``."""
    session = new_session()
    if settings.headers:
        session.headers.update(dict(settings.headers))
    if not settings.cookies:
        session.cookies = NoCookies()
    if settings.proxy is not None:
        session.proxies = {"http": settings.proxy, "https": settings.proxy}
    if settings.auth_env:
        session.auth = HostAuth({host.lower(): name for host, name in settings.auth_env})
    return session


class Sessions:
    """One thread's sessions, by crawl (see the module): :meth:`get`."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._sessions: OrderedDict[tuple[str | None, HttpSettings], requests.Session] = (
            OrderedDict()
        )

    def get(self, crawl_options: CrawlOptions) -> requests.Session:
        """The session of the crawl ``crawl_options`` describe, on this thread."""
        key = (crawl_options.crawl_id, HttpSettings.of(crawl_options))
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = session_for(key[1])
            while len(self._sessions) > self.kept:
                _, oldest = self._sessions.popitem(last=False)
                oldest.close()
        else:
            self._sessions.move_to_end(key)
        return session

    def close(self) -> None:
        while self._sessions:
            self._sessions.popitem()[1].close()
