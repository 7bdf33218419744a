"""The dedup stores: where claims, the crawl's journal and counters, budgets, robots.txt
rules and rate limits live.  Memcached by default (:mod:`.memcached`), a Redis or Redis
Cluster with ``DEDUP_URL`` (:mod:`.redis`), this process's memory with ``--local``
(:mod:`.memory`); each offers the subset of ``pylibmc.Client`` the crawler uses, through
a pool whose ``reserve()`` gives the calling thread a client, as upstream's
``pylibmc.ThreadMappedPool`` does."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from redis.exceptions import RedisClusterException, RedisError

from crawler.stores.memcached import MemcachedError

#: What a dedup store raises when it cannot answer: Memcached's errors, or Redis's.
STORE_ERRORS: tuple[type[BaseException], ...] = (
    MemcachedError,
    RedisError,
    RedisClusterException,  # a cluster that lost a node or its slot map
)


class StorePool(Protocol):
    """What the crawler asks of a dedup store's pool: a client for this thread."""

    def reserve(self) -> AbstractContextManager[Any]: ...
