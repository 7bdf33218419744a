"""What the crawler asks of a dedup store's client: :class:`StoreClient`, the subset of
``pylibmc.Client`` it uses, with pylibmc's answers.

Each store implements it in a module of its own: Memcached
(:class:`crawler.stores.memcached.MemcachedClient`), Redis
(:class:`crawler.stores.redis.RedisStoreClient`), this process's memory
(:class:`crawler.stores.memory.MemoryClient`) and ``--state``'s SQLite file
(:class:`crawler.stores.saved.SavedClient`).  Callers are typed against the protocol,
and mypy checks that each client meets it (the assignments at the end of this module).

Values are bytes, text or whole numbers; times are seconds, 0 for no expiry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable


class StoreClient(Protocol):
    """One thread's client of a dedup store (claims, the crawl's journal and counters,
    budgets, robots.txt rules), taken from its pool's ``reserve()``.

    A store that cannot answer raises one of
    :func:`crawler.stores.store_errors`; the attempt is then retried.
    """

    def ready(self) -> None:
        """Raise the store's error while it cannot answer (a node that failed lately and
        does not answer yet); return when it can."""

    def together(self) -> AbstractContextManager[None]:
        """The changes made in the block written as one where the store can (only
        ``--state``'s does: one transaction); elsewhere each is written as it comes."""

    def get(self, key: str) -> Any:
        """The value under ``key``; None when it is not there.

        Parameters:
          key(str): The key to read.
        """

    def get_multi(self, keys: Iterable[str]) -> dict[str, Any]:
        """The values under ``keys``, those that are there only.

        Parameters:
          keys(Iterable[str]): The keys to read.
        """

    def set(self, key: str, value: Any, time: float = 0) -> bool:
        """Store ``value`` under ``key``, whether it was there or not.

        Parameters:
          key(str): The key to store.
          value(bytes | str | int): The value to store.
          time(float): Seconds the key lives; 0: until evicted or deleted.

        Returns:
          bool: True if the value was stored.
        """

    def add(self, key: str, value: Any, time: float = 0) -> bool:
        """Store ``value`` under ``key`` iff the key is not there.

        Parameters:
          key(str): The key to add.
          value(bytes | str | int): The value to store.
          time(float): Seconds the key lives; 0: until evicted or deleted.

        Returns:
          bool: True if the key was added; False if it was there (or the store did not
          keep it: a Memcached out of memory answers the same).
        """

    def add_multi(self, mapping: Mapping[str, Any], time: float = 0) -> list[str]:
        """:meth:`add` each key of ``mapping``, in one round trip a server.

        Parameters:
          mapping(Mapping[str, bytes | str | int]): The keys to add and their values.
          time(float): Seconds the keys live; 0: until evicted or deleted.

        Returns:
          list[str]: The keys that were not added (they were there).
        """

    def append(self, key: str, value: bytes) -> bool:
        """Append ``value`` to the bytes under ``key``, its expiry unchanged.

        Parameters:
          key(str): The key to append to.
          value(bytes): The bytes to append.

        Returns:
          bool: True if appended; False if the key is not there (it stays absent).
        """

    def incr_and_append(
        self, increments: Mapping[str, int], appends: Mapping[str, bytes], ttl: int | None = None
    ) -> tuple[dict[str, int | None], list[str]]:
        """:meth:`incr` each counter and :meth:`append` to each item, in one round trip a
        server.

        Parameters:
          increments(Mapping[str, int]): The counters and the amounts to add to them.
          appends(Mapping[str, bytes]): The items and the bytes to append to them.
          ttl(int|None): When given, a counter not there is made at its amount, to live
            ``ttl`` seconds, in the same round trip (no kill falls between the two).

        Returns:
          tuple: Each counter's new value (None: it was not there, with no ``ttl``), and
          the items that were not there, left as they are.
        """

    def touch(self, key: str, time: float) -> bool:
        """Give ``key`` ``time`` seconds more to live.

        Parameters:
          key(str): The key to keep.
          time(float): Seconds it lives from now.

        Returns:
          bool: True if the key was there.
        """

    def touch_multi(self, keys: Iterable[str], time: float) -> None:
        """:meth:`touch` each of ``keys`` that is there, in one round trip a server.

        Parameters:
          keys(Iterable[str]): The keys to keep.
          time(float): Seconds they live from now.
        """

    def delete(self, key: str) -> bool:
        """Remove ``key``.

        Parameters:
          key(str): The key to remove.

        Returns:
          bool: True if it was there.
        """

    def incr(self, key: str, delta: int = 1) -> int:
        """Add ``delta`` to the counter under ``key``; :class:`KeyError` when it is not
        there (add a counter first).

        Parameters:
          key(str): The counter.
          delta(int): The amount to add.

        Returns:
          int: The counter's new value.
        """

    def decr(self, key: str, delta: int = 1) -> int:
        """Take ``delta`` from the counter under ``key``; :class:`KeyError` when it is not
        there.

        Parameters:
          key(str): The counter.
          delta(int): The amount to take.

        Returns:
          int: The counter's new value.
        """

    def gets(self, key: str) -> tuple[Any, Any]:
        """The value under ``key`` and a token for :meth:`cas`; ``(None, None)`` when it
        is not there.

        Parameters:
          key(str): The key to read.
        """

    def cas(self, key: str, value: Any, cas: Any, time: float = 0) -> bool:
        """Store ``value`` under ``key`` iff it is unchanged since :meth:`gets` gave
        ``cas``.

        Parameters:
          key(str): The key to store.
          value(bytes | str | int): The value to store.
          cas(Any): The token :meth:`gets` gave.
          time(float): Seconds the key lives; 0: until evicted or deleted.

        Returns:
          bool: True if stored; False if the key changed or is gone.
        """

    def get_stats(self) -> list[tuple[str, dict[str, Any]]] | None:
        """Each server's statistics (as Memcached's ``stats``: ``evictions`` at least),
        of the servers that answer; None for a store that keeps none (this process's
        memory, which evicts nothing)."""


@runtime_checkable
class CountsOnce(Protocol):
    """A store's client that can count a message's ending once and for all in one atomic
    step (Redis, in a Lua script); :func:`crawler.frontier.counters.ended` uses it when
    the client has it, and a mark then the count elsewhere."""

    def count_once(
        self, mark: str, time: float, increments: Mapping[str, int], ttl: float
    ) -> dict[str, int] | None:
        """Add ``mark`` and, only if it was not there, :meth:`StoreClient.incr` each
        counter of ``increments``, making those not there (to live ``ttl`` seconds): all
        of it, or nothing, so that a call the store did but whose reply was lost counts
        nothing more when made again.

        Parameters:
          mark(str): The key that says this ending was counted.
          time(float): Seconds the mark lives.
          increments(Mapping[str, int]): The counters and the amounts to add to them.
          ttl(float): Seconds a counter made now lives.

        Returns:
          dict[str, int] | None: Each counter's new value; None when the mark was there
          (counted before: nothing added).
        """


if TYPE_CHECKING:  # each store's client meets the protocol: mypy checks these
    from crawler.stores.memcached import MemcachedClient
    from crawler.stores.memory import MemoryClient
    from crawler.stores.redis import RedisStoreClient
    from crawler.stores.saved import SavedClient

    _memcached: type[StoreClient] = MemcachedClient
    _redis: type[StoreClient] = RedisStoreClient
    _redis_counts_once: type[CountsOnce] = RedisStoreClient
    _memory: type[StoreClient] = MemoryClient
    _saved: type[StoreClient] = SavedClient
