"""What a crawl with options checks before it fetches: budget, robots.txt and rate.

All state is shared by every worker through the dedup store (Memcached, or the
in-memory store in ``--local``) and Dramatiq's rate-limiter backend.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from typing import Any
from urllib.parse import urlsplit

import requests
from dramatiq.rate_limits import BucketRateLimiter, RateLimiterBackend
from protego import Protego

from crawler import metrics
from crawler.options import CrawlOptions

logger = logging.getLogger("example")

#: How long a host's robots.txt is trusted, in seconds.
ROBOTS_TTL = 3600
#: How much of a robots.txt is read at most (Google reads 500 KiB).
ROBOTS_MAX_BYTES = 500 * 1024
#: How long a worker waits for another one that is fetching the same robots.txt.
ROBOTS_WAIT = 10.0


#: What :func:`check` says of a URL.
ALLOWED, DISALLOWED, RATE_LIMITED = "allowed", "disallowed", "rate-limited"
#: Seconds a worker thread waits for a slot of a host's rate before deferring the message.
RATE_WAIT = 1.0
#: How long a deferred message waits before it tries again, in milliseconds: a
#: spread, so that deferred messages do not all come back at the same instant.
DEFER_MS = (200, 1000)


def check(
    client: Any,
    backend: RateLimiterBackend,
    session: requests.Session,
    url: str,
    options: CrawlOptions,
) -> str:
    """Whether ``url`` may be fetched now: robots.txt first, then the host's rate."""
    crawl_delay = None
    if options.obey_robots:
        robots = robots_for(client, session, url, options.user_agent)
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


def over_budget(client: Any, options: CrawlOptions, first_delivery: bool) -> bool:
    """Count this URL against ``--max-pages``; True when the budget was already spent."""
    if options.max_pages is None or options.crawl_id is None:
        return False
    key = f"pages:{options.crawl_id}"
    if not first_delivery:
        return False
    count = 1 if client.add(key, 1, time=ROBOTS_TTL * 24) else int(client.incr(key))
    return count > options.max_pages


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def robots_for(client: Any, session: requests.Session, url: str, user_agent: str) -> Protego:
    """The robots.txt rules of ``url``'s host: fetched by one worker, shared through the store."""
    key = "robots:" + hashlib.md5(origin(url).encode()).hexdigest()
    body = client.get(key)
    if body is None and client.add(key + ":lock", 1, time=int(ROBOTS_WAIT)):
        body = _fetch_robots(session, origin(url) + "/robots.txt", user_agent)
        client.set(key, body, time=ROBOTS_TTL)
    deadline = time.monotonic() + ROBOTS_WAIT
    while body is None and time.monotonic() < deadline:
        time.sleep(0.05)  # another worker is fetching it; there is no event to wait on
        body = client.get(key)
    if body is None:  # the other worker died meanwhile: fetch it here, uncached
        body = _fetch_robots(session, origin(url) + "/robots.txt", user_agent)
    return Protego.parse(body.decode("utf-8", "replace"))


def _fetch_robots(session: requests.Session, robots_url: str, user_agent: str) -> bytes:
    """A missing or unreadable robots.txt allows everything, as the convention says."""
    try:
        with session.get(
            robots_url, headers={"User-Agent": user_agent}, timeout=(3.05, 5), stream=True
        ) as response:
            if response.status_code != 200:
                return b""
            return response.raw.read(ROBOTS_MAX_BYTES, decode_content=True) or b""
    except requests.RequestException as e:
        logger.warning("Could not read %s (%s); allowing every page.", robots_url, e)
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
    return BucketRateLimiter(backend, key, limit=limit, bucket=bucket_ms)  # type: ignore[no-untyped-call]
