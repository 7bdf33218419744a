"""``--recrawl-from``: conditional requests and unchanged pages, :class:`RecrawlStage`."""

from __future__ import annotations

import logging
from typing import Literal

from crawler import outcomes
from crawler.fetching import Fetched
from crawler.frontier import recrawl
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.stores import StorePool

logger = logging.getLogger(__name__)


class RecrawlStage(Stage):
    """Ask with what an earlier crawl saw of the page (its validators), and take a
    ``304`` answer as the page unchanged: not downloaded again, its earlier links are
    followed.  Every record holds the page's validators, for a later recrawl.

    Parameters:
      pool(StorePool): The store that holds what the earlier crawl saw.
    """

    def __init__(self, pool: StorePool) -> None:
        self.pool = pool

    def before_request(self, visit: PageVisit) -> None:
        if not visit.crawl_options.recrawl or visit.key is not None:
            return  # a keyed request (a POST...) is not the page the earlier crawl saw
        with self.pool.reserve() as client:  # none while the store holds none: fetched in full
            visit.earlier = recrawl.earlier_of(client, visit.crawl_options.crawl_id, visit.url)
        visit.conditions = None if visit.earlier is None else visit.earlier.conditions()

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        visit.unchanged = recrawl.unchanged(visit.earlier, fetched.response.status_code)
        if visit.unchanged is None:
            return
        logger.info("URL %r is unchanged since the earlier crawl.", fetched.response.url)
        visit.anchors = list(visit.unchanged.links)
        if visit.keeper is not None:  # --warc: a revisit record of the earlier capture
            capture = visit.unchanged.capture
            where = None if capture is None else (capture.record_id, capture.date)
            digest = visit.unchanged.payload_digest
            visit.stored = visit.keeper.not_modified(fetched, digest, where)

    def on_record(self, visit: PageVisit) -> None:
        record, earlier, unchanged = visit.record, visit.earlier, visit.unchanged is not None
        field: Literal["etag", "last_modified"]
        for field, header, before in (
            ("etag", "ETag", earlier and earlier.etag),
            ("last_modified", "Last-Modified", earlier and earlier.last_modified),
        ):  # the validators a recrawl asks with
            value = visit.response.headers.get(header) or (before if unchanged else None)
            if value:
                record[field] = value
        if visit.unchanged is not None:
            record["outcome"] = outcomes.UNCHANGED
            if visit.unchanged.payload_digest and visit.stored is None:
                record["payload_digest"] = visit.unchanged.payload_digest
