"""The dedup stores: where claims, the crawl's journal and counters, budgets, robots.txt
rules and rate limits live.  Memcached by default (:mod:`.memcached`), a Redis or Redis
Cluster with ``DEDUP_URL`` (:mod:`.redis`), this process's memory with ``--local``
(:mod:`.memory`); each client meets :class:`~crawler.stores.client.StoreClient` (the
subset of ``pylibmc.Client`` the crawler uses), and comes from a pool whose
``reserve()`` gives the calling thread a client, as upstream's
``pylibmc.ThreadMappedPool`` does."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dramatiq.rate_limits import RateLimiterBackend
from redis.exceptions import RedisClusterException, RedisError

from crawler.archiving.warc import WarcFiles
from crawler.environment import dedup_url, warc_directory, warc_max_bytes
from crawler.stores.client import StoreClient
from crawler.stores.memcached import MemcachedError

if TYPE_CHECKING:
    from crawler.stores.memory import MemoryClient

#: What a dedup store raises when it cannot answer: Memcached's errors, or Redis's.
STORE_ERRORS: tuple[type[BaseException], ...] = (
    MemcachedError,
    RedisError,
    RedisClusterException,  # a cluster that lost a node or its slot map
)


class StorePool(Protocol):
    """What the crawler asks of a dedup store's pool: a client for this thread."""

    def reserve(self) -> AbstractContextManager[StoreClient]: ...


class Stores:
    """A process's stores, one value: the dedup store's pool (``memcache_pool``: claims,
    the crawl's journal and counters, budgets, robots.txt rules), the rate limiters'
    backend (``rate_limits``) and the WARC files of ``--warc`` (``warc_files``).

    Opened once, on first use: from the environment (``MEMCACHED_SERVERS``, or
    ``DEDUP_URL``; ``CRAWLER_WARC_DIR``) in a worker or a seeder, or in this process's
    memory for ``--local``, which says so (:meth:`keep_in_memory`) before any use.
    Opening a pool connects to nothing: its clients connect when first reserved.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._opened: tuple[StorePool, RateLimiterBackend, WarcFiles] | None = None
        #: The stores opened from the environment while a --local crawl of the API's
        #: keeps its own in memory (a program that seeded workers, then crawls here).
        self._set_aside: tuple[StorePool, RateLimiterBackend, WarcFiles] | None = None
        # Read now: a variable that cannot be read stops a worker as it starts, naming it.
        self._dedup_url = dedup_url()
        self._warc = (warc_max_bytes(), warc_directory())

    def keep_in_memory(
        self,
        warc_root: Path | None = None,
        client: MemoryClient | None = None,
        rate_limits: RateLimiterBackend | None = None,
    ) -> None:
        """``--local``: claims, counters and rate limits in this process (in ``client``,
        a :class:`~crawler.stores.memory.MemoryClient`: ``--state``'s is also on disk, a
        shard's shares a few keys with the others; in ``rate_limits``, when given: the
        shards'); WARC files under ``warc_root`` (the one directory its messages name),
        else as configured."""
        from dramatiq.rate_limits.backends import StubBackend

        from crawler.stores.memory import MemoryPool

        with self._lock:
            if self._opened is not None and not isinstance(self._opened[0], MemoryPool):
                self._set_aside = self._opened  # the process's own, back after the crawl
            files = WarcFiles(self._warc[0], root=warc_root or self._warc[1])
            backend = StubBackend() if rate_limits is None else rate_limits
            self._opened = (MemoryPool(client), backend, files)

    def leave_memory(self) -> None:
        """Forget the stores of a ``--local`` crawl that ended (one run from Python
        code): the process's own come back, or the next use opens them as configured,
        or in memory anew."""
        from crawler.stores.memory import MemoryPool

        with self._lock:
            if self._opened is not None and isinstance(self._opened[0], MemoryPool):
                self._opened, self._set_aside = self._set_aside, None

    def _stores(self) -> tuple[StorePool, RateLimiterBackend, WarcFiles]:
        opened = self._opened  # set once, then only read: no lock on a page's path
        if opened is not None:
            return opened
        with self._lock:
            if self._opened is None:
                self._opened = _from_environment(self._dedup_url, *self._warc)
            return self._opened

    @property
    def memcache_pool(self) -> StorePool:
        return self._stores()[0]

    @property
    def rate_limits(self) -> RateLimiterBackend:
        return self._stores()[1]

    @property
    def warc_files(self) -> WarcFiles:
        return self._stores()[2]

    def reserve(self) -> AbstractContextManager[StoreClient]:
        """A client of the dedup store for this thread: the stores serve as its pool."""
        return self.memcache_pool.reserve()


def _from_environment(
    url: str | None, warc_max: int, warc_root: Path | None
) -> tuple[StorePool, RateLimiterBackend, WarcFiles]:
    from crawler.stores import memcached
    from crawler.stores import redis as redis_stores

    files = WarcFiles(warc_max, root=warc_root)
    if url is not None:  # DEDUP_URL=redis://...: claims and rate limits in Redis
        redis_pool, backend = redis_stores.stores(url)
        return redis_pool, backend, files
    pool = memcached.from_environment()  # MEMCACHED_SERVERS
    return pool, memcached.MemcachedBackend(pool), files
