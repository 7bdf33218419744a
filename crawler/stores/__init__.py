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
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crawler.archiving.warc import WarcFiles
from crawler.environment import dedup_url, warc_directory, warc_max_bytes
from crawler.stores.client import StoreClient
from crawler.stores.memcached import MemcachedError

if TYPE_CHECKING:
    from crawler.stores.memory import MemoryClient


@cache
def redis_errors() -> tuple[type[BaseException], ...]:
    """What the ``redis`` client raises when its server cannot answer, or a cluster
    lost a node or its slot map.  ``redis`` loads here, on first use (an ``except``
    clause's classes are looked up when an exception reaches it): a process on RabbitMQ
    and Memcached never loads it (some 50 ms of every start)."""
    from redis.exceptions import RedisClusterException, RedisError

    return (RedisError, RedisClusterException)


@cache
def store_errors() -> tuple[type[BaseException], ...]:
    """What a dedup store raises when it cannot answer: Memcached's errors, or Redis's."""
    return (MemcachedError, *redis_errors())


class StorePool(Protocol):
    """What the crawler asks of a dedup store's pool: a client for this thread."""

    def reserve(self) -> AbstractContextManager[StoreClient]: ...


class Stores:
    """A crawl's stores, one value: the dedup store's pool (``memcache_pool``: claims,
    the crawl's journal and counters, budgets, robots.txt rules, the hosts' turns) and
    the WARC files of ``--warc`` (``warc_files``).

    A worker's or a seeder's (``Stores()``) are opened on first use, from the
    environment (``MEMCACHED_SERVERS``, or ``DEDUP_URL``; ``CRAWLER_WARC_DIR``); a
    ``--local`` crawl's are in its process's memory (:meth:`in_memory`), its own: two
    crawls in one process keep theirs apart.  Opening a pool connects to nothing: its
    clients connect when first reserved.
    """

    def __init__(self, opened: tuple[StorePool, WarcFiles] | None = None) -> None:
        self._lock = threading.Lock()
        self._opened = opened
        # Read now: a variable that cannot be read stops a worker as it starts, naming it.
        # (Stores made opened, in memory, read it no more.)
        self._environment = (
            None if opened is not None else (dedup_url(), warc_max_bytes(), warc_directory())
        )

    @classmethod
    def in_memory(
        cls,
        warc_root: Path | None = None,
        client: MemoryClient | None = None,
    ) -> Stores:
        """``--local``'s: claims, counters and the hosts' turns in this process (in
        ``client``, a :class:`~crawler.stores.memory.MemoryClient`: ``--state``'s is also
        on disk, a shard's shares a few keys with the others); WARC files under
        ``warc_root`` (the one directory its messages name), else as configured."""
        from crawler.stores.memory import MemoryPool

        files = WarcFiles(warc_max_bytes(), root=warc_root or warc_directory())
        return cls((MemoryPool(client), files))

    def _stores(self) -> tuple[StorePool, WarcFiles]:
        opened = self._opened  # set once, then only read: no lock on a page's path
        if opened is not None:
            return opened
        with self._lock:
            if self._opened is None:
                assert self._environment is not None  # read when made unopened
                self._opened = _from_environment(*self._environment)
            return self._opened

    @property
    def memcache_pool(self) -> StorePool:
        return self._stores()[0]

    @property
    def warc_files(self) -> WarcFiles:
        return self._stores()[1]

    def reserve(self) -> AbstractContextManager[StoreClient]:
        """A client of the dedup store for this thread: the stores serve as its pool."""
        return self.memcache_pool.reserve()


def _from_environment(
    url: str | None, warc_max: int, warc_root: Path | None
) -> tuple[StorePool, WarcFiles]:
    from crawler.stores import memcached
    from crawler.stores import redis as redis_stores

    files = WarcFiles(warc_max, root=warc_root)
    if url is not None:  # DEDUP_URL=redis://...: the crawl's keys in Redis
        return redis_stores.RedisStorePool(url), files
    return memcached.from_environment(), files  # MEMCACHED_SERVERS
