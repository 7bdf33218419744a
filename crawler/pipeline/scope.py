"""The links a page's crawl follows: :class:`ScopeStage`."""

from __future__ import annotations

from crawler.frontier.scope import child_arguments, page_links_to_follow, priority, report_dropped
from crawler.handlers import Router
from crawler.option_rules import FOLLOW_HANDLERS
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class ScopeStage(Stage):
    """Keep the page's links and its handler's requests that are in the crawl's scope
    (its domains, patterns, depth), drop and count the malformed ones, and give the
    links' messages their arguments and priority (``--breadth-first``).

    With ``--follow handlers`` the page's own links are not followed, only its
    handler's requests.  A :class:`~crawler.handlers.Router` handler's
    :meth:`~crawler.handlers.Router.label_links` rules label the links followed."""

    def on_links(self, visit: PageVisit) -> None:
        options, depth, handler = visit.crawl_options, visit.depth, visit.handler
        anchors = [] if options.follow == FOLLOW_HANDLERS else visit.anchors or []
        labels = handler.link_label if isinstance(handler, Router) and handler.link_labels else None
        visit.follow, visit.own, dropped = page_links_to_follow(
            anchors, visit.asked, options, depth, labels, visit.message.message_id
        )
        visit.dropped_links = report_dropped(visit.url, dropped)
        public = visit.fetched is not None and visit.fetched.public
        visit.kwargs = child_arguments(depth, visit.options, via_public=public, jar=visit.jar)
        visit.priority = priority(depth + 1, options)

    def on_record(self, visit: PageVisit) -> None:
        if visit.dropped_links:
            visit.record["dropped_links"] = visit.dropped_links
