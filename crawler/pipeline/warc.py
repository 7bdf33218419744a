"""``--warc``: every response kept in the crawl's WARC files, :class:`WarcStage`."""

from __future__ import annotations

from crawler import outcomes, records
from crawler.archiving import warc
from crawler.environment import Lifetimes, Limits
from crawler.fetching import Fetched
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.stores import Stores


class WarcStage(Stage):
    """Read the page's body (an HTML page's, a response's the handler takes, or any
    response's with ``--warc``) and keep
    the response in the crawl's WARC files: ``visit.body`` and ``visit.stored``.

    Parameters:
      stores(Stores): The WARC files, and the store of the payload digests seen.
      limits(Limits): The worker's bounds (the largest body read).
      lifetimes(Lifetimes): How long the crawl's digests live.
    """

    def __init__(self, stores: Stores, limits: Limits, lifetimes: Lifetimes) -> None:
        self.stores, self.limits, self.lifetimes = stores, limits, lifetimes

    def before_claim(self, visit: PageVisit) -> None:
        message, stores = visit.message, self.stores
        retries = message.options.get("retries", 0)
        allowed = message.options.get("max_retries", visit.actor.options["max_retries"])
        visit.keeper = warc.keeper_of(
            stores.warc_files, stores, (retries, allowed), visit.crawl_options.crawl_id,
            visit.crawl_options.warc, visit.options, self.lifetimes.grace,
        )  # fmt: skip

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        if visit.unchanged is not None:  # a 304 is not downloaded: the recrawl stage keeps it
            return
        wanted = visit.takes_content  # not HTML, but the handler takes it
        body, visit.stored = warc.read_page(fetched, self.limits, visit.keeper, wanted=wanted)
        if wanted:
            visit.content = body
        else:
            visit.body = body

    def on_record(self, visit: PageVisit) -> None:
        if visit.stored is None:
            return
        records.add_warc_fields(visit.record, visit.stored)
        if visit.stored.revisit and visit.unchanged is None:  # a 304 stays unchanged
            visit.record["outcome"] = outcomes.DUPLICATE_CONTENT
