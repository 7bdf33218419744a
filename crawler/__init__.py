"""Dramatiq's web-crawler example, packaged and tested.

From Python: :class:`Crawl` runs a crawl in this process, :func:`seed` one for the
workers (:mod:`crawler.api`); page handlers get a :class:`Page` and return data,
requests (:class:`Request`) to follow, items (:class:`Handled`) and files to download
(:class:`File`), one a label with a
:class:`Router` (:mod:`crawler.handlers`); item pipelines change or drop items
(:class:`DropItem`, :mod:`crawler.items.pipelines`).

The API is imported on first use of one of its names, so that a worker importing
``crawler.example`` loads the page pipeline only, never the seeder's stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crawler.handlers import File, Handled, Page, Request, Router
from crawler.items.pipelines import DropItem

if TYPE_CHECKING:
    from crawler.api import Crawl, CrawlError, WorkersCrawl, seed, status

__all__ = [
    "Crawl", "CrawlError", "DropItem", "File", "Handled", "Page", "Request", "Router",
    "WorkersCrawl",
    "seed", "status",
]  # fmt: skip

#: The names :mod:`crawler.api` gives, imported when first asked for.
_FROM_API = {"Crawl", "CrawlError", "WorkersCrawl", "seed", "status"}


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        return getattr(importlib.import_module("crawler.api"), name)
    raise AttributeError(f"module 'crawler' has no attribute {name!r}")
