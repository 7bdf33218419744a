"""A handler whose own stage adds a header to every request of its crawl (a request
hook), as a Scrapy downloader middleware's ``process_request`` does
(``tests/test_requests_with_bodies.py``)."""

from __future__ import annotations

from dataclasses import replace

from crawler.handlers import Page, Router
from crawler.pipeline import PageVisit, Stage


class SignRequests(Stage):
    def before_request(self, visit: PageVisit) -> None:
        visit.asking = replace(visit.asking, headers=(*visit.asking.headers, ("X-Signed", "yes")))


router = Router()
router.stages.append(SignRequests())


@router.default
def title(page: Page) -> dict[str, str]:
    return {"status": str(page.status)}
