"""``--max-pages`` and ``--max-pages-per-host``: :class:`BudgetStage`."""

from __future__ import annotations

import logging

from crawler import outcomes
from crawler.environment import Lifetimes
from crawler.frontier import politeness
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.stores import StorePool

logger = logging.getLogger(__name__)


class BudgetStage(Stage):
    """Count a claimed page against its crawl's page budgets, on its message's first
    delivery only; skip it (``over-budget``) once one is spent.

    Parameters:
      pool(StorePool): The store the crawl's counts are in.
      lifetimes(Lifetimes): How long the crawl's counts live.
    """

    def __init__(self, pool: StorePool, lifetimes: Lifetimes) -> None:
        self.pool, self.lifetimes = pool, lifetimes

    def before_request(self, visit: PageVisit) -> None:
        first_delivery = visit.links is not None and visit.links.first_delivery
        with self.pool.reserve() as client:
            spent = politeness.over_budget(
                client, visit.crawl_options, visit.url, first_delivery, self.lifetimes.grace
            )
        if spent:
            # The user's own bound, counted in the summary: a line a URL only with -v.
            logger.info("Skipping URL %r since %s page budget is spent.", visit.url, spent)
            visit.skipped = outcomes.OVER_BUDGET
