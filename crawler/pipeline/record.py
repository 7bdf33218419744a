"""The record every fetched page gets: :class:`RecordStage`."""

from __future__ import annotations

from crawler import records
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class RecordStage(Stage):
    """Start a fetched page's record with what every page has (its URL, outcome, status,
    links, depth, the messages sent, the fetch's time, its size); the stages after it
    add their own fields."""

    def on_record(self, visit: PageVisit) -> None:
        size = None if visit.body is None else len(visit.body)
        visit.page_record = records.page_record(
            visit.url, visit.response, visit.anchors, visit.depth, visit.sent, size
        )
