"""The same crawl in Scrapy: follow every absolute link, as the crawler does by default.

Settings come from ``benchmarks/run.py`` (``-s``): same concurrency, no robots.txt,
no cookies, no retries.  The seeds are ``-a start=URL``, or ``-a seeds=FILE`` (one URL
a line, as the crawler's ``-i FILE``; ``benchmarks/polite_pace.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import scrapy


class SiteSpider(scrapy.Spider):  # type: ignore[misc,unused-ignore]
    name = "site"

    def __init__(self, start: str = "", seeds: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start] if start else Path(seeds).read_text().split()

    def parse(self, response: Any) -> Any:
        for href in response.css("a::attr(href)").getall():
            if href.startswith(("http://", "https://")):
                yield response.follow(href, callback=self.parse)
