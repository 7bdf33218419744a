"""The record every fetched page gets: :class:`RecordStage`."""

from __future__ import annotations

from crawler import records
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class RecordStage(Stage):
    """Start a fetched page's record with what every page has (its URL, outcome, status,
    links, depth, the messages sent, the fetch's time, its size; a handler's request's
    method and key); the stages after it add their own fields."""

    def on_record(self, visit: PageVisit) -> None:
        body = visit.body if visit.body is not None else visit.content  # a handler's JSON...
        size = None if body is None else len(body)
        visit.page_record = records.page_record(
            visit.url, visit.response, visit.anchors, visit.depth, visit.sent, size
        )
        if visit.asking.method != "GET":  # a handler's Request(method=...)
            visit.record["method"] = visit.asking.method
        if visit.key is not None:
            visit.record["request_key"] = visit.key
