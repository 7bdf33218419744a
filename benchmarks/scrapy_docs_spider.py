"""The ``--follow-relative --same-domain`` crawl in Scrapy: a ``CrawlSpider`` whose
``LinkExtractor`` follows every link on the seed's host.

Settings come from ``benchmarks/run.py`` (``-s``): same concurrency, no robots.txt,
no cookies, no retries.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class DocsSpider(CrawlSpider):  # type: ignore[misc,unused-ignore]
    name = "docs"
    # Every link on the site: no file extension left out, as the crawler leaves none.
    rules = (Rule(LinkExtractor(deny_extensions=[]), callback="parse_page", follow=True),)

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        self.start_urls = [start]
        self.allowed_domains = [urlsplit(start).hostname]
        super().__init__(**kwargs)

    def parse_start_url(self, response: Any, **kwargs: Any) -> Any:
        return []

    def parse_page(self, response: Any) -> Any:
        return []
