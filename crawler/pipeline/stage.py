"""The base of every stage of the page pipeline: :class:`Stage`, whose hooks do nothing."""

from __future__ import annotations

from crawler.fetching import Fetched
from crawler.pipeline.visit import PageVisit


class Stage:
    """A part of a page's trip through the ``crawl`` actor, as a Dramatiq middleware is a
    part of a message's trip through a worker.  Each hook is given the page's
    :class:`PageVisit` and adds what the stage learnt to it; the default hooks do nothing,
    so a stage overrides only the steps it takes part in.

    A stage that decides the page is not to be fetched sets ``visit.skipped`` (to the
    outcome its record says) in :meth:`before_request`; the stages after it are not asked.
    An exception a hook raises fails the page as any failure of the actor does (a retry,
    or the URL given up).
    """

    def before_claim(self, visit: PageVisit) -> None:
        """Before the message claims its URL: check what the message asks of this worker."""

    def before_request(self, visit: PageVisit) -> None:
        """Once the URL is the message's (``visit.links`` sends its links), before the
        request: set ``visit.skipped`` for a page not to fetch."""

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        """Once the response's headers are in (``fetched``), its body not read yet."""

    def on_page(self, visit: PageVisit) -> None:
        """An HTML page whose body is read (``visit.body``), before its anchors are found."""

    def on_links(self, visit: PageVisit) -> None:
        """Once the page's anchors are found (``visit.anchors``; None for a page that is
        not HTML), before the links to follow are sent."""

    def on_record(self, visit: PageVisit) -> None:
        """Add this stage's fields to the record of a fetched page (``visit.record``)."""

    def on_end(self, visit: PageVisit) -> None:
        """Once the visit ends, fetched or skipped (not when the actor raised): give
        back what the stage holds for the page."""
