"""What a worker process builds at start-up, as one value: :class:`WorkerParts`.

:mod:`crawler.example` makes it once, from upstream's globals, and hands it to whatever
runs beside the actor (the seeder's command line, ``--local``, the API), which take it
as an argument rather than reaching into the worker module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dramatiq

from crawler.environment import Lifetimes, Limits
from crawler.handlers import Handlers
from crawler.rendering import Renderer
from crawler.stores import Stores


@dataclass(frozen=True)
class WorkerParts:
    """A worker process's parts.

    Parameters:
      crawl(dramatiq.Actor): The ``crawl`` actor, on the process's broker
        (``crawl.broker``; ``crawl_sitemap`` is on it too).
      stores(Stores): The dedup store's pool, the rate limits' backend, the WARC files.
      limits(Limits): The fetch's and the actor's bounds (``CRAWLER_*``).
      lifetimes(Lifetimes): How long claims and a crawl's entries live in the store.
      handlers(Handlers): The page handlers the process loaded.
      renderer(Renderer): ``--render``'s browser, started by the first page that asks.
    """

    crawl: dramatiq.Actor[Any, Any]
    stores: Stores
    limits: Limits
    lifetimes: Lifetimes
    handlers: Handlers
    renderer: Renderer
