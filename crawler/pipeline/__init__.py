"""The page pipeline: what a page goes through in the ``crawl`` actor besides upstream's
four steps (claim the URL, fetch it, find its anchors, send them).

Every feature around those steps is a :class:`Stage`, one a module, and the stages'
order is one list, :func:`default_stages`, as Dramatiq's middleware order is
``default_middleware``.  The worker's ``crawl`` actor runs its hooks through a
:class:`Pipeline`; ``--local`` and the API run that same actor, so the same list serves
them all.  A new feature is a new stage in the list, not a new branch in the actor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import requests

from crawler import records
from crawler.environment import Lifetimes, Limits
from crawler.fetching import Fetched
from crawler.frontier import claims
from crawler.handlers import Handlers
from crawler.pipeline.budget import BudgetStage
from crawler.pipeline.cache import CacheStage
from crawler.pipeline.content import ContentStage
from crawler.pipeline.cookies import CookieStage
from crawler.pipeline.files import FilesStage
from crawler.pipeline.handler import HandlerStage
from crawler.pipeline.politeness import PolitenessStage
from crawler.pipeline.record import RecordStage
from crawler.pipeline.recrawl import RecrawlStage
from crawler.pipeline.render import RenderStage
from crawler.pipeline.scope import ScopeStage
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.pipeline.warc import WarcStage
from crawler.records import Record
from crawler.rendering import Renderer
from crawler.stores import Stores

__all__ = [
    "BudgetStage",
    "CacheStage",
    "ContentStage",
    "CookieStage",
    "FilesStage",
    "HandlerStage",
    "PageVisit",
    "Pipeline",
    "PolitenessStage",
    "RecordStage",
    "RecrawlStage",
    "RenderStage",
    "ScopeStage",
    "Stage",
    "WarcStage",
    "default_stages",
]


def default_stages(
    *,
    stores: Stores,
    limits: Limits,
    lifetimes: Lifetimes,
    handlers: Handlers,
    renderer: Renderer,
    roots: Mapping[str, Path | None] | None = None,
) -> list[Stage]:
    """The stages of a worker's pipeline, in the order their hooks run.

    Each hook runs down this one list, and the order follows from what each stage needs
    of the ones before it:

    * the record comes first, so that every stage after it adds its fields to a page's
      record (the fields are then put in one order, :func:`crawler.records.in_order`);
    * the page budget before robots.txt and the host's turn: a page over budget neither
      asks robots.txt nor waits for its host;
    * the crawl's shared cookies once the page is to be fetched (none loaded for a
      page deferred), and before the scope, whose links carry their version;
    * recrawl before WARC: its earlier validators make the request conditional, and a
      ``304`` is not downloaded again (WARC keeps no body of it), its ``unchanged``
      outcome standing over WARC's revisit;
    * rendering before the host's turn, for ``--render auto`` defers a page while its
      kind's samples are rendered (none waits for its host's turn first); its render
      runs once the page is read, before the handler, which is given the rendered DOM;
    * the content (``--markdown``, ``--near-duplicates``) after rendering, whose DOM it
      reads, and before the handler and the scope: a near-duplicate skipped is given to
      no handler and its links are not followed; its Markdown is written with the
      record, which then knows where WARC kept the page;
    * the handler before WARC, so that a message wrong in both is told of its handler
      first; and before the scope, which keeps the handler's requests in scope as it
      does the page's links;
    * the files after the handler, whose items name them (a file's message is given
      to no handler), and before WARC, which reads a file's body as the handler's
      content; before the scope, which sends the files' requests;
    * the scope last: it makes the messages of the links to follow;
    * the cache anywhere: it chooses the crawl's cache before the claim, which the
      fetch then reads and fills (a cached hop is no request), and says in the record
      whether the page came from it; after the record, which its field joins.
    """
    return [
        RecordStage(),
        CacheStage((roots or {}).get("cache")),
        BudgetStage(stores, lifetimes),
        RenderStage(renderer, handlers, stores, lifetimes),
        PolitenessStage(stores, limits),
        CookieStage(stores, lifetimes),
        RecrawlStage(stores),
        ContentStage(stores, lifetimes, (roots or {}).get("markdown")),
        HandlerStage(handlers),
        FilesStage((roots or {}).get("files")),
        WarcStage(stores, limits, lifetimes),
        ScopeStage(),
    ]


class Pipeline:
    """Runs each hook of its stages, in their order, on one page's :class:`PageVisit`.

    Parameters:
      stages(Iterable[Stage]): The stages (:func:`default_stages`).
    """

    def __init__(self, stages: Iterable[Stage]) -> None:
        self.stages = list(stages)

    def before_claim(self, visit: PageVisit) -> PageVisit:
        for stage in self.stages:
            stage.before_claim(visit)
        return visit

    def before_request(
        self, visit: PageVisit, links: claims.Links, session: requests.Session
    ) -> bool:
        """Whether the page, whose URL the message claimed (``links`` sends its links),
        is to be fetched with ``session``: none of the stages set ``visit.skipped``
        (those after the one that did are not asked)."""
        visit.links, visit.session = links, session
        for stage in self.stages:
            stage.before_request(visit)
            if visit.skipped is not None:
                return False
        return True

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        visit.fetched = fetched
        for stage in self.stages:
            stage.after_response(visit, fetched)

    def on_page(self, visit: PageVisit) -> None:
        for stage in self.stages:
            stage.on_page(visit)

    def on_links(self, visit: PageVisit) -> None:
        for stage in self.stages:
            stage.on_links(visit)

    def on_record(self, visit: PageVisit) -> Record:
        """The page's record: what became of a page that was not fetched, else what each
        stage adds of it."""
        try:
            if visit.skipped is not None or visit.fetched is None:
                return records.skipped_record(visit.url, str(visit.skipped))
            for stage in self.stages:
                stage.on_record(visit)
            return records.in_order(visit.record)
        finally:
            for stage in self.stages:
                stage.on_end(visit)
