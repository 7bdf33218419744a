"""Page handlers the benchmarks time (``--handler benchmarks.measuring.handlers:noop``)."""

from __future__ import annotations

from crawler.handlers import Page


def noop(page: Page) -> None:
    """Does nothing: what calling a handler costs, the page not parsed for it."""
