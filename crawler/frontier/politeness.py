"""What a crawl with options checks before it fetches: budget, robots.txt and rate.

All state is shared by every worker through the dedup store (Memcached, or the
in-memory store in ``--local``): robots.txt rules, the hosts' turns and delays, their
places in flight.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import random
import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import requests
from protego import Protego

from crawler import metrics, outcomes
from crawler.environment import ACTOR_TIME_LIMIT, Limits
from crawler.errors import PermanentError, ServerBusy, TransientError
from crawler.fetching.bounded_fetch import PACE_MS, fetch, read_body
from crawler.frontier import counters, robots_rules
from crawler.options import CrawlOptions
from crawler.stores import StorePool, Stores
from crawler.stores.client import StoreClient

logger = logging.getLogger(__name__)

#: How long a host's robots.txt is trusted, in seconds (RFC 9309: at most 24 hours).
ROBOTS_TTL = 3600
#: How long a robots.txt that could not be reached (a 5xx, 429, a timeout, a refused
#: connection) is remembered so, in seconds, before the next page of the host asks again.
ROBOTS_UNREACHABLE_TTL = 1
#: Redirects followed to a robots.txt (RFC 9309 §2.3.1.2: at least five; past them it
#: counts as unavailable, so every page is allowed).
ROBOTS_MAX_REDIRECTS = 5
#: How much of a robots.txt is read at most (RFC 9309: at least 500 KiB).
ROBOTS_MAX_BYTES = 500 * 1024
#: What the store holds for an unreachable robots.txt: this, then why.
_UNREACHABLE = b"\x00unreachable:"
#: How much longer than a fetch's deadline a worker waits for another one fetching
#: the same robots.txt: time for that one to store what it read.
ROBOTS_WAIT_MARGIN = 0.5


#: What :func:`check` says of a URL.
ALLOWED, DISALLOWED, RATE_LIMITED, PACED = "allowed", "disallowed", "rate-limited", "paced"
#: Seconds a worker thread waits for a place of its host (``--max-per-host``) before
#: deferring the message.
RATE_WAIT = 1.0
#: A host's turn (``--max-rate``, ``Crawl-delay``) that comes within this many seconds
#: is waited for in the worker thread; a later one defers the message to it.
TURN_WAIT = 0.25
#: How early, in seconds, a message delayed to its turn (booked when it was sent, or
#: deferred to it) comes back, to wait for it in the thread: the broker hands delayed
#: messages back within 50 ms of their time (:class:`~crawler.middleware.PromptDelays`),
#: so the request goes at its turn rather than with those of the turns around it, and
#: a thread waits 35 ms on average (at 0.15 s, the threads of 2 x 8 workers held
#: waiting could not keep 100 hosts at 2 requests a second: 1.58x the ideal time).
TURN_EARLY = 0.06
#: How late, in seconds, a message deferred to its turn may come back and still take
#: it, at most (and never later than half the interval between two turns, or a turn
#: served late would go out with the next ones, over the host's rate in that second):
#: later (a worker that was busy, or stopped), it asks for a turn anew.
TURN_LATE = 2.0
#: Tries at taking a host's next turn while other workers take turns of the same host.
TURN_TRIES = 100
#: ``--auto-throttle``: a host's delay (seconds between two of its requests) before its
#: server answered once; the requests in flight a host is paced for on average (as
#: Scrapy's ``AUTOTHROTTLE_TARGET_CONCURRENCY``); the longest delay; how much faster a
#: host gets after each answer once its server asked the crawl to slow down (1%: from
#: half its rate back to the rate that made it slow down in about 70 answers, so that
#: a server that refuses above a rate is asked over it about once in 70); and how much
#: a delay must change to be written again (less than that step).
AUTO_START = 0.1
AUTO_CONCURRENCY = 1.0
AUTO_MAX = 60.0
AUTO_FASTER = 0.01
AUTO_CHANGE = 0.005
#: Seconds a host's pace is kept after it last changed.
PACE_TTL = 3600


class Pace(NamedTuple):
    """A host's ``--auto-throttle`` pace: its ``delay`` (seconds between two of its
    requests), and whether its server ever asked the crawl to slow down (``careful``:
    it then gets faster again by :data:`AUTO_FASTER` an answer; before, halfway to its
    latency an answer, as Scrapy's AutoThrottle does)."""

    delay: float = AUTO_START
    careful: bool = False

    @classmethod
    def read(cls, stored: bytes | None) -> Pace:
        """The pace the store holds (:meth:`written`), or a host's first."""
        if not stored:
            return cls()
        text = stored.decode()
        return cls(float(text.rstrip("!")), text.endswith("!"))

    def written(self) -> bytes:
        return f"{self.delay:.6g}{'!' if self.careful else ''}".encode()


#: How far ahead, in seconds, a host's turns are taken: a page whose host has none free
#: sooner waits in the broker half as long and asks again (a crawl of a host with many
#: pages at a slow rate keeps no message deferred for hours).
TURN_AHEAD = 300.0
#: How long a deferred message waits before it tries again, in milliseconds: a
#: spread, so that deferred messages do not all come back at the same instant.
DEFER_MS = (200, 1000)


class TurnAnswer(NamedTuple):
    """What :func:`take_turn` says of a URL: the host's turn to hold while it is fetched,
    or None and why not (``skipped``), and then in how many milliseconds the message is
    to come back (``delay``), for the host's turn it ``reserved`` (epoch seconds), if
    the host's rate deferred it."""

    turn: HostTurn | None
    skipped: str | None
    delay: int = 0
    reserved: float | None = None


def take_turn(
    stores: Stores,
    session: requests.Session,
    url: str,
    options: CrawlOptions,
    *,
    limits: Limits,
    via_public: bool,
    reserved: float | None = None,
) -> TurnAnswer:
    """The host's pace, robots.txt, its rate and its places (the wait
    :func:`pause_host` keeps, :func:`check`, :func:`host_slot`): the host's turn to hold
    while ``url`` is fetched, or None and why not: ``disallowed`` (by robots.txt, for
    good) or ``deferred`` (its server asked the crawl to wait, its rate's next turn is
    later, or every place taken: the message is to come back later).  ``reserved``: the
    turn the message took when it was deferred to it."""
    with stores.memcache_pool.reserve() as client:
        # The host's pace and its robots.txt rules in one round trip.
        paced_as = pace_of(url, options)  # once a page: its turns, delay, places, waits
        pace = pace_key(options.crawl_id, paced_as)
        robots = [robots_key(url, robots_owner(options))] if options.obey_robots else []
        paced_by = [delay_key(options.crawl_id, paced_as)] if options.auto_throttle else []
        stored = client.get_multi([pace, *robots, *paced_by])
        adaptive = Pace.read(stored.get(paced_by[0])) if paced_by else None
        left = _left(stored.get(pace))
        if left:
            metrics.rate_limited("paced")
            return TurnAnswer(None, outcomes.DEFERRED, left + defer_delay())
        try:
            verdict, due = check(
                client, session, url, options, limits=limits, via_public=via_public,
                stored=stored, paced_as=paced_as, reserved=reserved, adaptive=adaptive,
            )  # fmt: skip
        except ServerBusy as e:  # robots.txt's answer: the host's pace holds for its pages
            pause_host(client, options, url, e.delay)
            return TurnAnswer(None, outcomes.DEFERRED, e.delay + defer_delay())
    if verdict == PACED:  # its server asked the crawl to wait while it awaited its turn
        left = math.ceil(max(0.0, (due or 0) - time.time()) * 1000)
        return TurnAnswer(None, outcomes.DEFERRED, left + defer_delay())
    if verdict == DISALLOWED:
        logger.warning("Skipping URL %r since robots.txt disallows it.", url)
        return TurnAnswer(None, outcomes.DISALLOWED)
    if verdict == RATE_LIMITED:  # to its turn, or to ask again when one is within reach
        delay = (due - time.time() - TURN_EARLY) if due is not None else TURN_AHEAD / 2
        return TurnAnswer(None, outcomes.DEFERRED, math.ceil(delay * 1000), due)
    slot = host_slot(stores.memcache_pool, url, options, paced_as, adaptive)
    return TurnAnswer(slot, None if slot is not None else outcomes.DEFERRED, defer_delay())


class BrowserPace:
    """The host's turns for the requests a browser makes for a page (``--render``), as
    the crawl's own requests take theirs, in steps that never wait in a thread (the
    browser's event loop awaits between them):

    * :meth:`turn`: the host's wait (:func:`pause_host`) and its next turn of
      ``--max-rate``, ``--auto-throttle`` and its robots.txt's ``Crawl-delay`` (when
      the crawl has read it) from the schedule every worker takes turns from
      (:func:`next_turn`), not taken when it would come after the render's end;
    * :meth:`place`: a ``--max-per-host`` place of the host (:func:`host_slot`, tried
      once; the page's own place was given back once its body was read);
    * :meth:`answered`: the place given back, and the answer told to the host's pace
      as a page's is (a 429, a 503 with ``Retry-After``: the host waits for the whole
      crawl, at most ``max_backoff``; a failure slows it; its latency adapts it), or
      nothing told of a request never sent.

    Parameters:
      pool(StorePool): The crawl's store.
      options(CrawlOptions): The crawl's options.
      max_backoff(int): The longest wait a ``Retry-After`` makes, in milliseconds.
    """

    def __init__(self, pool: StorePool, options: CrawlOptions, max_backoff: int) -> None:
        self.pool, self.options, self.max_backoff = pool, options, max_backoff

    def turn(self, url: str, seconds_left: float) -> float:
        """The epoch time of the host's turn for ``url``, taken; a
        :class:`TransientError`, none taken, when it would come after ``seconds_left``."""
        options, paced_as = self.options, pace_of(url, self.options)
        pause = pace_key(options.crawl_id, paced_as)
        paced_by = [delay_key(options.crawl_id, paced_as)] if options.auto_throttle else []
        robots = [robots_key(url, robots_owner(options))] if options.obey_robots else []
        with self.pool.reserve() as client:
            stored = client.get_multi([pause, *paced_by, *robots])
            adaptive = Pace.read(stored.get(paced_by[0])).delay if paced_by else None
            crawl_delay = read_crawl_delay(stored.get(robots[0]) if robots else None, options)
            now = time.time()
            due = now + _left(stored.get(pause)) / 1000
            interval = turn_interval(options, crawl_delay, adaptive)
            if interval is not None and due - now <= seconds_left:
                key = turn_key(options.crawl_id, paced_as)
                turn = next_turn(client, key, interval, due, ahead=now + seconds_left - due)
                due = math.inf if turn is None else turn
        if due - now > seconds_left:
            raise TransientError("the host's turn comes after the render's end")
        return due

    def place(self, url: str) -> HostTurn | None:
        """A place of the host for ``url``'s request, or None when all are taken now."""
        options, paced_as = self.options, pace_of(url, self.options)
        adaptive = None
        if options.auto_throttle:
            with self.pool.reserve() as client:
                adaptive = Pace.read(client.get(delay_key(options.crawl_id, paced_as)))
        return host_slot(self.pool, url, options, paced_as, adaptive, patience=0.0)

    def answered(
        self, place: HostTurn, status: int | None, retry_after: int | None, latency: float
    ) -> None:
        """``place``'s request answered with ``status`` (None: it failed), its
        ``Retry-After`` in ms and its ``latency``; or, with ``latency`` below 0, never
        sent: its place given back, nothing told."""
        error: TransientError | None = None
        if latency < 0:
            place.adaptive = None  # nothing to learn from it
        elif status is None:
            error = TransientError("the browser's request failed")
        elif status == 429 or (status == 503 and retry_after is not None):
            delay = PACE_MS if retry_after is None else min(retry_after, self.max_backoff)
            error = ServerBusy(f"HTTP {status}", delay=delay, status=status)
        else:
            place.answered(latency)
        place.__exit__(None if error is None else type(error), error, None)


def read_crawl_delay(body: bytes | None, options: CrawlOptions) -> float | None:
    """The ``Crawl-delay`` of a host's robots.txt the crawl has read (``body``, as the
    store keeps it), for the crawl's User-Agent; None without one, or when the crawl
    has not read it (a browser's request to a host none of the crawl's pages is on
    fetches no robots.txt)."""
    if body is None or body.startswith(_UNREACHABLE):
        return None
    return robots_rules.parsed(body, options.user_agent).crawl_delay(options.user_agent)


def pace_of(url: str, options: CrawlOptions) -> str:
    """What ``url``'s pace is kept under (its turns, delay, places and its server's
    waits): its ``host:port``; with ``--per-ip``, the IP address its host resolves to
    (the first one), so that hosts on one server share one pace (BUbiNG's per-IP
    politeness, Scrapy's ``CONCURRENT_REQUESTS_PER_IP``); a host that does not resolve
    keeps its own (its fetch says why)."""
    parts = urlsplit(url)
    if not options.per_ip:
        return parts.netloc
    return address_of(parts.hostname or "")


@functools.lru_cache(maxsize=4096)
def address_of(host: str) -> str:
    """``host``'s first IP address (looked up once a process), or ``host``."""
    try:
        return str(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
    except (OSError, UnicodeError, IndexError):
        return host


def pace_key(crawl_id: str | None, name: str) -> str:
    """Where a crawl keeps until when the host(s) of pace ``name`` asked it to wait."""
    return counters.crawl_key(crawl_id or "-", f"paced:{_digest(name)}")


def _left(until: bytes | None) -> int:
    """Milliseconds left until ``until`` (a :func:`pace_key`'s value), or 0."""
    if until is None:
        return 0
    return max(0, math.ceil((float(until) - time.time()) * 1000))


def pause_host(client: StoreClient, options: CrawlOptions, url: str, delay: int) -> None:
    """``url``'s server answered :class:`ServerBusy`: its host waits ``delay`` ms for the
    whole crawl (every worker's messages for it are deferred until then)."""
    until = time.time() + delay / 1000
    key = pace_key(options.crawl_id, pace_of(url, options))
    if until > time.time() + _left(client.get(key)) / 1000:  # the longer wait holds
        client.set(key, f"{until:.3f}".encode(), time=math.ceil(delay / 1000) + 1)
        logger.warning("Host of %r asked the crawl to wait; waiting %.1fs.", url, delay / 1000)


def check(
    client: StoreClient,
    session: requests.Session,
    url: str,
    options: CrawlOptions,
    *,
    limits: Limits,
    via_public: bool,
    stored: Mapping[str, bytes] | None = None,
    paced_as: str,
    reserved: float | None = None,
    adaptive: Pace | None = None,
) -> tuple[str, float | None]:
    """Whether ``url`` may be fetched now: robots.txt first, then the host's turn
    (:func:`next_turn`); and when the turn is later, the turn (epoch seconds), or when
    the server asked the crawl to wait while the turn was awaited (``PACED``), the end
    of that wait.

    Parameters:
      client(MemcachedClient): The dedup store, where robots.txt rules and the hosts'
        turns are shared.
      session(requests.Session): The worker thread's session, to fetch robots.txt with.
      url(str): The URL about to be fetched.
      options(CrawlOptions): The crawl's options: robots.txt, rate, User-Agent.
      limits(Limits): The deadline and caps of every fetch, robots.txt's included.
      via_public(bool): The page that linked to ``url`` was public (for the network guard).
      stored(Mapping): What the store held of the host's robots.txt, read already.
      paced_as(str): What the host's turns are kept under (:func:`pace_of`).
      reserved(float): The turn the message took when it was deferred to it, if any.
      adaptive(Pace): The host's ``--auto-throttle`` pace (None: off).
    """
    crawl_delay = None
    if options.obey_robots:
        robots = robots_for(
            client, session, url, options.user_agent, limits=limits, via_public=via_public,
            owner=robots_owner(options), stored=stored,
        )  # fmt: skip
        if not robots.can_fetch(url, options.user_agent):
            return DISALLOWED, None
        crawl_delay = robots.crawl_delay(options.user_agent)
    interval = turn_interval(options, crawl_delay, None if adaptive is None else adaptive.delay)
    if interval is None:
        return ALLOWED, None
    now = time.time()
    if reserved is None or not now - min(TURN_LATE, interval / 2) <= reserved <= now + TURN_AHEAD:
        reserved = next_turn(client, turn_key(options.crawl_id, paced_as), interval, now)
        if reserved is None:  # none free within TURN_AHEAD
            metrics.rate_limited("deferred")
            return RATE_LIMITED, None
    wait = reserved - now
    if wait > TURN_WAIT:
        metrics.rate_limited("deferred")
        return RATE_LIMITED, reserved
    if wait > 0:
        metrics.rate_limited("waited")
        time.sleep(wait)
        until = _paused_meanwhile(client, pace_key(options.crawl_id, paced_as))
        if until is not None:
            return PACED, until
    return ALLOWED, None


def _paused_meanwhile(client: StoreClient, key: str) -> float | None:
    """When the host's wait ends, if its server asked the crawl to wait while a turn
    was awaited in the thread (another request's 429): the turn, taken at the pace
    before, is not taken, or every turn taken within TURN_WAIT would reach the server
    refusing them."""
    until = client.get(key)
    if not _left(until):
        return None
    metrics.rate_limited("paced")
    return float(until)


def turn_interval(
    options: CrawlOptions, crawl_delay: float | None, adaptive: float | None = None
) -> float | None:
    """Seconds between two requests to a host: of ``--max-rate``, of its robots.txt's
    ``Crawl-delay`` or of ``--auto-throttle`` (``adaptive``), whichever is slowest (the
    first two are the third's floor); None for none."""
    rates = [rate for rate in (options.max_rate, 1 / crawl_delay if crawl_delay else None) if rate]
    intervals = [1 / min(rates)] if rates else []
    if adaptive is not None:
        intervals.append(adaptive)
    return max(intervals) if intervals else None


def delay_key(crawl_id: str | None, name: str) -> str:
    """Where a crawl keeps the ``--auto-throttle`` delay of pace ``name`` (:func:`pace_of`)."""
    return counters.crawl_key(crawl_id or "-", f"delay:{_digest(name)}")


def adapted(pace: Pace, latency: float | None, slower: bool = False) -> Pace:
    """A host's ``--auto-throttle`` pace after one answer.  Slower at once: its delay
    doubled when the server asked the crawl to slow down (a 429, a 503 with
    ``Retry-After``, whose wait :func:`pause_host` keeps) or the fetch failed
    (``slower``: a refused or reset connection, a timeout), and the answer's
    ``latency`` over :data:`AUTO_CONCURRENCY` at once when that is longer (one request
    in flight a host on average, as Scrapy's AutoThrottle); faster again never below
    that latency: halfway to it an answer until the server first asked the crawl to
    slow down, then by :data:`AUTO_FASTER` an answer."""
    if slower:
        return Pace(min(AUTO_MAX, pace.delay * 2), careful=True)
    if latency is None:
        return pace
    target = latency / AUTO_CONCURRENCY
    if target >= pace.delay:
        return Pace(min(AUTO_MAX, target), pace.careful)
    faster = pace.delay * (1 - AUTO_FASTER) if pace.careful else (pace.delay + target) / 2
    return Pace(max(target, faster), pace.careful)


def turn_key(crawl_id: str | None, name: str) -> str:
    """Where a crawl keeps the next free turn of pace ``name`` (:func:`pace_of`)."""
    return counters.crawl_key(crawl_id or "-", f"turn:{_digest(name)}")


def next_turn(
    client: StoreClient, key: str, interval: float, now: float, ahead: float = TURN_AHEAD
) -> float | None:
    """Take the host's next free turn (epoch seconds): now, or ``interval`` after the
    last one taken, whichever is later; the one after it is kept at ``key`` for every
    worker and thread of the crawl (compare-and-set: two never take the same turn).
    None, and none taken, when it is over ``ahead`` (:data:`TURN_AHEAD`) seconds away.

    Each request of a host thus has a turn of its own, taken once: a message whose turn
    is later waits for it in the broker (deferred to it), not in a worker thread, and
    comes back once (Heritrix's and BUbiNG's per-host queues, Scrapy's download slots,
    kept in the crawl's store so that they hold across the fleet)."""
    turns = next_turns(client, key, [("", interval)], now, ahead)
    if turns is None:
        raise TransientError(f"{TURN_TRIES} workers took the host's turn first: tried again later")
    return turns.get("")


def next_turns(
    client: StoreClient,
    key: str,
    wanted: list[tuple[str, float]],
    now: float,
    ahead: float = TURN_AHEAD,
    *,
    beyond: float | None = None,
) -> dict[str, float] | None:
    """Take the host's next free turns at once (:func:`next_turn`), one for each of
    ``wanted`` in order (a request, and the interval after its turn): each turn that
    comes within ``ahead`` seconds, by request; none when the last of them comes within
    ``beyond`` seconds; None when other workers took the host's turns first
    :data:`TURN_TRIES` times."""
    for _ in range(TURN_TRIES):
        value, token = client.gets(key)
        due = now if value is None else max(now, float(value))
        turns: dict[str, float] = {}
        for name, interval in wanted:
            if due - now > ahead:
                break
            turns[name] = due
            due += interval
        if not turns or (beyond is not None and max(turns.values()) - now <= beyond):
            return {}
        after = f"{due:.4f}".encode()
        lives = math.ceil(due - now) + 60  # past the last turn taken
        if value is None:
            if client.add(key, after, time=lives):
                return turns
        elif client.cas(key, after, token, time=lives):
            return turns
    return None


#: Whether each host's robots.txt, as this process last read it to book turns, asks a
#: User-Agent for a ``Crawl-delay`` (by :func:`robots_key` and the crawl's User-Agent,
#: whose group of the rules says): a crawl without ``--max-rate`` reads the
#: hosts' robots.txt again to book turns only where it did, or where it was not read
#: yet (``--local --processes`` read them through the parent's store: a round trip a
#: page, 6% of an unthrottled crawl's CPU).  At most :data:`ASKED_KEPT` hosts.
_DELAY_ASKED: dict[tuple[str, str], bool] = {}
ASKED_KEPT = 4096


def booking_keys(urls: Iterable[str], options: CrawlOptions) -> list[str]:
    """What :func:`book_turns` reads of the hosts of ``urls`` (the waits their servers
    asked for, their robots.txt, their ``--auto-throttle`` delays): read with a page's
    links' claims, in the same round trip; none for a crawl that books no turn (no
    ``--max-rate``, robots.txt not obeyed) nor for the hosts whose robots.txt asks for
    no ``Crawl-delay`` when that is its only pace."""
    if not (options.max_rate or options.obey_robots):
        return []
    owner = robots_owner(options)
    sites = {origin(url): url for url in urls}  # a page's links: most on a host or two
    if options.obey_robots and not options.max_rate:
        sites = {
            site: url for site, url in sites.items()
            if _DELAY_ASKED.get((robots_key(url, owner), options.user_agent), True)
        }  # fmt: skip
    paces = {pace_of(url, options) for url in sites.values()}
    keys = [pace_key(options.crawl_id, pace) for pace in paces]
    if options.auto_throttle:
        keys += [delay_key(options.crawl_id, pace) for pace in paces]
    if options.obey_robots:
        keys += [robots_key(url, owner) for url in sites.values()]
    return keys


def _asked(key: tuple[str, str], delay: bool) -> None:
    if len(_DELAY_ASKED) >= ASKED_KEPT:
        _DELAY_ASKED.clear()
    _DELAY_ASKED[key] = delay


def book_turns(
    client: StoreClient,
    pages: Mapping[str, str],
    options: CrawlOptions,
    stored: Mapping[str, bytes] | None = None,
) -> dict[str, float]:
    """The hosts' turns of pages about to be sent (``pages``: each message's URL, by its
    id), taken now (:func:`next_turns`, one compare-and-set a host): epoch seconds, by
    message id.  Each message is then delayed to its turn in the broker, and its one
    delivery takes that turn (:func:`check`), where a message sent at once would come,
    find its host's turn later and be deferred to it.  ``stored``: what the store held
    of :func:`booking_keys`, read already.

    Only for a host with a pace the crawl keeps whatever the server answers:
    ``--max-rate``, or its robots.txt's ``Crawl-delay``; ``--auto-throttle``'s delay,
    when slower, sets the interval then, and alone it books nothing (a crawl paced only
    by its server's few milliseconds, busy on every core, had its booked turns come
    late, be taken anew at the end of their host's schedule and deferred to it, most
    pages once).  And only for the pages whose interval is known: a host whose
    robots.txt the crawl has not read yet (or could not), or whose server asked the
    crawl to wait, books none; nor does a page robots.txt disallows, skipped on
    delivery.  Nor do pages whose turns all come within :data:`TURN_WAIT`, which their
    deliveries take as they come."""
    if not pages or not (options.max_rate or options.obey_robots):
        return {}
    if stored is None:
        stored = client.get_multi(booking_keys(pages.values(), options))
    owner = robots_owner(options)
    wanted: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for name, url in pages.items():
        pace = pace_of(url, options)
        if _left(stored.get(pace_key(options.crawl_id, pace))):
            continue
        rules = None
        if options.obey_robots:
            key = robots_key(url, owner)
            body = stored.get(key)
            if body is None or body.startswith(_UNREACHABLE):
                continue
            rules = robots_rules.parsed(body, options.user_agent)
        crawl_delay = rules.crawl_delay(options.user_agent) if rules is not None else None
        if rules is not None:
            _asked((key, options.user_agent), crawl_delay is not None)
        if turn_interval(options, crawl_delay) is None:  # no pace of the crawl's own
            continue
        if rules is not None and not rules.can_fetch(url, options.user_agent):
            continue
        adaptive = None
        if options.auto_throttle:  # the server's pace, when slower than the crawl's
            adaptive = Pace.read(stored.get(delay_key(options.crawl_id, pace))).delay
        interval = turn_interval(options, crawl_delay, adaptive)
        assert interval is not None  # the crawl's own pace is its floor
        wanted[pace].append((name, interval))
    now, booked = time.time(), {}
    for pace, turns in wanted.items():
        key = turn_key(options.crawl_id, pace)
        booked.update(next_turns(client, key, turns, now, beyond=TURN_WAIT) or {})
    return booked


def defer_delay() -> int:
    return random.randint(*DEFER_MS)


def budget_key(crawl_id: str) -> str:
    return counters.crawl_key(crawl_id, "page-budget")


def host_budget_key(crawl_id: str, url: str) -> str:
    return counters.crawl_key(crawl_id, f"host-budget:{_host_digest(url)}")


def _host_digest(url: str) -> str:
    """``url``'s ``host:port``, as 16 hex digits for a key of the store."""
    return _digest(urlsplit(url).netloc)


def _digest(name: str) -> str:
    """``name`` (a ``host:port``, an address), as 16 hex digits for a key of the store."""
    return hashlib.md5(name.encode()).hexdigest()[:16]


#: What :func:`over_budget` says of a URL over a budget: the crawl's, or its host's.
CRAWL_BUDGET, HOST_BUDGET = "the crawl's", "its host's"


def over_budget(
    client: StoreClient, options: CrawlOptions, url: str, first_delivery: bool, ttl: int
) -> str | None:
    """Count this URL against ``--max-pages-per-host``, then ``--max-pages``; which
    budget was already spent, or None.  A URL over its host's budget does not count
    against the crawl's.  The crawl's count lives ``ttl`` seconds, refreshed with the
    crawl's counters; a host's lives ``ttl`` from the host's first page."""
    if options.crawl_id is None or not first_delivery:
        return None
    per_host, pages, crawl_id = options.max_pages_per_host, options.max_pages, options.crawl_id
    if per_host is not None and _count(client, host_budget_key(crawl_id, url), ttl) > per_host:
        return HOST_BUDGET
    if pages is not None and _count(client, budget_key(crawl_id), ttl) > pages:
        return CRAWL_BUDGET
    return None


def pages_spent(client: StoreClient, options: CrawlOptions) -> bool:
    """Whether the crawl's ``--max-pages`` budget is spent already (read, not counted)."""
    if options.max_pages is None or options.crawl_id is None:
        return False
    return int(client.get(budget_key(options.crawl_id)) or 0) >= options.max_pages


def _count(client: StoreClient, key: str, ttl: int) -> int:
    return 1 if client.add(key, 1, time=ttl) else int(client.incr(key))


#: How long a ``--max-per-host`` slot outlives a worker killed while holding it, in
#: seconds: past the actor's time limit, so a live holder never loses its slot.
SLOT_TTL = math.ceil(ACTOR_TIME_LIMIT) + 5
#: Seconds between two looks for a free slot while waiting.
SLOT_POLL = (0.02, 0.08)


def slot_keys(crawl_id: str, name: str, places: int) -> list[str]:
    """The keys of the ``places`` places of pace ``name`` (:func:`pace_of`: a
    ``host:port``, or with ``--per-ip`` an address)."""
    digest = _digest(name)
    return [counters.crawl_key(crawl_id, f"slot:{digest}:{i}") for i in range(places)]


def host_slot(
    pool: StorePool,
    url: str,
    options: CrawlOptions,
    paced_as: str,
    adaptive: Pace | None = None,
    patience: float = RATE_WAIT,
) -> HostTurn | None:
    """With ``--max-per-host N``: one of the N places of ``url``'s host for a fetch in
    flight, held until the context ends; None when all were taken for ``patience``
    seconds (``RATE_WAIT``: the message is deferred, as over ``--max-rate``).  Without it, a turn
    that holds no place.

    The places are N keys in the crawl's store, each taken with ``add``: one a killed
    worker held frees itself after ``SLOT_TTL``, so a crawl never waits for good.
    (Dramatiq's ``ConcurrentRateLimiter`` keeps one counter, which on Memcached counts
    refused tries too and keeps a killed worker's place until the whole count expires.)
    """
    if options.max_per_host is None or options.crawl_id is None:
        return HostTurn(pool, url, options, paced_as, adaptive=adaptive)
    keys = slot_keys(options.crawl_id, paced_as, options.max_per_host)
    deadline = time.monotonic() + patience
    while True:
        with pool.reserve() as client:
            taken = client.get_multi(keys)
            for key in random.sample(keys, len(keys)):
                if key not in taken and client.add(key, 1, time=SLOT_TTL):
                    return HostTurn(pool, url, options, paced_as, key, adaptive)
        if time.monotonic() >= deadline:
            metrics.rate_limited("deferred")
            return None
        metrics.rate_limited("waited")
        time.sleep(random.uniform(*SLOT_POLL))


class HostTurn(AbstractContextManager[Any]):
    """A host's turn for one fetch (:func:`host_slot`): its place, when one was taken,
    given back when the fetch ends; an answer that asks the crawl to wait
    (:class:`ServerBusy`) makes the host wait for every worker (:func:`pause_host`); and
    with ``--auto-throttle`` the host's delay follows the answer (:func:`adapted`:
    :meth:`answered` gives its latency, a failed fetch slows the host).

    Parameters:
      pool(StorePool): The crawl's store.
      url(str): The URL fetched.
      options(CrawlOptions): The crawl's options.
      paced_as(str): What the host's pace is kept under (:func:`pace_of`).
      key(str): The ``--max-per-host`` place taken, or None.
      adaptive(Pace): The host's ``--auto-throttle`` pace when the turn was taken
        (None: off).
    """

    def __init__(
        self,
        pool: StorePool,
        url: str,
        options: CrawlOptions,
        paced_as: str,
        key: str | None = None,
        adaptive: Pace | None = None,
    ) -> None:
        self.pool, self.url, self.options, self.key = pool, url, options, key
        self.paced_as, self.adaptive = paced_as, adaptive
        self.latency: float | None = None

    def answered(self, latency: float) -> None:
        """The server answered after ``latency`` seconds (its headers)."""
        self.latency = latency

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        slower = isinstance(exc, TransientError)
        adapts = self.adaptive is not None and _changes(self.adaptive, self.latency, slower)
        if self.key is None and not isinstance(exc, ServerBusy) and not adapts:
            return
        with self.pool.reserve() as client:
            if self.key is not None:
                client.delete(self.key)
            if isinstance(exc, ServerBusy):
                pause_host(client, self.options, self.url, exc.delay)
            if adapts:
                assert self.adaptive is not None
                key = delay_key(self.options.crawl_id, self.paced_as)
                keep_pace(client, key, self.adaptive, self.latency, slower)


def _changes(pace: Pace, latency: float | None, slower: bool) -> Pace | None:
    """``pace`` after one answer (:func:`adapted`), when it changed enough to be kept."""
    new = adapted(pace, latency, slower)
    changed = abs(new.delay - pace.delay) > AUTO_CHANGE * pace.delay
    return new if changed or new.careful != pace.careful else None


def keep_pace(
    client: StoreClient, key: str, read: Pace, latency: float | None, slower: bool
) -> None:
    """Adapt the pace kept at ``key`` to one answer (:func:`adapted`), from the pace it
    holds now (compare-and-set), so that the answers of every worker each move it from
    where the others left it.  A slower answer doubles the pace its request ``read``,
    never less than the pace now: the refusals of one burst, which all read about the
    same pace, double it once, and a faster answer never undoes them."""
    for _ in range(TURN_TRIES):
        stored, token = client.gets(key)
        now = Pace.read(stored)
        if slower:
            new: Pace | None = adapted(read, None, slower=True)
            if new is not None and new.delay <= now.delay and now.careful:
                return
        else:
            new = _changes(now, latency, slower)
        if new is None:
            return
        if stored is None:
            if client.add(key, new.written(), time=PACE_TTL):
                return
        elif client.cas(key, new.written(), token, time=PACE_TTL):
            return


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def robots_url(url: str) -> str:
    """The robots.txt of ``url``'s host."""
    return origin(url) + "/robots.txt"


def robots_key(url: str, owner: str | None = None) -> str:
    """The store's key for the robots.txt rules of ``url``'s host: every crawl's, or
    the crawl ``owner``'s alone (:func:`robots_owner`)."""
    key = "robots:" + hashlib.md5(origin(url).encode()).hexdigest()
    return key if owner is None else f"{key}:{owner}"


def robots_owner(options: CrawlOptions) -> str | None:
    """Whose robots.txt answers a crawl reads: every crawl's (None), or, when its
    requests carry headers, a proxy or credentials of its own (which may change the
    answer), its own: fetched with them, never given to another crawl."""
    own = bool(options.headers or options.auth_env) or options.proxy is not None
    return options.crawl_id if own else None


def robots_wait(limits: Limits) -> float:
    """How long a worker waits for another one fetching the same robots.txt: that
    fetch's deadline and a margin, and never as long as the actor's time limit."""
    return min(limits.fetch_deadline + ROBOTS_WAIT_MARGIN, ACTOR_TIME_LIMIT - ROBOTS_WAIT_MARGIN)


def robots_for(
    client: StoreClient,
    session: requests.Session,
    url: str,
    user_agent: str,
    *,
    limits: Limits,
    via_public: bool = False,
    owner: str | None = None,
    stored: Mapping[str, bytes] | None = None,
) -> Protego:
    """The robots.txt rules of ``url``'s host: fetched by one worker, shared through the
    store, as RFC 9309 reads them: a 2xx answer's first 500 KiB; a 4xx answer (no
    robots.txt) allows everything; a 5xx answer, a timeout or a failed connection makes
    it unreachable (RFC 9309 §2.3.1.4), remembered so for ``ROBOTS_UNREACHABLE_TTL``
    seconds: the host's pages are all disallowed until it answers, so this raises the
    :class:`TransientError` that retries the page later.  A 429 (or a 503 with
    ``Retry-After``) raises the :class:`ServerBusy` that makes the host wait.

    Parameters:
      client(MemcachedClient): The dedup store, where the rules are shared for an hour.
      session(requests.Session): The session to fetch robots.txt with.
      url(str): A URL of the host.
      user_agent(str): The User-Agent header to send.
      limits(Limits): The deadline and caps of the fetch, the same as a page's.
      via_public(bool): The page that linked to ``url`` was public (for the network guard).
      owner(str): The crawl whose answers these are alone (:func:`robots_owner`).
      stored(Mapping): What the store held, read already with the key of the rules.
    """
    key = robots_key(url, owner)
    wait = robots_wait(limits)
    body = client.get(key) if stored is None else stored.get(key)
    if body is None and client.add(key + ":lock", 1, time=math.ceil(wait)):
        try:
            body = _fetch_robots(session, robots_url(url), user_agent, limits, via_public)
        except ServerBusy:  # the host's pace (take_turn): the next ask after it fetches it
            client.delete(key + ":lock")
            raise
        unreachable = body.startswith(_UNREACHABLE)
        client.set(key, body, time=ROBOTS_UNREACHABLE_TTL if unreachable else ROBOTS_TTL)
        if unreachable:
            client.delete(key + ":lock")  # the next ask after the TTL fetches it again
    deadline = time.monotonic() + wait
    while body is None and time.monotonic() < deadline:
        time.sleep(0.05)  # another worker is fetching it; there is no event to wait on
        body = client.get(key)
    if body is None:  # the other worker died meanwhile: fetch it here, uncached
        body = _fetch_robots(session, robots_url(url), user_agent, limits, via_public)
    if body.startswith(_UNREACHABLE):
        reason = body[len(_UNREACHABLE) :].decode("utf-8", "replace")
        raise TransientError(
            f"{robots_url(url)} could not be reached ({reason}): the host's pages wait"
            " until it answers"
        )
    return robots_rules.parsed(body, user_agent)  # RFC 9309's groups, for protego


def robots_allow(robots: Protego, url: str, options: CrawlOptions) -> bool:
    """With ``--obey-robots``, whether ``robots`` allows ``url``; without it, True."""
    return not options.obey_robots or bool(robots.can_fetch(url, options.user_agent))


def _fetch_robots(
    session: requests.Session, address: str, user_agent: str, limits: Limits, via_public: bool
) -> bytes:
    """At most ``ROBOTS_MAX_BYTES`` of a robots.txt, fetched within a page's deadline and
    caps (redirects followed as a page's) so a slow one cannot hold the message past the
    actor's time limit; ``_UNREACHABLE`` and why when it could not be reached.

    A missing robots.txt (a 4xx answer) allows everything, as RFC 9309 says; so does one
    refused for good otherwise (the network guard), with a warning.
    """
    try:
        with fetch(
            session,
            address,
            limits,
            user_agent,
            via_public=via_public,
            max_redirects=ROBOTS_MAX_REDIRECTS,
        ) as fetched:
            return read_body(fetched, limits, truncate_at=ROBOTS_MAX_BYTES)
    except ServerBusy:
        raise
    except TransientError as e:  # 5xx, 429, timeouts, connections: RFC 9309's unreachable
        logger.warning(
            "Could not reach %s (%s); its host's pages wait until it answers.", address, e
        )
        return _UNREACHABLE + str(e).encode("utf-8", "replace")
    except PermanentError as e:
        if e.status is not None:  # fetch's 4xx answers
            logger.info("No robots.txt at %s (%s); allowing every page.", address, e)
        else:
            logger.warning("Could not read %s (%s); allowing every page.", address, e)
        return b""
