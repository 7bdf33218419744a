"""The rules an option's value meets: :class:`Rule`, each a check and its words.

Two kinds live here, side by side.  A message rule (:class:`Rule`, ``ABOVE_ZERO``...)
is what a worker checks a message's option by (:meth:`crawler.options.CrawlOptions.from_message`);
a keyword check (:func:`positive_int`, :func:`rate`...) reads the same option as the
command line or the Python API gives it (``"5"`` or ``5``), checks it by that very
rule, and says a refusal as a :class:`BadValue` in the flag's words.  Which option
takes which is said once, in :data:`crawler.option_table.TABLE`.  No argparse here.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import re2
import requests

from crawler.errors import InvalidMessage, shown
from crawler.links.canonical import canonical_url, check_host_name
from crawler.links.cleaning import clean_href

T = TypeVar("T")
#: Sent with every request unless ``--user-agent`` says otherwise.
DEFAULT_USER_AGENT = (
    "dramatiq-crawler/0.1 (+https://github.com/Bogdanp/dramatiq/tree/master/examples/crawler)"
)


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is said once, by us, not on stderr too
    return options


#: How RE2 compiles ``--include``/``--exclude``: it runs in time linear in the URL's
#: length whatever the pattern (no backtracking), so no pattern can hold a worker; the
#: price is Perl's backreferences and lookaround, which it refuses.
RE2_OPTIONS = _re2_options()

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
        re2.compile(source, RE2_OPTIONS)  # what runs: RE2's, which lacks a few of its parts
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
#: ``--accept``/``--reject``: the suffixes or wildcard patterns a list may hold, at most.
MAX_SUFFIXES = 64


def suffix_list(value: Any) -> str:
    """wget's ``-A``/``-R`` list: comma-separated file-name suffixes (``pdf``) or wildcard
    patterns (``*-report-*.pdf``), kept lower case and without spaces; no ``/`` (they are
    about the file name, the last part of the URL's path)."""
    text = utf8_text(value)
    items = [item.strip().lower() for item in text.split(",")]
    if not items or len(items) > MAX_SUFFIXES or not all(items):
        raise ValueError(f"a comma-separated list of 1 to {MAX_SUFFIXES} suffixes")
    for item in items:
        if "/" in item or len(item) > 200:
            raise ValueError(f"{item!r}: a file name's suffix or pattern has no / (200 at most)")
    return ",".join(items)


SUFFIXES = Rule("a list of file-name suffixes or patterns (pdf,zip)", _each(suffix_list, 16))
#: ``--no-parent``'s directories a crawl keeps below, at most.
MAX_PARENTS = 32


def directory_url(value: Any) -> str:
    """An ``http(s)://host/path/`` URL of a directory: the part of a canonical URL up to
    the last ``/`` of its path, as ``--no-parent`` keeps links below it."""
    if not isinstance(value, str) or not value.endswith("/") or len(value) > 2048:
        raise ValueError
    scheme, _, rest = value.partition("://")
    if scheme not in ("http", "https") or not rest.partition("/")[0] or "?" in value:
        raise ValueError
    return value


PARENTS = Rule(
    f"a list of at most {MAX_PARENTS} directory URLs (http(s)://host/path/)",
    _each(directory_url, MAX_PARENTS),
)

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


CRAWL_ID = Rule("a crawl id (1 to 64 letters, digits, '-' or '_')", _crawl_id)
HANDLER = Rule("a handler's name, package.module:function", handler_name)
#: A crawl's item pipelines, at most.
MAX_PIPELINES = 32
PIPELINES = Rule(
    f"a list of at most {MAX_PIPELINES} item pipelines' names, package.module:function",
    _each(handler_name, MAX_PIPELINES),
)
PROXY = Rule("an http:// or https:// proxy URL", proxy_url)
TIMEOUT = Rule(f"a number of seconds above 0, at most {MAX_TIMEOUT:g}", seconds)
HANDLER_TIMEOUT = Rule(
    f"a number of seconds above 0, below {MAX_HANDLER_TIMEOUT:g}", handler_seconds
)
RETRIES = Rule(f"a whole number from 0 to {MAX_RETRIES}", whole_between(0, MAX_RETRIES))
RENDER_WAIT = Rule(f"a number of seconds above 0, at most {MAX_RENDER_WAIT:g}", render_seconds)

#: ``--follow``'s choices: every link of every page (upstream's crawl), or only what the
#: page handler asks (its requests, and its ``page.enqueue_links()``).
FOLLOW_ALL = "all"
FOLLOW_HANDLERS = "handlers"


def _follow_choice(value: Any) -> str:
    if value not in (FOLLOW_ALL, FOLLOW_HANDLERS) or not isinstance(value, str):
        raise ValueError
    return str(value)


FOLLOW = Rule(f"{FOLLOW_ALL} or {FOLLOW_HANDLERS}", _follow_choice)
#: ``--render``'s values: every page (``--render``, ``--render all``: True), or only the
#: pages that need a browser (``--render auto``).
RENDER_ALL, RENDER_AUTO = "all", "auto"


def _render_choice(value: Any) -> bool | str:
    if type(value) is bool:
        return value
    if value == RENDER_ALL:
        return True
    if value != RENDER_AUTO or not isinstance(value, str):
        raise ValueError
    return RENDER_AUTO


RENDER = Rule(f"true, false, {RENDER_ALL} or {RENDER_AUTO}", _render_choice)
#: ``--near-duplicates``: say so in the record, or skip the page too.
NEAR_DUPLICATES_MARK, NEAR_DUPLICATES_SKIP = "mark", "skip"


def _near_duplicates_choice(value: Any) -> str:
    if value not in (NEAR_DUPLICATES_MARK, NEAR_DUPLICATES_SKIP) or not isinstance(value, str):
        raise ValueError
    return str(value)


NEAR_DUPLICATES = Rule(f"{NEAR_DUPLICATES_MARK} or {NEAR_DUPLICATES_SKIP}", _near_duplicates_choice)


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


class BadValue(ValueError):
    """A value an option refuses, in the words its flag's usage error uses
    (``'0' is not a whole number above zero``)."""


def _text(value: Any) -> str:
    """``value`` as its flag's text would be: what an error quotes."""
    return value if isinstance(value, str) else str(value)


def _checked(value: Any, rule: Rule[T], parse: Callable[[str], Any] = str) -> T:
    """``value`` checked by ``rule``: the flag's text read by ``parse`` first, any other
    value as it is (a bool is no number, a number no string)."""
    try:
        return rule.check(parse(value) if isinstance(value, str) else value)
    except ValueError as e:
        detail = f": {e}" if str(e) else ""
        raise BadValue(f"{_text(value)!r} is not {rule.must_be}{detail}") from e


def _digits(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def whole_number(value: Any) -> int:
    """A whole number (``max_depth``'s rule)."""
    return _checked(value, WHOLE, _digits)


def positive_int(value: Any) -> int:
    """A whole number above zero (``max_pages``' rule)."""
    return _checked(value, ABOVE_ZERO, _digits)


#: ``--threads`` at most: a thread a fetch in flight, each with its connections.
MAX_THREADS = 512
#: ``--local``'s fetching threads when ``--threads`` is not given.
DEFAULT_THREADS = 8
THREADS = Rule(f"a whole number from 1 to {MAX_THREADS}", whole_between(1, MAX_THREADS))


def threads(value: Any) -> int:
    """``--local``'s threads, 1 to ``MAX_THREADS``."""
    return _checked(value, THREADS, _digits)


#: ``--processes`` at most.
MAX_PROCESSES = 64
PROCESSES = Rule(f"a whole number from 1 to {MAX_PROCESSES}", whole_between(1, MAX_PROCESSES))


def processes(value: Any) -> int:
    """``--local``'s crawling processes, 1 to ``MAX_PROCESSES``."""
    return _checked(value, PROCESSES, _digits)


def rate(value: Any) -> float:
    """``--max-rate``'s number (``nan``, ``inf`` and ``1e309``, which float() takes,
    would fail every page of the crawl)."""
    return _checked(value, RATE, _float)


def per_host(value: Any) -> int:
    """``--max-per-host``'s number."""
    return _checked(value, PER_HOST, _digits)


def domain_name(value: Any) -> str:
    """A host name or IP address (:func:`~crawler.options.host_name`)."""
    try:
        return host_name(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not a domain name") from e


def pattern(value: Any) -> str:
    """A regular expression RE2 compiles."""
    return _checked(value, Rule("a regular expression", regular_expression))


def suffixes(value: Any) -> str:
    """``--accept``/``--reject``'s comma-separated suffixes or patterns."""
    return _checked(value, Rule("a list of file-name suffixes or patterns (pdf,zip)", suffix_list))


def port(value: Any) -> int:
    """A TCP port: a whole number from 1 to 65535."""
    number = _digits(value) if isinstance(value, str) else value
    if not (type(number) is int and 1 <= number <= 65535):
        raise BadValue(f"{_text(value)!r} is not a port (1 to 65535)")
    return number


def handler(value: Any) -> str:
    """``--handler``'s ``package.module:function``."""
    try:
        return handler_name(value)
    except ValueError:
        raise BadValue(
            f"{_text(value)!r} is not a handler's name: package.module:function"
        ) from None


def user_agent(value: Any) -> str:
    """A header value (:func:`~crawler.options.header_value`)."""
    return _checked(value, HEADER_VALUE)


def header(value: Any) -> str:
    """``--header``'s ``Name: value`` (:func:`~crawler.options.header_line`)."""
    try:
        return header_line(value)
    except ValueError as e:
        if isinstance(value, str) and ":" in value:
            raise BadValue(f"{value!r} cannot be sent: {e}") from e
        raise BadValue(f"{_text(value)!r} is not 'Name: value'") from e


def cookies(value: Any) -> bool:
    """``--cookies on|off`` (or True and False)."""
    if isinstance(value, bool):
        return value
    if value in ("on", "off"):
        return bool(value == "on")
    raise BadValue(f"{_text(value)!r} is not on or off")


def proxy(value: Any) -> str:
    """``--proxy``'s ``http://host:port`` (or https)."""
    try:
        return proxy_url(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not an http:// or https:// proxy URL") from e


def timeout(value: Any) -> float:
    """``--timeout``'s seconds."""
    checked: float = _checked(value, TIMEOUT, _float)
    return checked


def pipeline(value: Any) -> str:
    """``--pipeline``'s ``package.module:function``."""
    try:
        return handler_name(value)
    except ValueError:
        raise BadValue(
            f"{_text(value)!r} is not an item pipeline's name: package.module:function"
        ) from None


def handler_timeout(value: Any) -> float:
    """``--handler-timeout``'s seconds."""
    checked: float = _checked(value, HANDLER_TIMEOUT, _float)
    return checked


def retries(value: Any) -> int:
    """``--retries``' number, at most the actor's."""
    checked: int = _checked(value, RETRIES, _digits)
    return checked


def render_wait(value: Any) -> float | None:
    """``--render-wait``'s ``idle`` (None: until the network is idle, the default) or
    seconds, at most :data:`~crawler.options.MAX_RENDER_WAIT`."""
    if value == "idle":
        return None
    checked: float = _checked(value, RENDER_WAIT, _float)
    return checked


def auth_env(value: Any) -> str:
    """``--auth-env``'s ``host=CRAWLER_AUTH_NAME``."""
    try:
        return auth_pair(value)
    except ValueError as e:
        raise BadValue(
            f"{_text(value)!r} is not host={AUTH_PREFIX}NAME (a variable of the workers')"
        ) from e


def crawl_id(value: Any) -> str:
    """A crawl id as the seeder prints it (32 hex digits)."""
    if not (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value)):
        raise BadValue(f"{_text(value)!r} is not a crawl id (32 hex digits)")
    return value


def http_url(value: Any) -> str:
    """An absolute http(s) URL, in its canonical form (:func:`canonical_http_url`)."""
    if not isinstance(value, str):
        raise BadValue(f"{_text(value)!r} is not an http:// or https:// URL")
    try:
        return canonical_http_url(value)
    except ValueError as e:
        raise BadValue(f"{value!r} {e}") from e


#: The levels ``--log-level`` takes, as Python's logging names them.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in LOG_LEVELS:
        raise ValueError
    return value.upper()


LOG_LEVEL = Rule(f"a log level: {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}", _log_level)


def log_level(value: Any) -> str:
    """``--log-level``'s level, upper-cased."""
    return _checked(value, LOG_LEVEL)


def path(value: Any) -> Path:
    """A file or directory of this machine (``--state``, ``--output``; ``-``: stdout)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"{_text(value)!r} is not a path")
    return Path(value)


def seed_input(value: Any) -> str:
    """``-i``'s file of seeds, a URL a line (``-``: standard input)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"{_text(value)!r} is not a file name")
    return os.fspath(value)


def directory(value: Any) -> str:
    """``--warc``'s directory, as given (:meth:`CrawlSpec.from_options` reads it)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"{_text(value)!r} is not a directory name")
    return os.fspath(value)


def items(value: Any) -> str:
    """``--items``' sink: a file (JSON lines; CSV for ``FILE.csv``) or a
    ``postgresql://`` URL (:mod:`crawler.items.sinks`)."""
    from crawler.items.addresses import checked_address

    try:
        return checked_address(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not an item sink: {e}") from e


def feed(value: Any) -> str:
    """``-o``'s feed: a file (``-``: standard output) or a ``postgresql://`` URL
    (:mod:`crawler.items.sinks`)."""
    from crawler.items.addresses import checked_address

    if isinstance(value, os.PathLike) and not isinstance(value, Path):
        value = os.fspath(value)
    try:
        return checked_address(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not a file nor a table: {e}") from e


def follow(value: Any) -> str:
    """``--follow all|handlers``."""
    return _checked(value, FOLLOW)


def near_duplicates(value: Any) -> str:
    """``--near-duplicates mark|skip``."""
    return _checked(value, NEAR_DUPLICATES)


def render(value: Any) -> bool | str:
    """``--render`` (every page: True), ``--render auto`` (the pages that need it)."""
    return _checked(value, RENDER)


def switch(value: Any) -> bool:
    """A switch's value: True or False."""
    return _checked(value, FLAG)


def warc_name(value: str) -> str:
    """``--warc``'s directory as a message may carry it (with workers, it lands under
    their ``CRAWLER_WARC_DIR``)."""
    return _checked(value, DIRECTORY)


def warc_directory(value: str) -> str:
    """``--local``'s ``--warc``: a directory of this machine, as an absolute path without
    ``..`` (:func:`crawler.embedded.entry.run` makes it)."""
    return os.path.abspath(Path(value).expanduser())
