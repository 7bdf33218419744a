"""Dramatiq's web-crawler example, packaged and tested.

From Python: :class:`Crawl` runs a crawl in this process, :func:`seed` one for the
workers (:mod:`crawler.api`); page handlers get a :class:`Page` (:mod:`crawler.handlers`).
"""

from crawler.api import Crawl, CrawlError, WorkersCrawl, seed, status
from crawler.handlers import Handled, Page

__all__ = ["Crawl", "CrawlError", "Handled", "Page", "WorkersCrawl", "seed", "status"]
