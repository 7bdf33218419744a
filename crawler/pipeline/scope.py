"""The links a page's crawl follows: :class:`ScopeStage`."""

from __future__ import annotations

from crawler.frontier.scope import child_arguments, page_links_to_follow, priority, report_dropped
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class ScopeStage(Stage):
    """Keep the page's links and its handler's requests that are in the crawl's scope
    (its domains, patterns, depth), drop and count the malformed ones, and give the
    links' messages their arguments and priority (``--breadth-first``)."""

    def on_links(self, visit: PageVisit) -> None:
        options, depth = visit.crawl_options, visit.depth
        visit.follow, visit.own, dropped = page_links_to_follow(
            visit.anchors or [], visit.asked, options, depth
        )
        visit.dropped_links = report_dropped(visit.url, dropped)
        public = visit.fetched is not None and visit.fetched.public
        visit.kwargs = child_arguments(depth, visit.options, via_public=public)  # no label nor data
        visit.priority = priority(depth + 1, options)

    def on_record(self, visit: PageVisit) -> None:
        if visit.dropped_links:
            visit.record["dropped_links"] = visit.dropped_links
