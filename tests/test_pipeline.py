"""The page pipeline: its stages' order, their hooks around the real ``crawl`` actor (on a
StubBroker, against a real Memcached and a real site), and the actor's own size."""

from __future__ import annotations

import ast
import inspect
import logging
from pathlib import Path
from typing import cast

import pytest
from dramatiq import Message
from dramatiq.brokers.stub import StubBroker

from crawler import example, outcomes
from crawler.brokers import QUEUE
from crawler.errors import Deferred
from crawler.fetching import Fetched
from crawler.pipeline import PageVisit, Pipeline, Stage
from crawler.records import PageRecord
from tests.site_server import Page, SiteServer, html

HOOKS = ["before_claim", "before_request", "after_response", "on_page", "on_links", "on_record"]


class Witnessed(PageRecord, total=False):
    """A record with the field the witness adds: a stage's new field is declared so."""

    #: How many anchors the page had (a field of this test's own).
    witnessed: int


class Witness(Stage):
    """A stage that notes each hook it is given, with the visit, and adds to the record."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, PageVisit]] = []

    def before_claim(self, visit: PageVisit) -> None:
        self.calls.append(("before_claim", visit))

    def before_request(self, visit: PageVisit) -> None:
        self.calls.append(("before_request", visit))

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        assert fetched is visit.fetched
        self.calls.append(("after_response", visit))

    def on_page(self, visit: PageVisit) -> None:
        assert visit.body is not None and visit.anchors is None  # read, links not found yet
        self.calls.append(("on_page", visit))

    def on_links(self, visit: PageVisit) -> None:
        self.calls.append(("on_links", visit))

    def on_record(self, visit: PageVisit) -> None:
        self.calls.append(("on_record", visit))
        cast(Witnessed, visit.record)["witnessed"] = len(visit.anchors or [])


class Skipping(Stage):
    def before_request(self, visit: PageVisit) -> None:
        visit.skipped = "not-today"


class Failing(Stage):
    def __init__(self, error: Exception) -> None:
        self.error = error

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        raise self.error


def sent_urls(broker: StubBroker) -> list[str]:
    queue = broker.queues[QUEUE]
    return [Message.decode(queue.get_nowait()).args[0] for _ in range(queue.qsize())]


@pytest.fixture
def stages(monkeypatch: pytest.MonkeyPatch) -> list[Stage]:
    """The worker's stages, as a list a test may add to for the length of the test."""
    own = list(example.parts.pipeline.stages)
    monkeypatch.setattr(example.parts.pipeline, "stages", own)
    return own


def test_the_default_stages_run_in_their_documented_order() -> None:
    names = [type(stage).__name__ for stage in example.parts.pipeline.stages]

    assert names == [
        "RecordStage", "CacheStage", "BudgetStage", "RenderStage", "PolitenessStage",
        "CookieStage", "RecrawlStage", "ContentStage", "HandlerStage", "FilesStage", "WarcStage",
        "ScopeStage",
    ]  # fmt: skip


def test_a_stage_is_given_each_hook_in_order_with_one_visit_and_adds_to_the_record(
    site: SiteServer, stub_broker: StubBroker, stages: list[Stage]
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html", "http://127.0.0.1:1/b.html")
    witness = Witness()
    stages.append(witness)

    record = example.crawl(site.url("/"))

    assert [hook for hook, _ in witness.calls] == HOOKS
    visits = {id(visit) for _, visit in witness.calls}
    assert len(visits) == 1
    visit = witness.calls[0][1]
    assert visit.url == site.url("/") and visit.sent == record["sent"]
    assert record["outcome"] == outcomes.CRAWLED and cast(Witnessed, record)["witnessed"] == 2
    assert list(record)[:3] == ["url", "outcome", "status"]  # the fields in their one order
    assert sent_urls(stub_broker) == ["http://127.0.0.1:1/a.html", "http://127.0.0.1:1/b.html"]


def test_a_page_that_is_not_html_is_not_given_to_on_page(
    site: SiteServer, stub_broker: StubBroker, stages: list[Stage]
) -> None:
    site.pages["/image.png"] = Page(b"\x89PNG", content_type="image/png")
    witness = Witness()
    stages.append(witness)

    record = example.crawl(site.url("/image.png"))

    assert [hook for hook, _ in witness.calls] == [h for h in HOOKS if h != "on_page"]
    assert record["outcome"] == outcomes.NOT_HTML and cast(Witnessed, record)["witnessed"] == 0


def test_a_page_a_stage_skips_is_not_fetched_and_the_stages_after_it_are_not_asked(
    site: SiteServer, stub_broker: StubBroker, stages: list[Stage]
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html")
    witness = Witness()
    stages[1:1] = [Skipping()]
    stages.append(witness)

    record = example.crawl(site.url("/"))

    assert record == {"url": site.url("/"), "outcome": "not-today"}
    assert [hook for hook, _ in witness.calls] == ["before_claim"]
    assert site.fetch_counts() == {}
    assert sent_urls(stub_broker) == []


def test_a_stage_that_fails_fails_the_page_as_any_failure_of_the_actor(
    site: SiteServer,
    stub_broker: StubBroker,
    stages: list[Stage],
    caplog: pytest.LogCaptureFixture,
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html")
    witness = Witness()
    stages[:0] = [Failing(RuntimeError("the stage broke"))]
    stages.append(witness)

    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="the stage broke"):
        example.crawl(site.url("/"))

    assert [hook for hook, _ in witness.calls] == ["before_claim", "before_request"]
    assert sent_urls(stub_broker) == []
    assert any("the stage broke" in message for message in caplog.messages)  # reported once


def test_a_stage_that_defers_the_page_makes_its_deferred_record(
    site: SiteServer, stub_broker: StubBroker, stages: list[Stage]
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html")
    stages[:0] = [Failing(Deferred("its server asked to wait"))]

    record = example.crawl(site.url("/"))

    assert record == {"url": site.url("/"), "outcome": outcomes.DEFERRED}
    assert sent_urls(stub_broker) == []


def test_a_pipeline_runs_each_hook_down_its_list() -> None:
    order: list[str] = []

    class Named(Stage):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_links(self, visit: PageVisit) -> None:
            order.append(self.name)

    pipeline = Pipeline([Named("first"), Named("second"), Named("third")])
    pipeline.on_links(cast(PageVisit, None))  # no stage here reads it

    assert order == ["first", "second", "third"]


def test_the_actor_keeps_upstream_size() -> None:
    source = Path(inspect.getfile(example))
    lines = source.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    crawl = next(
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "crawl"
    )
    body = crawl.body[1:] if isinstance(crawl.body[0], ast.Expr) else crawl.body  # no docstring
    assert body[-1].end_lineno is not None
    assert body[-1].end_lineno - body[0].lineno + 1 <= 30
    assert len(lines) <= 160
