"""One bounded HTTP fetch: a total deadline, a size cap, and failures sorted by kind.

Each hop goes through the network guard where it connects: a connection resolves its
host once, checks every address (:mod:`crawler.fetching.network_guard`) and connects to
those; which addresses a hop may reach is chosen per request by the adapter it is sent
through (:meth:`CrawlerAdapter.for_hop`).
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import BaseAdapter, HTTPAdapter
from requests.cookies import get_cookie_header
from requests.models import PreparedRequest
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers, requote_uri, select_proxy
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import ConnectionPool, HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection

from crawler import metrics
from crawler.environment import Limits
from crawler.errors import Answered, PermanentError, ServerBusy, TransientError, shown
from crawler.fetching import http_cache, network_guard
from crawler.fetching.http_cache import HttpCache
from crawler.links.canonical import canonical_url

logger = logging.getLogger(__name__)
#: Upstream's (connect, read) timeouts, in seconds.
TIMEOUT = (3.05, 5)
CHUNK = 64 * 1024

#: Redirects followed at most, as requests does.
MAX_REDIRECTS = 30
#: The 4xx answers that say "not now" (408 Request Timeout, 429 Too Many Requests):
#: retried as a 5xx is; every other 4xx is the URL's answer (:class:`Answered`).
RETRIED_4XX = (408, 429)
#: How long a host waits after a 429 that says not how long (no ``Retry-After``), in ms.
PACE_MS = 1000

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
      cached(bool): The final response came from ``--cache``'s directory, not the server.
    """

    response: requests.Response
    deadline: float
    public: bool
    address: str | None = None
    #: The response came from ``--cache``, not from the server.
    cached: bool = False

    def __enter__(self) -> Fetched:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.response.close()


@dataclass(frozen=True)
class Asking:
    """How a fetch asks for its page: upstream's GET, or what a handler's
    :class:`~crawler.handlers.Request` said (its message's ``request`` argument).

    Parameters:
      method(str): GET, HEAD or POST.
      headers(tuple): ``(name, value)`` pairs on top of the crawl's headers.
      body(bytes|None): The body (a POST's).
    """

    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None

    @classmethod
    def of(cls, request: Mapping[str, Any] | None) -> Asking:
        """What a message's ``request`` argument (checked) asks; a plain GET for None."""
        if not request:
            return GET
        body = request.get("body")
        return cls(
            request.get("method", "GET"),
            tuple((request.get("headers") or {}).items()),
            None if body is None else base64.b64decode(body),
        )

    def redirected(self, status: int) -> Asking:
        """How the next hop asks after a redirect of ``status``: a 303, and a 301 or 302
        to a POST, turn it into a GET without its body, as browsers do (RFC 9110
        15.4); a 307 and 308 ask again as they did."""
        to_get = status == 303 and self.method != "HEAD"
        if to_get or (status in (301, 302) and self.method == "POST"):
            headers = tuple((n, v) for n, v in self.headers if n.lower() != "content-type")
            return Asking("GET", headers, None)
        return self


#: Upstream's way of asking: a GET.
GET = Asking()


def fetch(
    session: requests.Session,
    url: str,
    limits: Limits,
    user_agent: str,
    *,
    via_public: bool,
    keeper: Keeper | None = None,
    max_redirects: int = MAX_REDIRECTS,
    conditions: Mapping[str, str] | None = None,
    asking: Asking = GET,
    cache: HttpCache | None = None,
) -> Fetched:
    """GET ``url`` for streaming (or ask for it as ``asking`` says: a handler's POST),
    or raise a :mod:`crawler.errors` error saying why not.

    Redirects are followed here, not by requests, so that every hop keeps to the
    deadline and the network guard, and no redirect's body is read (unless ``keeper``
    wants it).  ``via_public``: the page that linked to ``url`` was public.
    ``keeper`` (``--warc``) is offered each redirect and error response (4xx, 5xx)
    before the fetch goes on or raises; the final response is the caller's to keep.
    More than ``max_redirects`` redirects in a row is a :class:`PermanentError`.
    ``conditions``: the headers of a conditional request (``--recrawl-from``), sent on
    every hop; a ``304`` answer is returned as any final response is.
    ``cache`` (``--cache``): each hop is taken from it when it holds it, else fetched
    and kept there (:mod:`crawler.fetching.http_cache`).

    A 5xx, 408 or 429 answer is a :class:`TransientError` (retried, after the
    ``Retry-After`` the server asked for): a 429, or a 503 with ``Retry-After``, is the
    :class:`ServerBusy` that slows its host down; any other 4xx is :class:`Answered`: the URL's
    answer, recorded with its status, neither retried nor dead-lettered.
    """
    deadline = time.monotonic() + limits.fetch_deadline
    public = via_public
    for _hop in range(max_redirects + 1):
        response, public, cached = _answer(
            session, url, user_agent, deadline, limits, public, conditions, asking, cache
        )
        fetched = Fetched(response, deadline, public, _peer_address(response), cached)
        target = session.get_redirect_target(response)
        if target is None:
            break
        asking = asking.redirected(response.status_code)
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
        raise PermanentError(f"TooManyRedirects: more than {max_redirects} redirects")
    status = response.status_code
    if status in RETRIED_4XX or status >= 500:
        _keep(keeper, fetched, limits)
        response.close()
        reason, delay = f"HTTP {status} {response.reason}", retry_after(response, limits)
        if status == 429 or (status == 503 and delay is not None):  # the server's pace
            raise ServerBusy(reason, delay=PACE_MS if delay is None else delay, status=status)
        raise TransientError(reason, delay=delay, status=status)
    if status >= 400:  # the URL's answer: recorded with its status, its body not parsed
        kept = _keep(keeper, fetched, limits)
        response.close()
        content_type = response.headers.get("content-type")
        raise Answered(f"HTTP {status} {response.reason}", status, content_type, kept)
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limits.max_body_bytes:
        response.close()
        raise PermanentError(f"the body of {length} bytes is over {limits.max_body_bytes}")
    response.elapsed = _since(deadline - limits.fetch_deadline)  # every hop, to the headers
    return fetched


class Keeper(Protocol):
    """What ``fetch`` offers the responses it does not return (redirects, errors)."""

    def wants(self, response: requests.Response) -> bool:
        """Whether to read this response's body and keep it."""
        ...

    def keep(self, fetched: Fetched, body: bytes) -> object:
        """Keep the response; where it was kept (``--warc``: its ``Stored``), or None."""
        ...


def _keep(keeper: Keeper | None, fetched: Fetched, limits: Limits) -> object:
    """Hand a response the fetch will not return, and its body, to ``keeper``; a body
    that cannot be read, or a keeper that fails, is logged, and the fetch goes on.
    What the keeper returned (None when it did not keep it)."""
    if keeper is None or not keeper.wants(fetched.response):
        return None
    try:
        return keeper.keep(fetched, read_body(fetched, limits))
    except Exception as e:
        logger.warning(
            "Could not keep the %d response of %r: %s", fetched.response.status_code,
            fetched.response.url, e,
        )  # fmt: skip
        return None


def _peer_address(response: requests.Response) -> str | None:
    """The address of the server that sent ``response``, its body not read yet."""
    connection = getattr(response.raw, "_connection", None)
    return getattr(connection, "peer_address", None)  # None: through a proxy, say


def _answer(
    session: requests.Session,
    url: str,
    user_agent: str,
    deadline: float,
    limits: Limits,
    public_so_far: bool,
    conditions: Mapping[str, str] | None,
    asking: Asking,
    cache: HttpCache | None,
) -> tuple[requests.Response, bool, bool]:
    """One hop, from ``cache`` when it holds it, else fetched (:func:`_get`) and kept
    there: its response, whether the fetch has touched a public address, and whether
    the response came from the cache.  A response kept has its body read here, within
    the fetch's bounds, and is given on as the cache will give it again."""
    if cache is not None:
        entry = cache.load(asking.method, url, asking.body, public_only=public_so_far)
        if entry is not None:  # with the request it answers, as --warc keeps it
            entry.response.request = _prepare_hop(session, url, user_agent, asking)[0]
            return entry.response, public_so_far or entry.public, True
    response, public = _get(
        session, url, user_agent, deadline, limits, public_so_far, conditions, asking
    )
    if cache is None or not http_cache.kept(response.status_code):
        return response, public, False
    if response.status_code in http_cache.REDIRECTS and "location" in response.headers:
        cache.save(asking.method, url, asking.body, response, b"", public=public)
        return response, public, False  # its body unread, as a redirect's is
    try:
        content = read_body(Fetched(response, deadline, public), limits)
    finally:
        response.close()
    entry = cache.save(asking.method, url, asking.body, response, content, public=public)
    entry.response.elapsed, entry.response.request = response.elapsed, response.request
    return entry.response, public, False


def _get(
    session: requests.Session,
    url: str,
    user_agent: str,
    deadline: float,
    limits: Limits,
    public_so_far: bool,
    conditions: Mapping[str, str] | None = None,
    asking: Asking = GET,
) -> tuple[requests.Response, bool]:
    """One hop: its response, and whether the fetch has touched a public address."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _overdue(limits)
    timeout = (min(TIMEOUT[0], remaining), min(TIMEOUT[1], remaining))
    try:
        return _send_get(
            session, url, user_agent, timeout, public_only=public_so_far,
            conditions=conditions, asking=asking,
        )  # fmt: skip
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
    session: requests.Session,
    url: str,
    user_agent: str,
    timeout: tuple[float, float],
    *,
    public_only: bool,
    conditions: Mapping[str, str] | None = None,
    asking: Asking = GET,
) -> tuple[requests.Response, bool]:
    """``session.get(url, headers=..., timeout=..., stream=True, allow_redirects=False)``
    (or ``session.request`` as ``asking`` says)
    through the network guard; the response, and whether the fetch has touched a
    public address, this hop included.

    Parameters:
      session(requests.Session): Its headers, cookies, TLS settings and adapter are
        used as ``session.get`` uses them.
      url(str): The hop's URL.
      user_agent(str): The ``User-Agent`` header.
      timeout(tuple[float, float]): The (connect, read) timeouts.
      public_only(bool): The fetch, or the page that linked to it, was public: the hop
        may reach only global addresses.

    The request goes straight to the session's :class:`CrawlerAdapter` (its twin for
    ``public_only``), whose connection checks the addresses it connects to: this skips
    the work requests repeats for every request to merge per-call settings and hooks
    that a crawler never passes, and to build a cookie header from an empty jar (CPU
    per GET and body read, measured here: 447 -> 343 -> 325 µs).  With proxies or
    netrc from the environment (``trust_env``) requests prepares the request and its
    settings, to honour them.  Through a proxy, which resolves the name itself, only
    the name can be checked, here and before the request (:func:`network_guard.check_hop`).
    """
    request, proxies, verify, cert = _prepare_hop(session, url, user_agent, asking)
    if conditions:
        request.headers.update(conditions)

    def send(adapter: BaseAdapter) -> requests.Response:
        return adapter.send(
            request, stream=True, timeout=timeout, verify=verify, cert=cert, proxies=proxies
        )

    adapter = session.get_adapter(str(request.url))
    direct = not proxies or select_proxy(str(request.url), proxies) is None
    if isinstance(adapter, CrawlerAdapter) and direct:
        response = send(adapter.for_hop(public_only))
        public = public_only or _connected_to_public(response)
    else:
        public = network_guard.check_hop(url, public_only)
        response = send(adapter)
    if response.cookies:
        session.cookies.update(response.cookies)
    return response, public


def _prepare_hop(
    session: requests.Session, url: str, user_agent: str, asking: Asking = GET
) -> tuple[PreparedRequest, Mapping[str, str], bool | str, str | tuple[str, str] | None]:
    """The hop's request (a GET, or as ``asking`` says), and the ``proxies``, ``verify``
    and ``cert`` to send it with: the session's own, or with ``trust_env`` as requests
    prepares them, merged with the environment's."""
    headers = {"User-Agent": user_agent, **dict(asking.headers)}
    if session.trust_env:
        request = session.prepare_request(
            requests.Request(asking.method, url, headers=headers, data=asking.body)
        )
        merged = session.merge_environment_settings(str(request.url), {}, True, None, None)
        proxies, verify, cert = merged["proxies"], merged["verify"], merged["cert"]
    else:
        request = _prepare_get(session, url, headers, asking)
        proxies, verify, cert = session.proxies, session.verify, session.cert
    return request, proxies, True if verify is None else verify, cert


def _prepare_get(
    session: requests.Session, url: str, headers: Mapping[str, str], asking: Asking = GET
) -> PreparedRequest:
    """The GET (or the request ``asking`` says) that ``session.prepare_request`` would
    make, minus the merging of settings a crawler never passes."""
    request = requests.PreparedRequest()
    request.prepare_method(asking.method)
    request.prepare_url(url, None)
    request.prepare_headers({**session.headers, **headers})
    if asking.body is not None:
        request.prepare_body(asking.body, None)
    if "@" in url or session.auth is not None:
        request.prepare_auth(session.auth, url)  # --auth-env, or user:password@host
    if session.cookies:
        cookie = get_cookie_header(session.cookies, request)
        if cookie:
            request.headers["Cookie"] = cookie
    return request


def _connected_to_public(response: requests.Response) -> bool:
    """Whether the connection that sent ``response`` (one of :class:`CrawlerAdapter`'s)
    was opened to a name whose addresses were all global."""
    connection = response.raw.connection
    return isinstance(connection, _HTTPConnection) and connection.public


def _proxies_or_netrc() -> bool:
    """Whether requests could find a proxy or netrc credentials in the environment."""
    if any("proxy" in name.lower() or name == "NETRC" for name in os.environ):
        return True
    return any(os.path.exists(os.path.expanduser(f"~/{n}")) for n in (".netrc", "_netrc"))


class _HTTPConnection(HTTPConnection):
    """urllib3's connection, opened through the network guard: the host name is
    resolved once, every address of the answer is checked, and the socket connects to
    one of those very addresses (a second look-up could answer otherwise).  The Host
    header, and for HTTPS the server name and certificate check, stay the URL's host.

    Its class attribute ``public_only`` (True in the public-only pools' connections,
    :data:`_POOL_CLASSES`) refuses (:class:`network_guard.PrivateAddress`) a name with an
    address that is not global, before anything is sent.

    Each (re)connection notes what it learnt: ``public``, whether every address of the
    name was global, and ``peer_address``, the address it connected to, which a response
    closing the connection (``Connection: close``, HTTP/1.0) would otherwise take with it.
    """

    public_only: bool = False
    public: bool = False
    peer_address: str | None = None

    def _new_conn(self) -> socket.socket:
        # As urllib3's own, with its errors: a gaierror stays the cause of the
        # NameResolutionError, where _lookup_failure looks for it.
        host = self._dns_host.strip("[]")
        try:
            answers = socket.getaddrinfo(
                host, self.port, connection.allowed_gai_family(), socket.SOCK_STREAM
            )
            addresses = [answer[4] for answer in answers]
            self.public = network_guard.check_addresses(
                self.host, (str(address[0]) for address in addresses), public_only=self.public_only
            )
            sock = self._connect_to_one_of(addresses)
        except socket.gaierror as e:
            raise NameResolutionError(self.host, self, e) from e
        except TimeoutError as e:
            raise ConnectTimeoutError(
                self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})"
            ) from e
        except OSError as e:
            raise NewConnectionError(self, f"Failed to establish a new connection: {e}") from e
        sys.audit("http.client.connect", self, self.host, self.port)
        return sock

    def _connect_to_one_of(self, addresses: list[tuple[Any, ...]]) -> socket.socket:
        """A socket connected to the first of ``addresses`` (``getaddrinfo``'s socket
        addresses) that accepts, tried in order as urllib3's ``create_connection``
        tries them; the last one's error if none does."""
        error = OSError("getaddrinfo returns an empty list")
        for address in addresses:
            literal = str(address[0])
            if len(address) == 4 and address[3]:  # an IPv6 scope, which the string lacks
                literal += f"%{address[3]}"
            try:
                return connection.create_connection(
                    (literal, self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except OSError as e:
                error = e
        raise error

    def connect(self) -> None:
        super().connect()
        try:
            self.peer_address = str(self.sock.getpeername()[0])
        except (AttributeError, OSError):
            self.peer_address = None


class _HTTPSConnection(_HTTPConnection, HTTPSConnection):
    pass


class _PublicHTTPConnection(_HTTPConnection):
    public_only = True


class _PublicHTTPSConnection(_HTTPSConnection):
    public_only = True


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _PublicHTTPPool(HTTPConnectionPool):
    ConnectionCls = _PublicHTTPConnection


class _PublicHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _PublicHTTPSConnection


#: A pool manager's pool classes by scheme, for its adapter's ``public_only``.  Each
#: adapter has a pool manager of its own, so whether a connection may reach any address
#: is its pool class's to say, not a keyword its pools get (nor a field of their key).
_POOL_CLASSES: dict[bool, dict[str, type[HTTPConnectionPool]]] = {
    False: {"http": _HTTPPool, "https": _HTTPSPool},
    True: {"http": _PublicHTTPPool, "https": _PublicHTTPSPool},
}


class CrawlerAdapter(HTTPAdapter):
    """requests' adapter, minus work it repeats on every request of a crawl: a
    host's connection pool is looked up once while the pool manager keeps it open
    (not through the proxy and pool-key logic each time), and a response that sets
    no cookie skips the cookie jar's header parsing.  With proxies, or cookies to
    take, requests' own code runs.

    Its connections go through the network guard (:class:`_HTTPConnection`).  The
    adapter a session mounts may connect to any address and owns a public-only twin,
    which :meth:`for_hop` hands out for a hop that may reach only global addresses;
    each keeps its own pools, so a connection opened to a private address is never
    reused for such a hop.

    Parameters:
      public_only(bool): Whether its connections refuse a name with an address that is
        not global.
    """

    def __init__(self, *, public_only: bool = False) -> None:
        self.public_only = public_only  # before requests' __init__ makes the pool manager
        super().__init__()
        self._pools: dict[tuple[str, object, object], ConnectionPool] = {}
        self._public_twin = None if public_only else CrawlerAdapter(public_only=True)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        # Connections through the guard, that know their server's address (WARC-IP-Address).
        self.poolmanager.pool_classes_by_scheme = _POOL_CLASSES[self.public_only]

    def for_hop(self, public_only: bool) -> CrawlerAdapter:
        """The adapter to send a hop through: the public-only twin when the hop may
        reach only global addresses, else this one."""
        if public_only and self._public_twin is not None:
            return self._public_twin
        return self

    def close(self) -> None:
        super().close()
        if self._public_twin is not None:
            self._public_twin.close()

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


#: The media types of HTML pages: HTML, and XHTML (the HTML standard's XML syntax).
HTML_TYPES = ("text/html", "application/xhtml+xml")


def is_html(response: requests.Response) -> bool:
    return response.headers.get("content-type", "").lower().lstrip().startswith(HTML_TYPES)


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
            response.elapsed = _since(started)  # the record's fetch_ms: request to body read
            return bytes(body)
        if len(body) > limits.max_body_bytes or raw.tell() > limits.max_body_bytes:
            raise PermanentError(f"the body is over {limits.max_body_bytes} bytes")


def _since(started: float) -> timedelta:
    """The time since ``started`` (a ``time.monotonic()``): a fetch's, kept as the
    response's ``elapsed`` (requests' is its last hop's, to its headers)."""
    return timedelta(seconds=time.monotonic() - started)


def _bound_next_read(response: requests.Response, seconds: float) -> None:
    """Make the next socket read wait no longer than ``seconds``."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.01))


def retry_after(response: requests.Response, limits: Limits) -> int | None:
    """The server's ``Retry-After``, in milliseconds and at most ``max_backoff``."""
    wait = retry_after_ms(response.headers.get("retry-after", ""))
    return None if wait is None else min(wait, limits.max_backoff)


def retry_after_ms(value: str) -> int | None:
    """A ``Retry-After`` header's wait in milliseconds (seconds, or an HTTP date: the
    wait until then, none when it is past); None when there is none or it is not one
    of the two (a browser's requests for a page read theirs here too)."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return int(max(seconds, 0) * 1000)
