"""``--render``: the page as headless Chromium renders it, :class:`RenderStage`; with
``--render auto`` only the pages that need it (:mod:`crawler.rendering.adaptive`)."""

from __future__ import annotations

import random
import time

from crawler import outcomes
from crawler.environment import Lifetimes
from crawler.frontier import claims, politeness
from crawler.handlers import Handlers, page_of, with_enqueued
from crawler.links.cleaning import clean_href
from crawler.links.extraction import html_links
from crawler.option_rules import RENDER_AUTO
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.rendering import Renderer, adaptive, job_of, time_limit_ends
from crawler.stores import StorePool


class RenderStage(Stage):
    """Render an HTML page once its body is read (its host's rules hold for the browser
    too: each request the browser makes waits for its host's turn, its rate, its
    ``--auto-throttle`` delay and a ``--max-per-host`` place, as the crawl's own do:
    :class:`~crawler.frontier.politeness.BrowserPace`), in time for its handler within
    the actor's time limit: ``visit.rendered``, whose DOM the handler is given and whose
    links are followed.  With ``--warc`` its DOM is kept as a ``conversion`` record.

    With ``--render auto``, before the request: what the crawl knows of the page's kind
    (:func:`~crawler.rendering.adaptive.page_kind`) says whether it is rendered; a page
    of a kind not known yet is a sample, or waits in the broker while its kind's
    samples are rendered (``deferred``).  Once the page is read, a page of a static kind
    is rendered still when the page itself says it needs a browser; a sample's (or a
    check's) rendered links are compared with the static page's, and its kind learns
    from them.  The record says whether the page was rendered and why.

    Parameters:
      renderer(Renderer): The worker's browser, started by the first page that asks.
      handlers(Handlers): The page handlers (how long the page's handler may take).
      pool(StorePool): The store of what the crawl learnt of its kinds of pages.
      lifetimes(Lifetimes): How long that lives (the crawl's grace).
    """

    def __init__(
        self, renderer: Renderer, handlers: Handlers, pool: StorePool, lifetimes: Lifetimes
    ) -> None:
        self.renderer, self.handlers = renderer, handlers
        self.pool, self.lifetimes = pool, lifetimes

    def before_request(self, visit: PageVisit) -> None:
        options = visit.crawl_options
        if options.render != RENDER_AUTO:
            return
        visit.page_kind = kind = adaptive.page_kind(visit.url, visit.label)
        crawl_id = options.crawl_id or "-"
        with self.pool.reserve() as client:
            verdict = adaptive.verdict_of(client, crawl_id, kind)
            if verdict == adaptive.NEEDS:
                visit.render_choice = adaptive.Choice(True, adaptive.KIND_NEEDS)
            elif verdict == adaptive.STATIC:
                check = adaptive.checked_now(client, crawl_id, kind, self.lifetimes.grace)
                visit.render_choice = (
                    adaptive.Choice(True, adaptive.CHECK, compare=True)
                    if check
                    else adaptive.Choice(False, adaptive.KIND_STATIC)
                )
            else:
                visit.render_sample = adaptive.take_sample(client, crawl_id, kind)
                if visit.render_sample is None:  # its kind's samples are being rendered
                    wait = random.randint(*adaptive.SAMPLE_WAIT_MS)
                    turn = visit.message.options.get("turn")  # a host's turn it took: kept
                    unsent = visit.links is not None and visit.links.unsent
                    claims.defer(visit.actor.broker, visit.message, wait, turn, unsent=unsent)
                    visit.skipped = outcomes.DEFERRED
                    return
                visit.render_choice = adaptive.Choice(True, adaptive.SAMPLE, compare=True)

    def on_page(self, visit: PageVisit) -> None:
        options, fetched = visit.crawl_options, visit.fetched
        if not options.render or fetched is None or visit.body is None:
            return
        choice = visit.render_choice
        if choice is not None and not choice.render:
            signal = adaptive.page_signal(visit.body)
            if signal is None:
                return
            visit.render_choice = choice = adaptive.Choice(True, signal, compare=True)
        seconds = 0.0
        if options.handler is not None:
            seconds = self.handlers.timeout_for(
                options.handler_timeout, visit.bounds.fetch_deadline
            )
        assert visit.session is not None
        pace = politeness.BrowserPace(self.pool, options, visit.bounds.max_backoff)
        job = job_of(fetched, visit.body, visit.session, options, visit.bounds, seconds, pace)
        try:
            visit.rendered = self.renderer.render(job)
        except BaseException:
            self.on_end(visit)  # a sample that failed: its place for another page of its kind
            raise
        if visit.keeper is not None and visit.stored is not None:
            visit.keeper.rendered(visit.stored, fetched.response.url, visit.rendered.html)
        if choice is not None and choice.compare:
            response = visit.response
            content_type = response.headers.get("Content-Type")
            static = html_links(visit.body, response.url, content_type)
            rendered = [clean_href(link) for link in visit.rendered.links]
            visit.render_new_links = len(adaptive.new_links(static, rendered))

    def _learn(self, visit: PageVisit, kind: str) -> None:
        """A sample's or check's kind learns what rendering it brought: links the static
        page lacks, and with a handler, the items and requests its handler made of the
        rendered page beyond those it makes of the static one (run again on that, its
        items through no pipeline: :func:`_more_from_handler`)."""
        more = (visit.render_new_links or 0) + self._more_from_handler(visit)
        with self.pool.reserve() as client:
            crawl_id = visit.crawl_options.crawl_id or "-"
            adaptive.learn(client, crawl_id, kind, more, self.lifetimes.grace)

    def _more_from_handler(self, visit: PageVisit) -> int:
        """The items and requests the handler made of the rendered page beyond those it
        makes of the page as fetched (``render_new_items`` in the record)."""
        handled = visit.handled
        if visit.handler is None or handled is None or visit.body is None:
            return 0
        page = page_of(visit.url, visit.response, visit.body, visit.label, visit.data)
        seconds = self.handlers.timeout_for(
            visit.crawl_options.handler_timeout, visit.bounds.fetch_deadline
        )
        ends = time_limit_ends()
        if handled.error is not None or (ends is not None and ends - time.monotonic() < seconds):
            return 0  # the actor's time limit leaves no second run: links alone compared
        static = with_enqueued(self.handlers.run(visit.handler, page, seconds), page)
        if static.error is not None:  # what it makes of the static page is not known
            return 0
        more = max(0, len(handled.items) - len(static.items))
        more += max(0, len(handled.follow) - len(static.follow))
        visit.record["render_new_items"] = more
        return more

    def on_record(self, visit: PageVisit) -> None:
        if visit.rendered is not None:
            visit.record["rendered"] = True
            visit.record["render_ms"] = round(visit.rendered.ms, 1)
            visit.record["render_requests"] = visit.rendered.requests
        choice = visit.render_choice
        if choice is not None:  # --render auto: whether, and why
            visit.record["rendered"] = visit.rendered is not None
            visit.record["render_reason"] = choice.reason
            visit.record["page_kind"] = visit.page_kind or ""
            if visit.render_new_links is not None:
                visit.record["render_new_links"] = visit.render_new_links
                if visit.page_kind is not None:  # a sample's or a check's: its kind learns
                    self._learn(visit, visit.page_kind)

    def on_end(self, visit: PageVisit) -> None:
        if visit.render_sample is not None:  # the sample's place, for the next one
            with self.pool.reserve() as client:
                adaptive.give_back(client, visit.render_sample)
            visit.render_sample = None
