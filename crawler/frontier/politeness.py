"""What a crawl with options checks before it fetches: budget, robots.txt and rate.

All state is shared by every worker through the dedup store (Memcached, or the
in-memory store in ``--local``) and Dramatiq's rate-limiter backend.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlsplit

import requests
from dramatiq.rate_limits import BucketRateLimiter, RateLimiterBackend
from protego import Protego

from crawler import metrics, outcomes
from crawler.environment import ACTOR_TIME_LIMIT, Limits
from crawler.errors import PermanentError, ServerBusy, TransientError
from crawler.fetching.bounded_fetch import fetch, read_body
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
ALLOWED, DISALLOWED, RATE_LIMITED = "allowed", "disallowed", "rate-limited"
#: Seconds a worker thread waits for a slot of a host's rate before deferring the message.
RATE_WAIT = 1.0
#: How long a deferred message waits before it tries again, in milliseconds: a
#: spread, so that deferred messages do not all come back at the same instant.
DEFER_MS = (200, 1000)


def take_turn(
    stores: Stores,
    session: requests.Session,
    url: str,
    options: CrawlOptions,
    *,
    limits: Limits,
    via_public: bool,
) -> tuple[HostTurn | None, str | None, int]:
    """The host's pace, robots.txt, its rate and its places (:func:`paused_for`,
    :func:`check`, :func:`host_slot`): the host's turn to hold while ``url`` is fetched,
    or None and why not: ``disallowed`` (by robots.txt, for good) or ``deferred`` (its
    server asked the crawl to wait, over the rate, or every place taken: the message is
    to come back later); and in how many milliseconds it is to come back."""
    with stores.memcache_pool.reserve() as client:
        # The host's pace and its robots.txt rules in one round trip.
        pace = pace_key(options.crawl_id, url)
        robots = [robots_key(url, robots_owner(options))] if options.obey_robots else []
        stored = client.get_multi([pace, *robots])
        left = _left(stored.get(pace))
        if left:
            metrics.rate_limited("paced")
            return None, outcomes.DEFERRED, left + defer_delay()
        try:
            verdict = check(
                client, stores.rate_limits, session, url, options, limits=limits,
                via_public=via_public, stored=stored,
            )  # fmt: skip
        except ServerBusy as e:  # robots.txt's answer: the host's pace holds for its pages
            pause_host(client, options, url, e.delay)
            return None, outcomes.DEFERRED, e.delay + defer_delay()
    if verdict == DISALLOWED:
        logger.warning("Skipping URL %r since robots.txt disallows it.", url)
        return None, outcomes.DISALLOWED, 0
    slot = None if verdict == RATE_LIMITED else host_slot(stores.memcache_pool, url, options)
    return slot, (outcomes.DEFERRED if slot is None else None), defer_delay()


def pace_key(crawl_id: str | None, url: str) -> str:
    """Where a crawl keeps until when ``url``'s host asked it to wait."""
    return counters.crawl_key(crawl_id or "-", f"paced:{_host_digest(url)}")


def paused_for(client: StoreClient, options: CrawlOptions, url: str) -> int:
    """Milliseconds left of the wait ``url``'s server asked this crawl for, or 0."""
    return _left(client.get(pace_key(options.crawl_id, url)))


def _left(until: bytes | None) -> int:
    """Milliseconds left until ``until`` (a :func:`pace_key`'s value), or 0."""
    if until is None:
        return 0
    return max(0, math.ceil((float(until) - time.time()) * 1000))


def pause_host(client: StoreClient, options: CrawlOptions, url: str, delay: int) -> None:
    """``url``'s server answered :class:`ServerBusy`: its host waits ``delay`` ms for the
    whole crawl (every worker's messages for it are deferred until then)."""
    until = time.time() + delay / 1000
    if until > time.time() + paused_for(client, options, url) / 1000:  # the longer wait holds
        key = pace_key(options.crawl_id, url)
        client.set(key, f"{until:.3f}".encode(), time=math.ceil(delay / 1000) + 1)
        logger.warning("Host of %r asked the crawl to wait; waiting %.1fs.", url, delay / 1000)


def check(
    client: StoreClient,
    backend: RateLimiterBackend,
    session: requests.Session,
    url: str,
    options: CrawlOptions,
    *,
    limits: Limits,
    via_public: bool,
    stored: Mapping[str, bytes] | None = None,
) -> str:
    """Whether ``url`` may be fetched now: robots.txt first, then the host's rate.

    Parameters:
      client(MemcachedClient): The dedup store, where robots.txt rules are shared.
      backend(RateLimiterBackend): Where the hosts' rates are counted.
      session(requests.Session): The worker thread's session, to fetch robots.txt with.
      url(str): The URL about to be fetched.
      options(CrawlOptions): The crawl's options: robots.txt, rate, User-Agent.
      limits(Limits): The deadline and caps of every fetch, robots.txt's included.
      via_public(bool): The page that linked to ``url`` was public (for the network guard).
      stored(Mapping): What the store held of the host's robots.txt, read already.
    """
    crawl_delay = None
    if options.obey_robots:
        robots = robots_for(
            client, session, url, options.user_agent, limits=limits, via_public=via_public,
            owner=robots_owner(options), stored=stored,
        )  # fmt: skip
        if not robots.can_fetch(url, options.user_agent):
            return DISALLOWED
        crawl_delay = robots.crawl_delay(options.user_agent)
    limiter = rate_limiter(backend, url, options, crawl_delay)
    if limiter is not None and not _wait_for_slot(limiter):
        metrics.rate_limited("deferred")
        return RATE_LIMITED
    return ALLOWED


def _wait_for_slot(limiter: BucketRateLimiter) -> bool:
    """Take a slot of the host's rate, waiting for the next buckets up to ``RATE_WAIT``.

    Waiting here briefly beats deferring at once: Dramatiq hands delayed messages
    back in batches, about a second apart, which would all meet in one bucket.
    """
    deadline = time.monotonic() + RATE_WAIT
    while True:
        with limiter.acquire(raise_on_failure=False) as acquired:
            if acquired:
                return True
        if time.monotonic() >= deadline:
            return False
        metrics.rate_limited("waited")
        time.sleep(limiter.bucket / 1000 * random.uniform(0.5, 1.5))


def defer_delay() -> int:
    return random.randint(*DEFER_MS)


def budget_key(crawl_id: str) -> str:
    return counters.crawl_key(crawl_id, "page-budget")


def host_budget_key(crawl_id: str, url: str) -> str:
    return counters.crawl_key(crawl_id, f"host-budget:{_host_digest(url)}")


def _host_digest(url: str) -> str:
    """``url``'s ``host:port``, as 16 hex digits for a key of the store."""
    return hashlib.md5(urlsplit(url).netloc.encode()).hexdigest()[:16]


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


def slot_keys(crawl_id: str, url: str, places: int) -> list[str]:
    """The keys of the ``places`` places of ``url``'s host (its ``host:port``)."""
    host = _host_digest(url)
    return [counters.crawl_key(crawl_id, f"slot:{host}:{i}") for i in range(places)]


def host_slot(pool: StorePool, url: str, options: CrawlOptions) -> HostTurn | None:
    """With ``--max-per-host N``: one of the N places of ``url``'s host for a fetch in
    flight, held until the context ends; None when all were taken for ``RATE_WAIT``
    seconds (the message is deferred, as over ``--max-rate``).  Without it, a turn
    that holds no place.

    The places are N keys in the crawl's store, each taken with ``add``: one a killed
    worker held frees itself after ``SLOT_TTL``, so a crawl never waits for good.
    (Dramatiq's ``ConcurrentRateLimiter`` keeps one counter, which on Memcached counts
    refused tries too and keeps a killed worker's place until the whole count expires.)
    """
    if options.max_per_host is None or options.crawl_id is None:
        return HostTurn(pool, url, options)
    keys = slot_keys(options.crawl_id, url, options.max_per_host)
    deadline = time.monotonic() + RATE_WAIT
    while True:
        with pool.reserve() as client:
            taken = client.get_multi(keys)
            for key in random.sample(keys, len(keys)):
                if key not in taken and client.add(key, 1, time=SLOT_TTL):
                    return HostTurn(pool, url, options, key)
        if time.monotonic() >= deadline:
            metrics.rate_limited("deferred")
            return None
        metrics.rate_limited("waited")
        time.sleep(random.uniform(*SLOT_POLL))


class HostTurn(AbstractContextManager[Any]):
    """A host's turn for one fetch (:func:`host_slot`): its place, when one was taken,
    given back when the fetch ends; and an answer that asks the crawl to wait
    (:class:`ServerBusy`) makes the host wait for every worker (:func:`pause_host`).

    Parameters:
      pool(StorePool): The crawl's store.
      url(str): The URL fetched.
      options(CrawlOptions): The crawl's options.
      key(str): The ``--max-per-host`` place taken, or None.
    """

    def __init__(
        self, pool: StorePool, url: str, options: CrawlOptions, key: str | None = None
    ) -> None:
        self.pool, self.url, self.options, self.key = pool, url, options, key

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        if self.key is None and not isinstance(exc, ServerBusy):
            return
        with self.pool.reserve() as client:
            if self.key is not None:
                client.delete(self.key)
            if isinstance(exc, ServerBusy):
                pause_host(client, self.options, self.url, exc.delay)


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
    return robots_rules.parse(body, user_agent)  # RFC 9309's groups, for protego


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


def rate_limiter(
    backend: RateLimiterBackend, url: str, options: CrawlOptions, crawl_delay: float | None
) -> BucketRateLimiter | None:
    """A per-host limiter for ``--max-rate`` and the host's ``Crawl-delay``, or None.

    Buckets of a tenth of a second (or one request's share of time, when slower) keep
    any one-second window within R plus one bucket's worth, where one-second buckets
    would let 2R through around a bucket's edge.
    """
    rates = [rate for rate in (options.max_rate, 1 / crawl_delay if crawl_delay else None) if rate]
    if not rates:
        return None
    rate = min(rates)
    limit = max(1, int(rate / 10))
    bucket_ms = max(1, round(1000 * limit / rate))
    key = f"rate:{options.crawl_id}:{urlsplit(url).netloc}"
    return BucketRateLimiter(backend, key, limit=limit, bucket=bucket_ms)
