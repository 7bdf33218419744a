"""The frontier: which URLs enter a crawl (scope), which message owns each (claims),
when it may be fetched (politeness: budget, robots.txt, rate), the crawl's counters,
and the stores they live in (Memcached, Redis with ``DEDUP_URL``, or this process's
memory with ``--local``)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

import redis

from crawler.frontier.memcached_pool import MemcachedError

#: What a dedup store raises when it cannot answer: Memcached's errors, or Redis's.
STORE_ERRORS: tuple[type[BaseException], ...] = (
    MemcachedError,
    redis.RedisError,
    redis.exceptions.RedisClusterException,  # a cluster that lost a node or its slot map
)


class StorePool(Protocol):
    """What the crawler asks of a dedup store's pool: a client for this thread."""

    def reserve(self) -> AbstractContextManager[Any]: ...
