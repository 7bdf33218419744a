"""Crawl options: chosen at seeding, carried in every message of that crawl.

``crawl(url)`` with no options is upstream's crawl.  Options travel as the
``options`` keyword argument of each message, so crawls with different options
can share the same workers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import re2
import requests

from crawler.errors import InvalidMessage, shown
from crawler.links.canonical import canonical_url, check_host_name
from crawler.links.cleaning import clean_href
from crawler.links.sites import site_of

T = TypeVar("T")
#: Sent with every request unless ``--user-agent`` says otherwise.
DEFAULT_USER_AGENT = (
    "dramatiq-crawler/0.1 (+https://github.com/Bogdanp/dramatiq/tree/master/examples/crawler)"
)


@dataclass(frozen=True)
class CrawlOptions:
    """What one crawl may do.

    Parameters:
      crawl_id(str): Names the crawl; budgets and counters are kept per crawl.
      follow_relative(bool): Find links with an HTML tokenizer and resolve relative ones.
      allowed_domains(tuple): Hosts (and their subdomains) links may go to; empty: any.
      max_depth(int): Links are followed this many hops from a seed at most.
      max_pages(int): Pages this crawl fetches at most, across all workers.
      obey_robots(bool): Honour each host's robots.txt, and its Crawl-delay.
      max_rate(float): Requests per second per host at most, across all workers.
      user_agent(str): The User-Agent header sent with each request.
      include(tuple): Regular expressions; a link is followed only when one of them
        matches it (searched anywhere in the URL), when any is given.
      exclude(tuple): Regular expressions; a link one of them matches is not followed.
      allowed_sites(tuple): Registrable domains (eTLD+1) whose hosts links may go to,
        besides ``allowed_domains`` (``--same-site``).
      max_per_host(int): Fetches in flight per host at most, across all workers.
      max_pages_per_host(int): Pages this crawl fetches per host at most.
      sitemaps(bool): The seeds' sites' sitemaps were read for more seeds.
      breadth_first(bool): Shallow pages go before deeper ones (RabbitMQ priorities).
      warc(str): The directory where every response is kept in WARC files; a
        worker's ``CRAWLER_WARC_DIR`` takes its place.
      collect_records(bool): Workers send a record of each URL to the waiting seeder.
      batched_records(bool): The seeder reads records sent together as one message.
      records_without_links(bool): Those records leave out the page's links (the
        seeder writes no ``--output``).  Both are asked for by the seeder, so that a
        seeder from before them still gets what it reads.
      handler(str): The page handler (``package.module:function``) the crawl's pages
        go through, one of those the worker loaded (:mod:`crawler.handlers`).
      headers(tuple): ``Name: value`` headers sent with each request (``--header``).
      cookies(bool): Keep the cookies the crawl's sites set and send them back, within
        the crawl only (``--cookies off``: none).
      proxy(str): An http(s) proxy every request of the crawl goes through.
      timeout(float): Seconds one fetch may take, below the worker's own deadline.
      handler_timeout(float): Seconds the page handler may take on one page, instead
        of the worker's ``CRAWLER_HANDLER_TIMEOUT``; no more than the actor's time
        limit leaves after the fetch's deadline (:meth:`crawler.handlers.Handlers.timeout_for`).
      retries(int): Retries of a failed fetch at most, below the worker's (3).
      auth_env(tuple): ``host=CRAWLER_AUTH_X``: requests to ``host`` carry the HTTP
        Basic credentials (``user:password``) in the worker's variable ``CRAWLER_AUTH_X``;
        no secret travels in a message.
      render(bool): Load each HTML page in headless Chromium and read its links, handler
        tree and WARC conversion record from the rendered DOM (``--render``).
      render_wait(float): Seconds to wait after the page's load event before reading the
        DOM; None: until the network is idle (no request for 500 ms), within the
        render's deadline (``--render-wait``).
      render_media(bool): Let the browser load images, fonts and media too (by default
        they are refused) (``--render-media``).
      recrawl(bool): The seeder kept an earlier crawl's records in the dedup store under
        this crawl (``--recrawl-from``): each page is asked for with its validators, and
        one answered ``304`` is ``unchanged``, its earlier links followed.
    """

    crawl_id: str | None = None
    follow_relative: bool = False
    allowed_domains: tuple[str, ...] = field(default_factory=tuple)
    max_depth: int | None = None
    max_pages: int | None = None
    obey_robots: bool = False
    max_rate: float | None = None
    user_agent: str = DEFAULT_USER_AGENT
    include: tuple[str, ...] = field(default_factory=tuple)
    exclude: tuple[str, ...] = field(default_factory=tuple)
    allowed_sites: tuple[str, ...] = field(default_factory=tuple)
    max_per_host: int | None = None
    max_pages_per_host: int | None = None
    sitemaps: bool = False
    breadth_first: bool = False
    warc: str | None = None
    collect_records: bool = False
    batched_records: bool = False
    records_without_links: bool = False
    handler: str | None = None
    headers: tuple[str, ...] = field(default_factory=tuple)
    cookies: bool = True
    proxy: str | None = None
    timeout: float | None = None
    handler_timeout: float | None = None
    retries: int | None = None
    auth_env: tuple[str, ...] = field(default_factory=tuple)
    render: bool = False
    render_wait: float | None = None
    render_media: bool = False
    recrawl: bool = False

    def to_message(self) -> dict[str, Any] | None:
        """The options as a message keyword argument: only what differs from upstream."""
        defaults = CrawlOptions()
        values = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(defaults, f.name)
        }
        for name in _LISTS.intersection(values):
            values[name] = list(values[name])
        return values or None

    @classmethod
    def from_message(cls, values: Any) -> CrawlOptions:
        """The options a message carries, each checked by its :data:`RULES` entry; an
        option no rule names (from a newer seeder) is ignored.  Raises
        :class:`~crawler.errors.InvalidMessage` naming the first option that fails."""
        if values is None:
            return UPSTREAM
        if not isinstance(values, dict):
            raise InvalidMessage(f"message options must be a JSON object, got {quoted(values)}")
        # A crawl's messages carry the same options: checked once, the value then reused.
        seen = repr(values)
        known = _CHECKED.get(seen)
        if known is not None:
            return known
        options = cls._checked(values)
        with _CHECKED_LOCK:
            if len(_CHECKED) >= CHECKED_CACHE:
                _CHECKED.pop(next(iter(_CHECKED)))
            _CHECKED[seen] = options
        return options

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> CrawlOptions:
        checked: dict[str, Any] = {}
        for name, value in values.items():
            rule = RULES.get(name)
            if rule is None:
                continue
            if value is None and getattr(UPSTREAM, name) is None:  # an option left unset
                checked[name] = None
                continue
            checked[name] = rule.apply("message options", name, value)
        return cls(**checked) if checked else UPSTREAM

    @classmethod
    def readable_from_message(cls, values: Any) -> CrawlOptions:
        """What can be read of a message's options that may not pass the check: each
        option that passes its rule, upstream's value for the others (the bookkeeping of
        a refused message still finds its crawl)."""
        if not isinstance(values, dict):
            return UPSTREAM
        with contextlib.suppress(InvalidMessage):
            return cls.from_message(values)  # most often they pass: checked once, kept
        checked: dict[str, Any] = {}
        for name, value in values.items():
            rule = RULES.get(name)
            if rule is not None and value is not None:
                with contextlib.suppress(ValueError):
                    checked[name] = rule.check(value)
        return cls(**checked)

    def allows_url(self, url: str) -> bool:
        """Whether ``url`` is in the crawl's scope: its host allowed (:meth:`allows_host`),
        the URL matched by an ``--include`` pattern (when there are any) and by no
        ``--exclude`` pattern."""
        if not self.allows_host(url):
            return False
        if self.include and not any(p.search(url) for p in patterns(self.include)):
            return False
        return not any(p.search(url) for p in patterns(self.exclude))

    def allows_host(self, url: str) -> bool:
        """Whether ``url``'s host is in the crawl's domains or sites (any host when
        neither is set)."""
        if not (self.allowed_domains or self.allowed_sites):
            return True
        # Most links of a crawl are on a few hosts: each one's answer is kept.
        _, slashes, rest = url.partition("://")
        netloc = rest.partition("/")[0].partition("?")[0]
        if not slashes or any(c in netloc for c in "#\\ \t\r\n"):  # not as canonical URLs are
            return self._allows_netloc(url)
        allowed = self._hosts.get(netloc)
        if allowed is None:
            allowed = self._allows_netloc(url)
            if len(self._hosts) < HOSTS_CACHE:
                self._hosts[netloc] = allowed
        return allowed

    @cached_property
    def _hosts(self) -> dict[str, bool]:
        """:meth:`allows_host`'s answers, by the URLs' ``host:port`` (and user info)."""
        return {}

    def _allows_netloc(self, url: str) -> bool:
        host = (urlsplit(url).hostname or "").rstrip(".")
        if any(host == domain or host.endswith("." + domain) for domain in self.allowed_domains):
            return True
        return bool(self.allowed_sites) and site_of(host) in self.allowed_sites


UPSTREAM = CrawlOptions()
#: Checked options kept by their message's spelling (:meth:`CrawlOptions.from_message`).
CHECKED_CACHE = 64
_CHECKED: dict[str, CrawlOptions] = {}
_CHECKED_LOCK = threading.Lock()
#: Hosts whose answer each options value keeps (:meth:`CrawlOptions.allows_host`).
HOSTS_CACHE = 4096
#: The options that are lists in a message (JSON has no tuples).
_LISTS = frozenset(
    ("allowed_domains", "include", "exclude", "allowed_sites", "headers", "auth_env")
)


@lru_cache(maxsize=256)
def patterns(sources: tuple[str, ...]) -> list[Any]:
    """``--include``/``--exclude`` patterns, compiled once per process by RE2."""
    return [re2.compile(source, _RE2_OPTIONS) for source in sources]


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is said once, by us, not on stderr too
    return options


#: How RE2 compiles ``--include``/``--exclude``: it runs in time linear in the URL's
#: length whatever the pattern (no backtracking), so no pattern can hold a worker; the
#: price is Perl's backreferences and lookaround, which it refuses.
_RE2_OPTIONS = _re2_options()


#: The largest whole number an option takes: what Memcached and Redis counters hold.
MAX_WHOLE = 2**63 - 1
#: ``--max-per-host`` at most: each fetch looks at that many slot keys.
MAX_PER_HOST = 1000
#: ``--max-rate`` from this to that many requests per second: a slower rate's buckets
#: would outlive what Memcached takes as a lifetime (30 days), a faster one limits nothing.
RATE_RANGE = (0.001, 10_000.0)
#: The longest ``--include``/``--exclude`` pattern: longer ones are refused rather than
#: compiled.
MAX_PATTERN = 1000
#: The longest ``--warc`` directory name, and the longest part of it (most file systems').
MAX_DIRECTORY, MAX_DIRECTORY_PART = 1024, 255

#: What ``--allow-domain`` takes once IDNA-encoded: host name characters only.
_DOMAIN = re.compile(r"[a-z0-9_.-]+", re.ASCII)
#: A crawl id a message may carry: the seeder's are 32 hex digits; other programs'
#: may be any short name that is safe in store keys and file names.
_CRAWL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)


@dataclass(frozen=True)
class Rule(Generic[T]):
    """What the value of one option must be, in a message and on the command line alike.

    Parameters:
      must_be(str): The rule in words, for errors: "a whole number above zero".
      check(Callable): Returns the value as :class:`CrawlOptions` keeps it (a tuple
        for a list, a host name spelt as canonical URLs spell it), or raises
        ``ValueError``, whose text (if any) says more.
    """

    must_be: str
    check: Callable[[Any], T]

    def apply(self, where: str, name: str, value: Any) -> T:
        """``value`` as :attr:`check` returns it; or :class:`~crawler.errors.InvalidMessage`
        naming ``where`` (``message options``), ``name`` and the rule."""
        try:
            return self.check(value)
        except ValueError as e:
            detail = f" ({e})" if str(e) else ""
            raise InvalidMessage(
                f"{where}: {name} must be {self.must_be}, got {quoted(value)}{detail}"
            ) from e


def _flag(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError
    return value


def whole_between(low: int, high: int) -> Callable[[Any], int]:
    """A check: a whole number from ``low`` to ``high`` (a bool is none: True is no 1)."""

    def whole(value: Any) -> int:
        if type(value) is not int or not low <= value <= high:
            raise ValueError
        return value

    return whole


def _rate(value: Any) -> float:
    """A number of a message (JSON's NaN and Infinity included) or of ``float()``."""
    if type(value) not in (int, float):
        raise ValueError
    try:
        rate = float(value)  # an int past float's range: OverflowError
    except OverflowError as e:
        raise ValueError from e
    if not (math.isfinite(rate) and RATE_RANGE[0] <= rate <= RATE_RANGE[1]):
        raise ValueError
    return rate


def utf8_text(value: Any) -> str:
    """A string that can be written out: no lone surrogate (JSON's ``"\\ud800"``)."""
    if not isinstance(value, str):
        raise ValueError("not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("a lone surrogate in it") from e
    return value


def _crawl_id(value: Any) -> str:
    if not (isinstance(value, str) and _CRAWL_ID.fullmatch(value)):
        raise ValueError
    return value


def host_name(value: Any) -> str:
    """A host name or IP address, spelt as canonical URLs spell hosts (lower case, IDNA,
    no trailing dot), so that it can match them."""
    domain = utf8_text(value).strip().lower().rstrip(".")
    try:
        if ":" in domain:  # an IPv6 address, with or without its brackets
            return str(ipaddress.IPv6Address(domain.strip("[]")))
        domain = domain.encode("idna").decode("ascii")
        if not _DOMAIN.fullmatch(domain):
            raise ValueError(f"{domain!r} has a character no host name has")
        check_host_name(domain)
    except ValueError as e:  # UnicodeError included
        raise ValueError(str(e) or type(e).__name__) from e
    return domain


def regular_expression(value: Any) -> str:
    """A pattern in Python's ``re`` syntax that RE2 runs (no backreferences or lookaround)."""
    source = utf8_text(value)
    if len(source) > MAX_PATTERN:
        raise ValueError(f"longer than {MAX_PATTERN} characters")
    try:
        re.compile(source)  # the syntax users write: Python's
    except (re.error, OverflowError, RecursionError) as e:  # a{99999999999}: OverflowError
        raise ValueError(str(e) or type(e).__name__) from e
    try:
        re2.compile(source, _RE2_OPTIONS)  # what runs: RE2's, which lacks a few of its parts
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args else type(e).__name__
        raise ValueError(f"{reason} (RE2 syntax: no backreferences or lookaround)") from e
    return source


def _each(check: Callable[[Any], str], most: int | None = None) -> Callable[[Any], tuple[str, ...]]:
    """A list (JSON's array) of ``most`` items at most, each passing ``check``; kept as
    a tuple."""

    def each(values: Any) -> tuple[str, ...]:
        if not isinstance(values, (list, tuple)):  # a string is no list of its characters
            raise ValueError
        if most is not None and len(values) > most:
            raise ValueError(f"more than {most}")
        checked = []
        for value in values:
            try:
                checked.append(check(value))
            except ValueError as e:
                raise ValueError(f"{quoted(value)}: {e}" if str(e) else quoted(value)) from e
        return tuple(checked)

    return each


def header_value(value: Any) -> str:
    """A header value requests will send, or every request of the crawl would fail:
    no line break or control character, only characters HTTP/1.1 carries (Latin-1).
    Spaces around it are dropped (requests refuses a leading one)."""
    if not isinstance(value, str):
        raise ValueError
    if any((ord(char) < 32 and char != "\t") or 127 <= ord(char) < 160 for char in value):
        raise ValueError("it has a line break or control character")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError as e:
        raise ValueError("it has a character HTTP headers cannot carry") from e
    return value.strip()


def header_line(value: Any) -> str:
    """``Name: value``: a header name (an HTTP token) and a value requests will send."""
    if not isinstance(value, str):
        raise ValueError
    name, colon, text = value.partition(":")
    if not colon or not _TOKEN.fullmatch(name.strip()):
        raise ValueError(f"{quoted(value)} is not 'Name: value'")
    return f"{name.strip()}: {header_value(text)}"


def proxy_url(value: Any) -> str:
    """An ``http://`` or ``https://`` proxy: ``http://host:port``."""
    if not isinstance(value, str):
        raise ValueError
    return canonical_http_url(value)


def seconds(value: Any) -> float:
    """A fetch's time in seconds: above 0, at most :data:`MAX_TIMEOUT`."""
    if type(value) not in (int, float) or not 0 < value <= MAX_TIMEOUT:
        raise ValueError
    return float(value)


def handler_seconds(value: Any) -> float:
    """A handler's time on a page in seconds: above 0, below :data:`MAX_HANDLER_TIMEOUT`."""
    if type(value) not in (int, float) or not 0 < value < MAX_HANDLER_TIMEOUT:
        raise ValueError
    return float(value)


def render_seconds(value: Any) -> float:
    """A render's settle wait in seconds: above 0, at most :data:`MAX_RENDER_WAIT`."""
    if type(value) not in (int, float) or not 0 < value <= MAX_RENDER_WAIT:
        raise ValueError
    return float(value)


def auth_pair(value: Any) -> str:
    """``host=CRAWLER_AUTH_NAME``: a host, and the worker's variable its secret is in."""
    if not isinstance(value, str):
        raise ValueError
    host, equals, variable = value.partition("=")
    if not equals or not _AUTH_VARIABLE.fullmatch(variable):
        raise ValueError(f"{quoted(value)} is not host={AUTH_PREFIX}NAME")
    return f"{host_name(host.strip().lower())}={variable}"


def directory_name(value: Any) -> str:
    """A directory, as a message may name one: where it lands is the worker's to say
    (:meth:`crawler.archiving.warc.WarcFiles.directory`); ``..`` never."""
    name = utf8_text(value)
    if not name or "\0" in name:
        raise ValueError
    parts = Path(name).parts
    if ".." in parts:
        raise ValueError("'..' is not allowed in it")
    if len(name) > MAX_DIRECTORY or any(len(part) > MAX_DIRECTORY_PART for part in parts):
        raise ValueError(f"longer than {MAX_DIRECTORY} characters, or {MAX_DIRECTORY_PART} a part")
    return name


WHOLE = Rule("a whole number", whole_between(0, MAX_WHOLE))
ABOVE_ZERO = Rule("a whole number above zero", whole_between(1, MAX_WHOLE))
RATE = Rule(f"a number from {RATE_RANGE[0]:g} to {RATE_RANGE[1]:g}", _rate)
PER_HOST = Rule(f"a whole number from 1 to {MAX_PER_HOST}", whole_between(1, MAX_PER_HOST))
FLAG = Rule("true or false", _flag)
HEADER_VALUE = Rule("a header value", header_value)
DIRECTORY = Rule("a directory name", directory_name)
DOMAINS = Rule("a list of domain names", _each(host_name))
PATTERNS = Rule("a list of regular expressions", _each(regular_expression))

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: ``--auth-env``'s variables: only the worker's own ``CRAWLER_AUTH_*``, never another secret.
AUTH_PREFIX = "CRAWLER_AUTH_"
_AUTH_VARIABLE = re.compile(AUTH_PREFIX + r"[A-Z0-9_]+", re.ASCII)
#: ``--timeout`` at most, in seconds (a worker keeps to its own deadline below that).
MAX_TIMEOUT = 600.0
#: ``--handler-timeout`` below this, in seconds: the ``crawl`` actor's time limit
#: (:data:`crawler.environment.ACTOR_TIME_LIMIT`), which the fetch shares.
MAX_HANDLER_TIMEOUT = 10.0
#: ``--render-wait`` at most, in seconds: a render's settle wait, below the ``crawl``
#: actor's 10 s time limit.
MAX_RENDER_WAIT = 8.0
#: ``--retries`` at most: the ``crawl`` actor's ``max_retries``.
MAX_RETRIES = 3
#: ``--header``s a crawl sends at most.
MAX_HEADERS = 32
HEADERS = Rule(
    f"a list of 'Name: value' headers (at most {MAX_HEADERS})", _each(header_line, MAX_HEADERS)
)
AUTH_ENV = Rule(f"a list of host={AUTH_PREFIX}NAME", _each(auth_pair))

_HANDLER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", re.ASCII)


def handler_name(value: Any) -> str:
    """``package.module:function``, as a worker's ``CRAWLER_HANDLERS`` names it."""
    if not (isinstance(value, str) and len(value) <= 200 and _HANDLER.fullmatch(value)):
        raise ValueError
    return value


#: Each option's rule; a message's options are checked by these and nothing else
#: (:meth:`CrawlOptions.from_message`), and the command line's types use them too.
RULES: dict[str, Rule[Any]] = {
    "crawl_id": Rule("a crawl id (1 to 64 letters, digits, '-' or '_')", _crawl_id),
    "follow_relative": FLAG,
    "allowed_domains": DOMAINS,
    "max_depth": WHOLE,
    "max_pages": ABOVE_ZERO,
    "obey_robots": FLAG,
    "max_rate": RATE,
    "user_agent": HEADER_VALUE,
    "include": PATTERNS,
    "exclude": PATTERNS,
    "allowed_sites": DOMAINS,
    "max_per_host": PER_HOST,
    "max_pages_per_host": ABOVE_ZERO,
    "sitemaps": FLAG,
    "breadth_first": FLAG,
    "warc": DIRECTORY,
    "collect_records": FLAG,
    "batched_records": FLAG,
    "records_without_links": FLAG,
    "handler": Rule("a handler's name, package.module:function", handler_name),
    "headers": HEADERS,
    "cookies": FLAG,
    "proxy": Rule("an http:// or https:// proxy URL", proxy_url),
    "timeout": Rule(f"a number of seconds above 0, at most {MAX_TIMEOUT:g}", seconds),
    "handler_timeout": Rule(
        f"a number of seconds above 0, below {MAX_HANDLER_TIMEOUT:g}", handler_seconds
    ),
    "retries": Rule(f"a whole number from 0 to {MAX_RETRIES}", whole_between(0, MAX_RETRIES)),
    "auth_env": AUTH_ENV,
    "render": FLAG,
    "render_wait": Rule(
        f"a number of seconds above 0, at most {MAX_RENDER_WAIT:g}", render_seconds
    ),
    "render_media": FLAG,
    "recrawl": FLAG,
}


def quoted(value: Any) -> str:
    """A value as an error quotes it: its ``repr``, cut short (a message may carry
    anything, of any length)."""
    return shown(repr(value))


def _scheme_left_out(value: str) -> bool:
    """Whether ``value`` reads as a URL without its scheme (``example.com/docs``,
    ``localhost:8000/``), not one of another scheme (``mailto:a@b.c``)."""
    if "://" in value or value.startswith("/"):
        return False
    host = value.partition("/")[0]
    name, colon, port = host.partition(":")
    return bool(name) and ("." in name or name == "localhost") and (not colon or port.isdigit())


def canonical_http_url(value: str, *, sendable: bool = True) -> str:
    """``value`` in its canonical form, if it is an absolute http(s) URL; else a
    ``ValueError`` saying why ("has no host name"), for the seeder's command line and
    a message's URL alike.

    Refused: another scheme, no host, a port that is not a number from 1 to 65535,
    a host name no resolver accepts; with ``sendable``, anything requests cannot send
    (requests' own check costs 0.1 ms: a worker leaves it to the fetch, which refuses
    the same as a permanent error).
    """
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        if _scheme_left_out(value):
            raise ValueError(f"is not an http:// or https:// URL (did you mean 'https://{value}'?)")
        raise ValueError("is not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("has no host name")
    try:
        parts.port  # noqa: B018  (raises ValueError on a bad port)
        if sendable:
            requests.Request("GET", value).prepare()
        canonical = canonical_url(clean_href(value))  # port 0, impossible host names
        host_name(urlsplit(canonical).hostname)  # a space, a control character
        return canonical
    except (ValueError, requests.RequestException) as e:
        raise ValueError(f"is not a valid URL: {e}") from e
