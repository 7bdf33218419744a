"""One bounded HTTP fetch: a total deadline, a size cap, and failures sorted by kind."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.cookies import get_cookie_header
from requests.models import PreparedRequest
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers, requote_uri
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import ConnectionPool, HTTPConnectionPool, HTTPSConnectionPool

from crawler import metrics
from crawler.environment import Limits
from crawler.errors import PermanentError, TransientError, shown
from crawler.fetching.network_guard import check_hop
from crawler.links.canonical import canonical_url

logger = logging.getLogger("example")
#: Upstream's (connect, read) timeouts, in seconds.
TIMEOUT = (3.05, 5)
CHUNK = 64 * 1024

#: Redirects followed at most, as requests does.
MAX_REDIRECTS = 30

#: Errors of the request itself that no retry can mend.
_PERMANENT_REQUEST_ERRORS = (
    requests.exceptions.InvalidSchema,
    requests.exceptions.InvalidURL,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidHeader,
)
#: What getaddrinfo answers for a name that does not exist, or has no address: the
#: resolver's final word.  EAI_AGAIN (no answer in time) is left to the retries.
_NO_SUCH_HOST = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


@dataclass
class Fetched:
    """A response :func:`fetch` got, with what its fetch learnt on the way.

    Parameters:
      response(requests.Response): The final response, its body not read yet.
      deadline(float): The ``time.monotonic()`` by which the whole fetch must end.
      public(bool): Whether the page, a hop on the way, or the page that linked to
        it was on a public address (links found on it may then not lead inside).
      address(str): The IP address the response came from, when known.
    """

    response: requests.Response
    deadline: float
    public: bool
    address: str | None = None

    def __enter__(self) -> Fetched:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.response.close()


def fetch(
    session: requests.Session,
    url: str,
    limits: Limits,
    user_agent: str,
    *,
    via_public: bool,
    keeper: Keeper | None = None,
) -> Fetched:
    """GET ``url`` for streaming, or raise a :mod:`crawler.errors` error saying why not.

    Redirects are followed here, not by requests, so that every hop keeps to the
    deadline and the network guard, and no redirect's body is read (unless ``keeper``
    wants it).  ``via_public``: the page that linked to ``url`` was public.
    ``keeper`` (``--warc``) is offered each redirect and error response (4xx, 5xx)
    before the fetch goes on or raises; the final response is the caller's to keep.
    """
    deadline = time.monotonic() + limits.fetch_deadline
    public = via_public
    for _hop in range(MAX_REDIRECTS + 1):
        response, public = _get(session, url, user_agent, deadline, limits, public)
        fetched = Fetched(response, deadline, public, _peer_address(response))
        target = session.get_redirect_target(response)
        if target is None:
            break
        _keep(keeper, fetched, limits)
        response.close()
        try:
            url = requote_uri(urljoin(response.url, target))
            canonical_url(url)  # refuses the ports and host names no server can have
        except ValueError as e:
            raise PermanentError(f"a redirect to a malformed URL {shown(target)!r}: {e}") from e
        if urlsplit(url).scheme not in ("http", "https"):
            raise PermanentError(f"InvalidSchema: a redirect to {url!r}")
    else:
        raise PermanentError(f"TooManyRedirects: more than {MAX_REDIRECTS} redirects")
    if response.status_code == 429 or response.status_code >= 500:
        _keep(keeper, fetched, limits)
        response.close()
        raise TransientError(
            f"HTTP {response.status_code} {response.reason}",
            delay=retry_after(response, limits),
            status=response.status_code,
        )
    if response.status_code >= 400:
        _keep(keeper, fetched, limits)
        response.close()
        raise PermanentError(
            f"HTTP {response.status_code} {response.reason}", status=response.status_code
        )
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limits.max_body_bytes:
        response.close()
        raise PermanentError(f"the body of {length} bytes is over {limits.max_body_bytes}")
    return fetched


class Keeper(Protocol):
    """What ``fetch`` offers the responses it does not return (redirects, errors)."""

    def wants(self, response: requests.Response) -> bool:
        """Whether to read this response's body and keep it."""
        ...

    def keep(self, fetched: Fetched, body: bytes) -> None: ...


def _keep(keeper: Keeper | None, fetched: Fetched, limits: Limits) -> None:
    """Hand a response the fetch will not return, and its body, to ``keeper``; a body
    that cannot be read, or a keeper that fails, is logged, and the fetch goes on."""
    if keeper is None or not keeper.wants(fetched.response):
        return
    try:
        keeper.keep(fetched, read_body(fetched, limits))
    except Exception as e:
        logger.warning(
            "Could not keep the %d response of %r: %s", fetched.response.status_code,
            fetched.response.url, e,
        )  # fmt: skip


def _peer_address(response: requests.Response) -> str | None:
    """The address of the server that sent ``response``, its body not read yet."""
    connection = getattr(response.raw, "_connection", None)
    return getattr(connection, "peer_address", None)  # None: through a proxy, say


def _get(
    session: requests.Session,
    url: str,
    user_agent: str,
    deadline: float,
    limits: Limits,
    public_so_far: bool,
) -> tuple[requests.Response, bool]:
    """One hop: its response, and whether the fetch has touched a public address."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _overdue(limits)
    timeout = (min(TIMEOUT[0], remaining), min(TIMEOUT[1], remaining))
    try:
        public = check_hop(url, public_so_far)
        return _send_get(session, url, user_agent, timeout), public
    except _PERMANENT_REQUEST_ERRORS as e:
        raise PermanentError(f"{type(e).__name__}: {e}") from e
    except (requests.ConnectionError, requests.Timeout) as e:
        lookup = _lookup_failure(e)
        if lookup is not None and lookup.errno in _NO_SUCH_HOST:
            host = urlsplit(url).hostname
            raise PermanentError(
                f"the host name {host!r} does not resolve ({lookup.strerror})"
            ) from e
        raise TransientError(f"{type(e).__name__}: {e}") from e
    except ValueError as e:  # UnicodeError too: say, a host name IDNA cannot encode
        raise PermanentError(f"cannot request {shown(url)!r}: {type(e).__name__}: {e}") from e


def _lookup_failure(error: BaseException) -> socket.gaierror | None:
    """The ``getaddrinfo`` failure behind a connection error, if that is what it was.

    requests wraps urllib3's ``MaxRetryError``, whose reason is a ``NameResolutionError``
    raised from the ``socket.gaierror``: the chain of causes leads to it.
    """
    seen: set[int] = set()
    cause: object = error
    while isinstance(cause, BaseException) and id(cause) not in seen:
        if isinstance(cause, socket.gaierror):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "reason", None)
    return None


def _send_get(
    session: requests.Session, url: str, user_agent: str, timeout: tuple[float, float]
) -> requests.Response:
    """``session.get(url, headers=..., timeout=..., stream=True, allow_redirects=False)``,
    minus the work requests repeats for every request to merge per-call settings and
    hooks that a crawler never passes, and to build a cookie header from an empty jar
    (CPU per GET and body read, measured here: 447 -> 343 -> 325 µs).

    The session's headers, cookies, TLS settings and adapter are used as
    ``session.get`` uses them; with proxies or netrc from the environment
    (``trust_env``) requests' own path runs, to honour them.
    """
    if session.trust_env:
        return session.get(
            url,
            headers={"User-Agent": user_agent},
            timeout=timeout,
            stream=True,
            allow_redirects=False,
        )
    request = requests.PreparedRequest()
    request.prepare_method("GET")
    request.prepare_url(url, None)
    request.prepare_headers({**session.headers, "User-Agent": user_agent})
    if "@" in url:
        request.prepare_auth(None, url)  # user:password@host, as requests does
    if session.cookies:
        cookie = get_cookie_header(session.cookies, request)  # type: ignore[no-untyped-call]
        if cookie:
            request.headers["Cookie"] = cookie
    response = session.get_adapter(url).send(
        request,
        stream=True,
        timeout=timeout,
        verify=True if session.verify is None else session.verify,
        cert=session.cert,
        proxies=session.proxies,
    )
    if response.cookies:
        session.cookies.update(response.cookies)
    return response


def _proxies_or_netrc() -> bool:
    """Whether requests could find a proxy or netrc credentials in the environment."""
    if any("proxy" in name.lower() or name == "NETRC" for name in os.environ):
        return True
    return any(os.path.exists(os.path.expanduser(f"~/{n}")) for n in (".netrc", "_netrc"))


class _PeerKnowing:
    """A connection that notes the address it connected to, which a response closing
    the connection (``Connection: close``, HTTP/1.0) would otherwise take with it."""

    peer_address: str | None = None

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        try:
            self.peer_address = str(self.sock.getpeername()[0])  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            self.peer_address = None


class _HTTPConnection(_PeerKnowing, HTTPConnection):
    pass


class _HTTPSConnection(_PeerKnowing, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class CrawlerAdapter(HTTPAdapter):
    """requests' adapter, minus work it repeats on every request of a crawl: a
    host's connection pool is looked up once while the pool manager keeps it open
    (not through the proxy and pool-key logic each time), and a response that sets
    no cookie skips the cookie jar's header parsing.  With proxies, or cookies to
    take, requests' own code runs."""

    def __init__(self) -> None:
        super().__init__()
        self._pools: dict[tuple[str, object, object], ConnectionPool] = {}
        # Connections that know their server's address (WARC-IP-Address).
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def get_connection_with_tls_context(
        self,
        request: PreparedRequest,
        verify: Any,
        proxies: Mapping[str, str] | None = None,
        cert: Any = None,
    ) -> ConnectionPool:
        if proxies:
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        scheme, netloc = urlsplit(str(request.url))[:2]
        key = (f"{scheme}://{netloc}", verify, cert)
        known = self._pools.get(key)
        if known is not None and getattr(known, "pool", None) is not None:  # closed: evicted
            return known
        pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
        if len(self._pools) >= POOLS_KEPT:
            self._pools.clear()
        self._pools[key] = pool
        return pool

    def build_response(self, req: PreparedRequest, resp: Any) -> requests.Response:
        if "set-cookie" in resp.headers or "set-cookie2" in resp.headers:
            return super().build_response(req, resp)
        response = requests.Response()
        response.status_code = resp.status
        response.headers = CaseInsensitiveDict(resp.headers)
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = resp
        response.reason = resp.reason
        response.url = req.url.decode() if isinstance(req.url, bytes) else str(req.url)
        response.request = req
        response.connection = self
        return response


#: Connection pools an adapter remembers (the pool manager keeps 10 hosts' open).
POOLS_KEPT = 1024


def new_session() -> requests.Session:
    """A session for one worker thread's fetches."""
    session = requests.Session()
    adapter = CrawlerAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    # With trust_env requests reads the environment again for every request; read it
    # once here instead, unless a proxy or netrc file is there to honour.
    session.trust_env = _proxies_or_netrc()
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    return session


def _overdue(limits: Limits) -> TransientError:
    return TransientError(f"the fetch took longer than {limits.fetch_deadline:g}s")


def is_html(response: requests.Response) -> bool:
    return response.headers.get("content-type", "").lower().startswith("text/html")


def read_body(fetched: Fetched, limits: Limits, *, truncate_at: int | None = None) -> bytes:
    """The decoded body, read within the fetch's deadline and size cap.

    Parameters:
      fetched(Fetched): What :func:`fetch` returned.
      limits(Limits): The deadline and size cap; a body over the cap is a PermanentError.
      truncate_at(int): Stop once this many decoded bytes are read and return them: what
        lies past is ignored, not an error (robots.txt is read so, as Google reads it).
    """
    response, deadline = fetched.response, fetched.deadline
    raw = response.raw
    body = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _overdue(limits)
        if remaining < TIMEOUT[1]:  # else the read timeout the request was sent with holds
            _bound_next_read(response, remaining)
        try:
            chunk = raw.read1(CHUNK, decode_content=True)
        except Exception as e:  # socket errors and urllib3's DecodeError, ProtocolError and kin
            if time.monotonic() >= deadline:
                raise _overdue(limits) from e
            raise TransientError(f"{type(e).__name__} while reading: {e}") from e
        body += chunk
        if truncate_at is not None and len(body) >= truncate_at:
            del body[truncate_at:]
            chunk = b""  # as good as the end of the body
        if not chunk:
            started = deadline - limits.fetch_deadline
            metrics.page_read(time.monotonic() - started, len(body))
            return bytes(body)
        if len(body) > limits.max_body_bytes or raw.tell() > limits.max_body_bytes:
            raise PermanentError(f"the body is over {limits.max_body_bytes} bytes")


def _bound_next_read(response: requests.Response, seconds: float) -> None:
    """Make the next socket read wait no longer than ``seconds``."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.01))


def retry_after(response: requests.Response, limits: Limits) -> int | None:
    """The server's ``Retry-After``, in milliseconds and at most ``max_backoff``."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return int(min(max(seconds, 0) * 1000, limits.max_backoff))
