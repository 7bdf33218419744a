"""``--cache``: responses kept on disk and given back to a later fetch, :class:`CacheStage`."""

from __future__ import annotations

from pathlib import Path

from crawler.environment import directory_under
from crawler.fetching.http_cache import HttpCache
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class CacheStage(Stage):
    """Give the fetch the crawl's cache (``visit.cache``), whose hops it takes from there
    or keeps there (:mod:`crawler.fetching.http_cache`), and say in the record of a page
    whose response came from it that it did (``cached``).

    Parameters:
      root(Path|None): The one directory under which crawls may name their cache (a
        worker's ``CRAWLER_CACHE_DIR``, a ``--local`` crawl's own ``--cache``); None:
        a message naming one is refused.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root

    def before_claim(self, visit: PageVisit) -> None:
        name = visit.crawl_options.cache
        visit.cache = None if name is None else HttpCache(directory_under("cache", self.root, name))

    def on_record(self, visit: PageVisit) -> None:
        if visit.fetched is not None and visit.fetched.cached:
            visit.record["cached"] = True
