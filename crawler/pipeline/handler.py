"""``--handler``: the user's page handler, its requests and its items, :class:`HandlerStage`."""

from __future__ import annotations

from crawler.handlers import Handlers, page_of, requests_followed, with_enqueued
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class HandlerStage(Stage):
    """Give an HTML page to the crawl's page handler (one this worker loaded, else the
    message is invalid) and take what it made of it: its data and items for the record,
    the requests it asks to follow besides the page's links (those it returned, and
    those its ``page.enqueue_links()`` added).

    Parameters:
      handlers(Handlers): The page handlers the worker loaded.
    """

    def __init__(self, handlers: Handlers) -> None:
        self.handlers = handlers

    def before_claim(self, visit: PageVisit) -> None:
        visit.handler = self.handlers.chosen(visit.crawl_options.handler)

    def on_page(self, visit: PageVisit) -> None:
        if visit.handler is None or visit.body is None:
            return
        dom = None if visit.rendered is None else visit.rendered.html  # --render's
        visit.page = page_of(visit.url, visit.response, visit.body, visit.label, visit.data, dom)

    def on_links(self, visit: PageVisit) -> None:
        if visit.handler is not None and visit.page is not None:
            options = visit.crawl_options
            seconds = self.handlers.timeout_for(
                options.handler_timeout, visit.bounds.fetch_deadline
            )
            handled = self.handlers.run(visit.handler, visit.page, seconds)
            visit.handled = with_enqueued(handled, visit.page)  # and its page.enqueue_links()
        visit.asked = requests_followed(visit.handled, visit.response.url)  # label and data

    def on_record(self, visit: PageVisit) -> None:
        handled = visit.handled
        if handled is None:
            return
        visit.record["data"] = handled.data
        if handled.items:  # for the crawl's item sink (--items)
            visit.record["items"] = handled.items
        if handled.error is not None:
            visit.record["handler_error"] = handled.error
