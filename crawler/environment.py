"""Service addresses from the environment, so one code base runs anywhere.

Every name here is documented in the README's configuration table.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crawler.errors import InvalidMessage, shown

#: Where RabbitMQ listens unless ``RABBITMQ_URL`` says otherwise.
DEFAULT_RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672"
#: Where Redis listens unless ``REDIS_URL`` says otherwise.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: The Memcached servers unless ``MEMCACHED_SERVERS`` says otherwise.
DEFAULT_MEMCACHED_SERVERS = "localhost"

#: The connection settings Dramatiq's own default RabbitMQ broker uses; a URL
#: that sets one of them itself keeps its own value.
RABBITMQ_URL_DEFAULTS = {
    "heartbeat": "5",
    "connection_attempts": "5",
    "blocked_connection_timeout": "30",
}


def uses_redis() -> bool:
    """``REDIS=1`` selects the Redis broker, as in the upstream example."""
    return os.getenv("REDIS") == "1"


def rabbitmq_url() -> str:
    url = os.getenv("RABBITMQ_URL") or DEFAULT_RABBITMQ_URL
    checked_url("RABBITMQ_URL", url, split_at=";")  # Dramatiq: one URL per node
    parts = urlsplit(url)
    query = dict(RABBITMQ_URL_DEFAULTS)
    query.update(parse_qsl(parts.query))
    return urlunsplit(parts._replace(query=urlencode(query)))


def publish_confirms() -> bool:
    """``CRAWLER_PUBLISH_CONFIRMS=1``: RabbitMQ publishes wait for the broker's confirm."""
    return os.getenv("CRAWLER_PUBLISH_CONFIRMS") == "1"


def redis_url() -> str:
    return checked_url("REDIS_URL", os.getenv("REDIS_URL") or DEFAULT_REDIS_URL)


def dedup_url() -> str | None:
    """``DEDUP_URL``: a Redis URL to keep claims, the journal, counters and rate limits
    in, instead of Memcached (``redis+cluster://`` for a Redis Cluster); None (the
    default) keeps them in Memcached."""
    url = os.getenv("DEDUP_URL") or None
    if url is None:
        return None
    schemes = ("redis", "rediss", "redis+cluster", "rediss+cluster")
    scheme = urlsplit(url).scheme
    if scheme not in schemes:
        # Not the URL itself: read as it was not meant to be, it may show a password.
        raise ValueError(
            "DEDUP_URL must be a redis://, rediss:// or redis+cluster:// URL, not a"
            f" {scheme or 'scheme-less'} one"
        )
    return checked_url("DEDUP_URL", url)


def dedup_store_kind() -> str:
    """``"Redis"`` with ``DEDUP_URL``, else ``"Memcached"``."""
    return "Memcached" if dedup_url() is None else "Redis"


def dedup_store_name() -> str:
    """The dedup store the crawler uses and where, password hidden, for messages."""
    url = dedup_url()
    if url is None:
        return f"Memcached at {','.join(memcached_servers())}"
    return f"Redis at {without_credentials(url)}"


def memcached_servers() -> list[str]:
    """``MEMCACHED_SERVERS`` is a comma-separated list such as ``mc1:11211,mc2``."""
    value = os.getenv("MEMCACHED_SERVERS") or DEFAULT_MEMCACHED_SERVERS
    return [server.strip() for server in value.split(",") if server.strip()]


#: Seconds before a pool's dead Memcached server is tried again.
DEAD_SERVER_RETRY = 10


def memcached_timeout() -> float:
    """Seconds a Memcached connection or reply may take (``MEMCACHED_TIMEOUT_MS``, 1000):
    a Memcached that is down or hung fails a message fast, and the message is retried."""
    return number("MEMCACHED_TIMEOUT_MS", 1000) / 1000


@dataclass(frozen=True)
class Limits:
    """What bounds one crawl message; each field comes from a ``CRAWLER_*`` variable.

    Parameters:
      fetch_deadline(float): Seconds one fetch may take in all, below the actor's time limit.
      max_body_bytes(int): Largest body accepted, on the wire and once decompressed.
      max_links_per_page(int): Links taken from one page at most.
      max_deliveries(int): Deliveries of one attempt (say, after worker crashes) before giving up.
      min_backoff(int): Milliseconds before the first retry; doubles for each retry.
      max_backoff(int): Longest wait before a retry, in milliseconds.
      store_patience(float): Seconds a message's bookkeeping (its URL marked done, its
        ending counted) keeps trying a dedup store that fails, as during a restart.
      pause_max_delay(int): Longest wait, in milliseconds, of a paused crawl's message
        before it looks again whether the crawl was resumed; the wait doubles from a second.
      max_paced(int): Times a page waits for its server's pace (a 429, or a 503 with
        ``Retry-After``: :class:`crawler.errors.ServerBusy`) without spending a retry; past
        them such an answer is a failed attempt.
    """

    fetch_deadline: float = 8.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_links_per_page: int = 1000
    max_deliveries: int = 3
    min_backoff: int = 15_000
    max_backoff: int = 300_000
    store_patience: float = 15.0
    pause_max_delay: int = 30_000
    max_paced: int = 20

    def within(self, timeout: float | None) -> Limits:
        """These limits, a fetch's deadline cut to a crawl's ``--timeout`` when shorter."""
        if timeout is None or timeout >= self.fetch_deadline:
            return self
        return dataclasses.replace(self, fetch_deadline=timeout)


#: The actor's ``time_limit``, in seconds; a fetch's deadline must stay below it.
ACTOR_TIME_LIMIT = 10.0


def limits_from_environment() -> Limits:
    defaults = Limits()
    limits = Limits(
        fetch_deadline=number("CRAWLER_FETCH_DEADLINE", defaults.fetch_deadline),
        max_body_bytes=whole("CRAWLER_MAX_BODY_BYTES", defaults.max_body_bytes),
        max_links_per_page=whole("CRAWLER_MAX_LINKS_PER_PAGE", defaults.max_links_per_page),
        max_deliveries=whole("CRAWLER_MAX_DELIVERIES", defaults.max_deliveries),
        min_backoff=whole("CRAWLER_MIN_BACKOFF_MS", defaults.min_backoff),
        max_backoff=whole("CRAWLER_MAX_BACKOFF_MS", defaults.max_backoff),
        store_patience=number("CRAWLER_STORE_PATIENCE", defaults.store_patience),
        pause_max_delay=whole("CRAWLER_PAUSE_MAX_DELAY_MS", defaults.pause_max_delay),
        max_paced=whole("CRAWLER_MAX_PACED", defaults.max_paced),
    )
    if limits.fetch_deadline >= ACTOR_TIME_LIMIT:
        raise ValueError(
            f"CRAWLER_FETCH_DEADLINE must be below the actor's {ACTOR_TIME_LIMIT:g}s time limit"
        )
    return limits


def local_backoffs() -> tuple[int, int]:
    """``--local``'s retry backoff, the least and the most, in milliseconds
    (``CRAWLER_LOCAL_MIN_BACKOFF_MS``, 500; ``CRAWLER_LOCAL_MAX_BACKOFF_MS``, 4,000; never
    above the workers'): one process's small crawl does not wait minutes for a 503 page."""
    limits = limits_from_environment()
    low = whole("CRAWLER_LOCAL_MIN_BACKOFF_MS", min(500, limits.min_backoff))
    high = whole("CRAWLER_LOCAL_MAX_BACKOFF_MS", min(4_000, limits.max_backoff))
    return low, max(low, high)


def local_busy() -> float:
    """``CRAWLER_LOCAL_BUSY``: the share of one core (0.75) above which ``--local``'s
    process is CPU-bound and lets fewer of its threads hold a page at once
    (:class:`crawler.embedded.worker.Concurrency`); ``inf`` keeps every thread
    at work whatever the CPU."""
    return number("CRAWLER_LOCAL_BUSY", 0.75, infinite=True)


@dataclass(frozen=True)
class Lifetimes:
    """How long a crawl's entries live in the dedup store, in seconds.

    Parameters:
      claim(int): A URL's claim, its delivery count and its message's ``ended`` mark
        (``CRAWLER_CLAIM_TTL``); after it the crawl's journal answers for the URL.
      grace(int): A crawl's journal and counters after the last time a worker or a
        waiting seeder touched them (``CRAWLER_CRAWL_GRACE``): they are refreshed while
        the crawl goes on, and a finished or cancelled crawl's expire this long after.
      resend(float): How long a link a message claimed on an interrupted try waits
        before the message's next try sends it again (``CRAWLER_RESEND_DELAY``): the
        longest a copy sent before can be in hand (the actor's time limit) and 2 s, so
        that the copy finds that one done rather than fetch the page beside it; 0 sends
        it at once.
    """

    claim: int = 3600
    grace: int = 7 * 24 * 3600
    resend: float = ACTOR_TIME_LIMIT + 2


#: The longest lifetime Memcached takes as a number of seconds: it reads more as a date.
LONGEST_LIFETIME = 30 * 24 * 3600


def lifetimes_from_environment() -> Lifetimes:
    defaults = Lifetimes()
    lifetimes = Lifetimes(
        claim=math.ceil(number("CRAWLER_CLAIM_TTL", defaults.claim)),
        grace=math.ceil(number("CRAWLER_CRAWL_GRACE", defaults.grace)),
        resend=number("CRAWLER_RESEND_DELAY", defaults.resend, zero=True),
    )
    for name, seconds in (
        ("CRAWLER_CLAIM_TTL", lifetimes.claim),
        ("CRAWLER_CRAWL_GRACE", lifetimes.grace),
    ):
        if seconds > LONGEST_LIFETIME:
            raise ValueError(f"{name} must be at most {LONGEST_LIFETIME} seconds (30 days)")
    return lifetimes


def _given(name: str) -> tuple[str, float]:
    """The variable ``name`` as given (empty when unset) and as a number (nan if none)."""
    value = os.getenv(name, "")
    try:
        return value, float(value)
    except ValueError:
        return value, math.nan


def number(name: str, default: float, *, infinite: bool = False, zero: bool = False) -> float:
    """A positive number from the environment (``inf`` too when ``infinite``, 0 too
    when ``zero``), or a clear error naming the variable: not a number, ``nan`` or
    ``inf`` would fail, or loop, far from where the variable was read."""
    value, parsed = _given(name)
    if not value:
        return default
    if zero and parsed == 0:
        return 0.0
    if not (parsed > 0 and (infinite or math.isfinite(parsed))):  # nan is not above 0
        wanted = "a positive number or 0" if zero else "a positive number"
        raise ValueError(f"{name} must be {wanted}, not {value!r}")
    return parsed


def whole(name: str, default: int) -> int:
    """A whole number above zero from the environment (``1e6`` is one), or a clear
    error naming the variable: ``0.5`` cut to 0 would be a cap of nothing."""
    value, parsed = _given(name)
    if not value:
        return default
    if not (parsed >= 1 and math.isfinite(parsed) and parsed.is_integer()):
        raise ValueError(f"{name} must be a whole number above zero, not {value!r}")
    return int(parsed)


def handler_names() -> list[str]:
    """``CRAWLER_HANDLERS``: the page handlers this worker loads, comma-separated
    ``package.module:function`` names (``crawler worker --handler`` sets it)."""
    return [name.strip() for name in os.getenv("CRAWLER_HANDLERS", "").split(",") if name.strip()]


def handler_timeout() -> float:
    """``CRAWLER_HANDLER_TIMEOUT``: seconds a page handler may take on one page (1.5);
    with the fetch's deadline, it must stay below the actor's time limit."""
    seconds = number("CRAWLER_HANDLER_TIMEOUT", 1.5)
    deadline = limits_from_environment().fetch_deadline
    if seconds + deadline >= ACTOR_TIME_LIMIT:
        raise ValueError(
            f"CRAWLER_HANDLER_TIMEOUT plus CRAWLER_FETCH_DEADLINE ({deadline:g}) must stay"
            f" below the actor's {ACTOR_TIME_LIMIT:g}s time limit"
        )
    return seconds


def render_settings() -> tuple[int, int]:
    """``--render``: how many pages a process's browser has open at once at most
    (``CRAWLER_RENDER_PAGES``, 4), and how many it renders before it is replaced by a
    new one (``CRAWLER_RENDER_RESTART``, 500: a browser's memory grows with its age)."""
    return whole("CRAWLER_RENDER_PAGES", 4), whole("CRAWLER_RENDER_RESTART", 500)


def redis_broker_settings() -> dict[str, int]:
    """The Redis broker's (``REDIS=1``) keyword arguments of its pace: the longest pause,
    in milliseconds, between two looks at an empty queue (``CRAWLER_REDIS_POLL_MS``,
    100), the silence after which a worker counts as dead
    (``CRAWLER_REDIS_HEARTBEAT_TIMEOUT_MS``, 30,000) and the commands, out of a million,
    that also requeue dead workers' messages (``CRAWLER_REDIS_MAINTENANCE_CHANCE``, 20,000)."""
    return {
        "poll_ms": max(1, round(number("CRAWLER_REDIS_POLL_MS", 100))),  # 0 would spin
        "heartbeat_timeout": whole("CRAWLER_REDIS_HEARTBEAT_TIMEOUT_MS", 30_000),
        "maintenance_chance": whole("CRAWLER_REDIS_MAINTENANCE_CHANCE", 20_000),
    }


def check_variables() -> None:
    """Read every variable of this module once: a ValueError, one line naming the
    first bad one, before a process acts on any (a worker would else stop in the
    middle of its start-up with a traceback, or fail its first pages)."""
    limits_from_environment()
    lifetimes_from_environment()
    local_backoffs()
    local_busy()
    handler_timeout()
    render_settings()
    warc_max_bytes()
    redis_broker_settings()
    memcached_timeout()
    dedup_url()
    redis_url()
    rabbitmq_url()


def warc_directory() -> Path | None:
    """``CRAWLER_WARC_DIR``: the directory under which this worker writes the WARC files
    of ``--warc`` crawls, each in the directory the crawl names (relative to it, or an
    absolute path inside it); unset, it writes none."""
    value = os.getenv("CRAWLER_WARC_DIR")
    return Path(value) if value else None


#: The options whose directory a crawl's messages name on a worker's disk, and the
#: worker's variable that says under which directory it may write them: the responses
#: of ``--cache``, the files of ``--files``, the pages' Markdown of ``--markdown``.  Unset,
#: a crawl naming one is refused.
DIRECTORY_ROOTS = {
    "cache": "CRAWLER_CACHE_DIR",
    "files": "CRAWLER_FILES_DIR",
    "markdown": "CRAWLER_MARKDOWN_DIR",
}


def directory_roots() -> dict[str, Path | None]:
    """This worker's root of each option of :data:`DIRECTORY_ROOTS` (None: unset)."""
    return {
        option: Path(value) if (value := os.getenv(variable)) else None
        for option, variable in DIRECTORY_ROOTS.items()
    }


#: The variable of each option's root, ``--warc``'s among them (its root is its WARC
#: files', :class:`~crawler.archiving.warc.WarcFiles`).
ROOT_VARIABLES = {**DIRECTORY_ROOTS, "warc": "CRAWLER_WARC_DIR"}


@functools.lru_cache(maxsize=256)
def directory_under(option: str, root: Path | None, name: str) -> Path:
    """Where the directory ``name`` a crawl's ``option`` (``cache``, ``files``) names is
    on this machine: ``name`` under ``root`` (the worker's variable of
    :data:`DIRECTORY_ROOTS`; a ``--local`` crawl's own directory), symlinks followed,
    which must still be under it.  Raises :class:`~crawler.errors.InvalidMessage` for
    one outside it, or for any when there is no root.  Kept for each (option, root,
    name): every page of a crawl names the same directory, whose symlinks are followed
    once a process."""
    variable = ROOT_VARIABLES[option]
    if root is None:
        raise InvalidMessage(
            f"message options: {option} names a directory on this worker's disk, where it"
            f" writes only under its {variable}, which is not set"
        )
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / name))
    if ".." in Path(name).parts or not target.is_relative_to(real_root):
        raise InvalidMessage(
            f"message options: {option} {shown(repr(name))} is outside this worker's"
            f" {variable} {str(root)!r}"
        )
    return target


def warc_max_bytes() -> int:
    """``CRAWLER_WARC_MAX_BYTES``: the size past which a WARC file is closed and the next
    one begun (1 GB, as Heritrix and wget's ``--warc-max-size`` often use)."""
    return whole("CRAWLER_WARC_MAX_BYTES", 1_000_000_000)


def broker_address() -> str:
    """The broker the seeder talks to, password hidden, for error messages."""
    url = redis_url() if uses_redis() else rabbitmq_url()
    name = "Redis" if uses_redis() else "RabbitMQ"
    return f"{name} at {without_credentials(url)}"


def without_credentials(url: str) -> str:
    """``url`` to show in a message: no user name or password, no query (redis-py
    takes a ``?password=``) and no fragment.

    The user information is taken to end at the URL's *last* ``@``, as no host name
    holds one: a password with an unescaped ``/``, ``?`` or ``#``, which urllib would
    read as the start of the path, is dropped whole (with, in the rare URL whose path
    holds an ``@`` too, the host).
    """
    scheme, separator, rest = url.partition("://")
    rest = (rest if separator else url).rpartition("@")[2]
    for end in "?#":
        rest = rest.partition(end)[0]
    return f"{scheme}://{rest}" if separator else rest


def checked_url(name: str, url: str, *, split_at: str | None = None) -> str:
    """``url``, the value of the variable ``name``, if libraries read it as it reads; a
    ``ValueError`` naming ``name`` otherwise, with no piece of the URL in it.

    urllib (and so pika and redis-py) ends a URL's user information at the first
    ``/``, ``?`` or ``#``: a password holding one unescaped would be read in part as
    a host name, a port or a path, and quoted in the errors that follow.  With
    ``split_at``, each of the URLs it separates is checked.
    """
    for part in url.split(split_at) if split_at else [url]:
        parts = urlsplit(part)
        try:
            parts.port  # noqa: B018 -- urllib checks the port only when asked for it
        except ValueError:
            well_formed = False
        else:  # an @ past the host: the end of a password read as a path, query or fragment
            well_formed = "@" not in parts.path + parts.query + parts.fragment
        if not well_formed:
            raise ValueError(  # from None: urllib's own error quotes what it took for a port
                f"{name} cannot be read as a URL: a port is a number, and an @ : / ? # or ;"
                " in a user name or password must be percent-encoded (%40 %3A %2F %3F %23 %3B)"
            ) from None
    return url
