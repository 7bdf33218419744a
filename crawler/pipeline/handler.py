"""``--handler``: the user's page handler, its requests and its items, :class:`HandlerStage`."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crawler.fetching import Fetched, is_html
from crawler.handlers import Handler, Handlers, page_of, requests_followed, takes, with_enqueued
from crawler.items import pipelines
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit

logger = logging.getLogger(__name__)


def stages_of(handler: Handler | None) -> list[Stage]:
    """The user's own stages a crawl's handler brings (its ``stages``: a
    :class:`~crawler.handlers.Router`'s, or a function's attribute), run at the
    handler's place in the pipeline."""
    stages = getattr(handler, "stages", None) or []
    if not all(isinstance(stage, Stage) for stage in stages):
        raise TypeError("a handler's stages must be crawler.pipeline.Stage instances")
    return list(stages)


def _each(visit: PageVisit, hook: Callable[[Stage], None]) -> None:
    for stage in stages_of(visit.handler):
        hook(stage)
        if visit.skipped is not None:  # a stage of the user's skipped the page
            return


class HandlerStage(Stage):
    """Give an HTML page, or a response of a content type it asked for (a JSON API's),
    to the crawl's page handler (one this worker loaded, else the message is invalid),
    its items through the crawl's item pipelines (:mod:`crawler.items.pipelines`), and
    take what it made of it: its data and items for the record, the requests it
    asks to follow besides the page's links (those it returned or yielded, and those
    its ``page.enqueue_links()`` added).  A response it takes that is not HTML is a
    page crawled without links of its own (its body is read: ``visit.content``).

    The handler's own stages (:func:`stages_of`: a user's request and response hooks)
    run here: each hook of theirs before the handler's step of it, ``on_record`` after
    (the handler's data is in the record).

    Parameters:
      handlers(Handlers): The page handlers the worker loaded.
    """

    def __init__(self, handlers: Handlers) -> None:
        self.handlers = handlers

    def before_claim(self, visit: PageVisit) -> None:
        visit.handler = self.handlers.chosen(visit.crawl_options.handler)
        named = self.handlers.pipelines(visit.crawl_options.pipelines)  # else invalid
        visit.pipelines = pipelines.of_crawl(visit.handler, named)
        _each(visit, lambda stage: stage.before_claim(visit))

    def before_request(self, visit: PageVisit) -> None:
        _each(visit, lambda stage: stage.before_request(visit))

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        handler, response = visit.handler, fetched.response
        if handler is not None and visit.unchanged is None and not is_html(response):
            content_type = response.headers.get("Content-Type")
            visit.takes_content = takes(handler, visit.label, content_type)
        _each(visit, lambda stage: stage.after_response(visit, fetched))

    def on_page(self, visit: PageVisit) -> None:
        _each(visit, lambda stage: stage.on_page(visit))
        if visit.handler is None or visit.body is None:
            return
        dom = None if visit.rendered is None else visit.rendered.html  # --render's
        visit.page = page_of(visit.url, visit.response, visit.body, visit.label, visit.data, dom)

    def on_links(self, visit: PageVisit) -> None:
        if visit.content is not None:  # not HTML: given to the handler as it is
            visit.page = page_of(visit.url, visit.response, visit.content, visit.label, visit.data)
            visit.anchors = []  # crawled, its links the handler's requests
        if visit.handler is not None and visit.page is not None:
            options = visit.crawl_options
            seconds = self.handlers.timeout_for(
                options.handler_timeout, visit.bounds.fetch_deadline
            )
            handled = self.handlers.run(visit.handler, visit.page, seconds, visit.pipelines)
            visit.handled = with_enqueued(handled, visit.page)  # and its page.enqueue_links()
        base = visit.response.url if visit.page is None else visit.page.base  # <base href>
        visit.asked, refused = requests_followed(visit.handled, base)
        visit.refused = [*(visit.handled.refused if visit.handled else ()), *refused]
        for line in visit.refused:  # the rest of the page stands
            logger.warning("URL %r: its handler's %s", visit.url, line)
        for line in visit.handled.item_errors if visit.handled else ():  # the item stands
            logger.warning("URL %r: an item's %s", visit.url, line)
        _each(visit, lambda stage: stage.on_links(visit))

    def on_record(self, visit: PageVisit) -> None:
        handled = visit.handled
        if handled is not None:
            visit.record["data"] = handled.data
            if handled.items:  # for the crawl's item sink (--items)
                visit.record["items"] = handled.items
            if handled.error is not None:
                visit.record["handler_error"] = handled.error
            if handled.dropped:  # by the item pipelines
                visit.record["dropped_items"] = handled.dropped
            if handled.item_errors:
                visit.record["item_errors"] = handled.item_errors
        if visit.refused:
            visit.record["refused_requests"] = visit.refused
        _each(visit, lambda stage: stage.on_record(visit))
