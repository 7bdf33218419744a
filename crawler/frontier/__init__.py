"""The frontier: which URLs enter a crawl (scope), which message owns each (claims),
when it may be fetched (politeness: budget, robots.txt, rate), the crawl's counters,
and the stores they live in (Memcached, or this process's memory with ``--local``)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class StorePool(Protocol):
    """What the crawler asks of a dedup store's pool: a client for this thread."""

    def reserve(self) -> AbstractContextManager[Any]: ...
