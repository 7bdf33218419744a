"""``--local --processes N``: the few keys every shard of a crawl shares.

A shard's claims, journal and counters are its own (:mod:`crawler.embedded.shards`), but
some of a crawl's keys count across all its pages: the page budgets (``--max-pages``,
``--max-pages-per-host``), each host's places (``--max-per-host``), its turns
(``--max-rate``, ``Crawl-delay``), the payloads ``--warc`` kept (a copy is a
``revisit``), the robots.txt rules fetched (each host's fetched once), the pages' text
fingerprints (``--near-duplicates``) and the crawl's cookies (a login holds on every
shard: :mod:`crawler.fetching.shared_cookies`).  Those live in one more process (a
:class:`multiprocessing.managers.BaseManager` server), which each shard's
:class:`ShardClient` asks for them; the rest stays in the shard's memory.  A crawl
without those options starts no such process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from multiprocessing.context import BaseContext
from multiprocessing.managers import BaseManager
from multiprocessing.process import BaseProcess
from typing import Any

from crawler.stores.memory import MemoryClient

#: The names of a crawl's keys (``crawl:{id}:NAME``) the shards share, and the
#: prefixes of the other keys they share: the WARC payloads', the robots.txt rules',
#: the near-duplicates' bands (``--near-duplicates``).
SHARED_NAMES = (":page-budget", ":host-budget:", ":slot:", ":turn:", ":delay:", ":cookies")
SHARED_PREFIXES = ("w:", "robots:", "near:")
#: Seconds a shard keeps robots.txt rules it read from the shared store, unasked.
ROBOTS_KEPT = 10.0


def shared(key: str) -> bool:
    """Whether ``key`` counts across the shards."""
    return key.startswith(SHARED_PREFIXES) or (
        key.startswith("crawl:") and any(name in key for name in SHARED_NAMES)
    )


class SharedStore(BaseManager):
    """The process that keeps the shared keys (``client()``)."""


_CLIENT = MemoryClient()
SharedStore.register("client", callable=lambda: _CLIENT)


def start(context: BaseContext, initializer: Callable[[], None] | None = None) -> SharedStore:
    """The shared store's process, started (stop it with ``shutdown()``), having run
    ``initializer`` first."""
    manager = SharedStore(ctx=context)
    manager.start(initializer)
    return manager


class ShardClient(MemoryClient):
    """A shard's store: its own keys in its memory, the :func:`shared` ones in
    ``remote`` (the :class:`SharedStore`'s client)."""

    def __init__(self, remote: Any) -> None:
        super().__init__()
        self.remote = remote
        #: Robots.txt rules read from ``remote`` lately (each page asks for its host's).
        self._rules = MemoryClient()

    def get(self, key: str) -> Any:
        if not shared(key):
            return super().get(key)
        if not key.startswith("robots:") or key.endswith(":lock"):
            return self.remote.get(key)
        value = self._rules.get(key)
        if value is None:
            value = self.remote.get(key)
            if value is not None:
                self._rules.set(key, value, ROBOTS_KEPT)
        return value

    def get_multi(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(keys)
        theirs = [key for key in keys if shared(key)]
        found = super().get_multi(key for key in keys if not shared(key))
        if theirs:
            found.update(self.remote.get_multi(theirs))
        return found

    def set(self, key: str, value: Any, time: float = 0) -> bool:
        if shared(key):
            return bool(self.remote.set(key, value, time))
        return super().set(key, value, time)

    def add(self, key: str, value: Any, time: float = 0) -> bool:
        if shared(key):
            return bool(self.remote.add(key, value, time))
        return super().add(key, value, time)

    def add_multi(self, mapping: Mapping[str, Any], time: float = 0) -> list[str]:
        theirs = {key: value for key, value in mapping.items() if shared(key)}
        taken = super().add_multi({k: v for k, v in mapping.items() if k not in theirs}, time)
        return taken + (list(self.remote.add_multi(theirs, time)) if theirs else [])

    def append(self, key: str, value: bytes) -> bool:
        if shared(key):
            return bool(self.remote.append(key, value))
        return super().append(key, value)

    def delete(self, key: str) -> bool:
        return bool(self.remote.delete(key)) if shared(key) else super().delete(key)

    def incr(self, key: str, delta: int = 1) -> int:
        return int(self.remote.incr(key, delta)) if shared(key) else super().incr(key, delta)

    def touch(self, key: str, time: float) -> bool:
        return bool(self.remote.touch(key, time)) if shared(key) else super().touch(key, time)

    def gets(self, key: str) -> tuple[Any, Any]:
        if shared(key):
            value, token = self.remote.gets(key)
            return value, token
        return super().gets(key)

    def cas(self, key: str, value: Any, cas: Any, time: float = 0) -> bool:
        if shared(key):
            return bool(self.remote.cas(key, value, cas, time))
        return super().cas(key, value, cas, time)


def process_of(manager: SharedStore) -> BaseProcess | None:
    """The shared store's process (the manager keeps it as ``_process``), once started."""
    process: BaseProcess | None = getattr(manager, "_process", None)
    return process
