"""What a crawl's pages are crawled with, as one value: :class:`WorkerParts`, made by
one function, :func:`build`.

:mod:`crawler.example` calls it once, for upstream's module globals (the worker's
stores, opened from the environment, and the handlers it loaded); a ``--local`` crawl
calls it for its own (its stores in memory, its own handler, its own browser), and
hands those to its broker (:func:`crawler.brokers.local.serve`), so that the actors'
bodies crawl each message with the parts of the broker it came from
(:func:`crawler.middleware.parts_for`).  Nothing is rebound after: two crawls in one
process keep their claims, figures and records apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from crawler.environment import Lifetimes, Limits
from crawler.handlers import Handlers
from crawler.pipeline import Pipeline, default_stages
from crawler.rendering import Renderer
from crawler.stores import Stores


@dataclass(frozen=True)
class WorkerParts:
    """A crawl's parts.

    Parameters:
      stores(Stores): The dedup store's pool, the rate limits' backend, the WARC files.
      limits(Limits): The fetch's and the actor's bounds (``CRAWLER_*``).
      lifetimes(Lifetimes): How long claims and a crawl's entries live in the store.
      handlers(Handlers): The page handlers its messages may name.
      renderer(Renderer): ``--render``'s browser, started by the first page that asks.
      pipeline(Pipeline): The stages a page goes through besides upstream's steps, made
        of the parts above (:func:`crawler.pipeline.default_stages`).
    """

    stores: Stores
    limits: Limits
    lifetimes: Lifetimes
    handlers: Handlers
    renderer: Renderer
    pipeline: Pipeline


#: What makes a crawl's parts once its stores are made: :func:`build` with the rest
#: given (a ``--local`` crawl's, each of its ``--processes`` shards making its own stores).
PartsOf = Callable[[Stores], WorkerParts]


def build(
    stores: Stores,
    limits: Limits,
    lifetimes: Lifetimes,
    handlers: Handlers,
    renderer: Renderer,
    roots: Mapping[str, Path | None] | None = None,
) -> WorkerParts:
    """The parts a crawl's pages are crawled with: these, and the pipeline made of them;
    ``roots`` says under which directory the crawls may keep each option's files
    (:data:`~crawler.environment.DIRECTORY_ROOTS`: a worker's ``CRAWLER_CACHE_DIR`` and
    ``CRAWLER_FILES_DIR``, a ``--local`` crawl's ``--cache`` and ``--files``)."""
    stages = default_stages(
        stores=stores, limits=limits, lifetimes=lifetimes, handlers=handlers, renderer=renderer,
        roots=roots or {},
    )  # fmt: skip
    return WorkerParts(stores, limits, lifetimes, handlers, renderer, Pipeline(stages))
