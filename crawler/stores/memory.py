"""An in-process stand-in for Memcached with the same ``add`` semantics, for ``--local``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any


class MemoryClient:
    """The subset of ``pylibmc.Client`` the crawler uses, thread-safe, with expiry.

    Every change goes through :meth:`_put` and :meth:`_drop`, which a store kept on
    disk extends (:class:`crawler.stores.saved.SavedClient`).
    """

    def __init__(self, items: dict[str, tuple[Any, float]] | None = None) -> None:
        self._lock = threading.RLock()  # a saved store's transaction holds it across calls
        self._items: dict[str, tuple[Any, float]] = items or {}

    def _put(self, key: str, value: Any, expires: float) -> None:
        self._items[key] = (value, expires)

    def _drop(self, key: str) -> bool:
        return self._items.pop(key, None) is not None

    def _live(self, key: str, now: float) -> Any:
        value, expires = self._items.get(key, (None, 0.0))
        if expires and expires <= now:
            del self._items[key]
            return None
        return value

    @staticmethod
    def _expiry(now: float, seconds: float) -> float:
        return now + seconds if seconds else 0.0

    def get(self, key: str) -> Any:
        with self._lock:
            return self._live(key, _now())

    def ready(self) -> None:
        """Memory always answers."""

    def together(self) -> AbstractContextManager[None]:
        """Nothing to group in memory (``--state``'s store writes a group to disk as one)."""
        return nullcontext()

    def get_multi(self, keys: Iterable[str]) -> dict[str, Any]:
        with self._lock:
            now = _now()
            found = {key: self._live(key, now) for key in keys}
        return {key: value for key, value in found.items() if value is not None}

    def set(self, key: str, value: Any, time: float = 0) -> bool:
        with self._lock:
            self._put(key, value, self._expiry(_now(), time))
            return True

    def add(self, key: str, value: Any, time: float = 0) -> bool:
        return not self.add_multi({key: value}, time=time)

    def add_multi(self, mapping: Mapping[str, Any], time: float = 0) -> list[str]:
        """Store each key that is absent; return the keys that were already there."""
        taken = []
        with self._lock:
            now = _now()
            for key, value in mapping.items():
                if self._live(key, now) is None:
                    self._put(key, value, self._expiry(now, time))
                else:
                    taken.append(key)
        return taken

    def gets(self, key: str) -> tuple[Any, Any]:
        """The value and, as its CAS token, the value itself (compared by :meth:`cas`)."""
        value = self.get(key)
        return value, value

    def cas(self, key: str, value: Any, cas: Any, time: float = 0) -> bool:
        with self._lock:
            now = _now()
            if self._live(key, now) != cas or cas is None:
                return False
            self._put(key, value, self._expiry(now, time))
            return True

    def append(self, key: str, value: bytes) -> bool:
        with self._lock:
            current = self._live(key, _now())
            if current is None:
                return False
            self._put(key, current + value, self._items[key][1])
            return True

    def touch(self, key: str, time: float) -> bool:
        with self._lock:
            now = _now()
            value = self._live(key, now)
            if value is not None:
                self._put(key, value, self._expiry(now, time))
            return value is not None

    def incr_and_append(
        self, increments: Mapping[str, int], appends: Mapping[str, bytes], ttl: int | None = None
    ) -> tuple[dict[str, int | None], list[str]]:
        values: dict[str, int | None] = {}
        with self._lock:  # (re-entrant): all of it at once, as a server's one round trip
            for key, delta in increments.items():
                if ttl is not None:
                    self.add(key, 0, time=ttl)
                try:
                    values[key] = self.incr(key, delta)
                except KeyError:
                    values[key] = None
            if ttl is not None:
                for key in appends:
                    self.add(key, b"", time=ttl)
            return values, [key for key, data in appends.items() if not self.append(key, data)]

    def touch_multi(self, keys: Iterable[str], time: float) -> None:
        for key in keys:
            self.touch(key, time)

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._drop(key)

    def incr(self, key: str, delta: int = 1) -> int:
        with self._lock:
            now = _now()
            value = self._live(key, now)
            if value is None:
                raise KeyError(key)
            expires = self._items[key][1]
            self._put(key, int(value) + delta, expires)
            return int(value) + delta

    def decr(self, key: str, delta: int = 1) -> int:
        """Take ``delta`` from a counter, down to 0 at most, as Memcached does."""
        with self._lock:
            value = self._live(key, _now())
            if value is None:
                raise KeyError(key)
            lowered = max(int(value) - delta, 0)
            self._put(key, lowered, self._items[key][1])
            return lowered

    def get_stats(self) -> None:
        """None: memory keeps no statistics, and evicts nothing."""
        return None


def _now() -> float:
    """Wall-clock time: a store kept on disk keeps its expiry times across runs."""
    return time.time()


class MemoryPool:
    """Stands where ``pylibmc.ThreadMappedPool`` does: ``with pool.reserve() as client``."""

    def __init__(self, client: MemoryClient | None = None) -> None:
        self.client = client or MemoryClient()

    @contextmanager
    def reserve(self) -> Iterator[MemoryClient]:
        yield self.client
