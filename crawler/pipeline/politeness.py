"""robots.txt, ``--max-rate``, ``--auto-throttle`` and ``--max-per-host``:
:class:`PolitenessStage`."""

from __future__ import annotations

from crawler.environment import Limits
from crawler.fetching import Fetched
from crawler.frontier import claims
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.stores import Stores


class PolitenessStage(Stage):
    """Ask robots.txt whether the page may be fetched, and wait for its host's turn:
    ``visit.turn``, held while it is fetched.  A page robots.txt disallows is skipped; one
    whose host has no turn for it soon is deferred (sent again a while later).

    Parameters:
      stores(Stores): The store of robots.txt files and of the hosts' rate limits.
      limits(Limits): The worker's bounds (how long a page waits for its turn).
    """

    def __init__(self, stores: Stores, limits: Limits) -> None:
        self.stores, self.limits = stores, limits

    def before_request(self, visit: PageVisit) -> None:
        assert visit.session is not None, "the actor gives the visit its session first"
        visit.turn, skipped = claims.turn_or_defer(
            self.stores, visit.actor.broker, visit.message, visit.session, visit.url,
            visit.crawl_options, self.limits, via_public=visit.via_public,
            unsent=visit.links is not None and visit.links.unsent,
        )  # fmt: skip
        if visit.turn is None:  # disallowed, or deferred
            visit.skipped = str(skipped)

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        if isinstance(visit.turn, claims.Turn):  # --auto-throttle: the server's latency
            visit.turn.host.answered(fetched.response.elapsed.total_seconds())
