"""``--render``: the page as headless Chromium renders it, :class:`RenderStage`."""

from __future__ import annotations

from crawler.handlers import Handlers
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.rendering import Renderer, job_of


class RenderStage(Stage):
    """Render an HTML page in the page's turn (its host's rules hold for the browser
    too) and in time for its handler within the actor's time limit: ``visit.rendered``,
    whose DOM the handler is given and whose links are followed.  With ``--warc`` its DOM
    is kept as a ``conversion`` record.

    Parameters:
      renderer(Renderer): The worker's browser, started by the first page that asks.
      handlers(Handlers): The page handlers (how long the page's handler may take).
    """

    def __init__(self, renderer: Renderer, handlers: Handlers) -> None:
        self.renderer, self.handlers = renderer, handlers

    def on_page(self, visit: PageVisit) -> None:
        options, fetched = visit.crawl_options, visit.fetched
        if not options.render or fetched is None or visit.body is None:
            return
        seconds = 0.0
        if options.handler is not None:
            seconds = self.handlers.timeout_for(
                options.handler_timeout, visit.bounds.fetch_deadline
            )
        assert visit.session is not None
        job = job_of(fetched, visit.body, visit.session, options, visit.bounds, seconds)
        visit.rendered = self.renderer.render(job)
        if visit.keeper is not None and visit.stored is not None:
            visit.keeper.rendered(visit.stored, fetched.response.url, visit.rendered.html)

    def on_record(self, visit: PageVisit) -> None:
        if visit.rendered is not None:
            visit.record["rendered"] = True
            visit.record["render_ms"] = round(visit.rendered.ms, 1)
