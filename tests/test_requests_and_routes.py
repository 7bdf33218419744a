"""Labels and data travel: a handler's ``Request(url, label, data)`` goes in the message of
that URL (format 3), checked at the worker's boundary, and reaches the handler of the page
it leads to as ``page.label`` and ``page.data``; a :class:`~crawler.handlers.Router` picks
a handler by label; ``--handler-timeout`` bounds a crawl's handler.  Real sites, real
actor; ``--local``, the API, and real workers on RabbitMQ."""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Middleware

from crawler import example, messages
from crawler.api import Crawl
from crawler.brokers import QUEUE
from crawler.crawl_spec import BadValue
from crawler.crawl_spec import handler_timeout as handler_timeout_flag
from crawler.errors import InvalidMessage
from crawler.frontier import scope
from crawler.handlers import MAX_LABEL, MAX_REQUEST_BYTES, Handled, Handlers, Page, Request
from crawler.options import CrawlOptions, quoted
from tests.request_handlers import router
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer, html
from tests.support import FAST_FAILURES, read_records
from tests.workers import WorkerProcesses, environment, seed

HANDLER = "tests.request_handlers:router"


def listing_site(site: SiteServer) -> None:
    """``/start.html`` links plainly to the listing and to detail 1; the listing links
    to details 1 to 3 (anchors its handler also asks for, as ``item`` requests) and
    names detail 4 only relatively; each detail links plainly to a leaf."""
    site.pages["/start.html"] = html(site.url("/listing.html"), site.url("/detail/1.html"))
    details = "".join(
        f'<a class="detail" href="{site.url(f"/detail/{n}.html")}">{n}</a>\n' for n in (1, 2, 3)
    )
    details += '<a class="detail" href="detail/4.html">4</a>\n'
    site.pages["/listing.html"] = SitePage(f"<html><body>{details}</body></html>".encode())
    for n in (1, 2, 3, 4):
        site.pages[f"/detail/{n}.html"] = html(
            site.url(f"/leaf/{n}.html"), extra=f"<h1>Detail {n}</h1>"
        )
        site.pages[f"/leaf/{n}.html"] = html()


def expected_data(site: SiteServer) -> dict[str, Any]:
    listing = site.url("/listing.html")
    plain = {"kind": "other", "label": None, "data": None}
    return {
        site.url("/start.html"): plain,
        listing: {"kind": "listing"},
        # Linked plainly by the seed first: its first claim stands, fetched once.
        site.url("/detail/1.html"): plain,
        **{
            site.url(f"/detail/{n}.html"): {
                "kind": "item",
                "found_on": listing,
                "title": f"Detail {n}",
            }
            for n in (2, 3, 4)
        },
        # A labelled page's own links pass nothing on.
        **{site.url(f"/leaf/{n}.html"): plain for n in (1, 2, 3, 4)},
    }


def every_page_once(site: SiteServer) -> Counter[str]:
    paths = ["/start.html", "/listing.html"]
    paths += [f"/{kind}/{n}.html" for kind in ("detail", "leaf") for n in (1, 2, 3, 4)]
    return Counter(dict.fromkeys(paths, 1))


def test_a_local_crawl_routes_each_detail_page_by_its_label_with_its_data(
    site: SiteServer, tmp_path: Path
) -> None:
    listing_site(site)
    output = tmp_path / "records.jsonl"
    crawled = seed(
        environment(),
        site.url("/start.html"),
        "--local",
        "--handler",
        HANDLER,
        "--records",
        str(output),
    )

    assert crawled.returncode == 0, crawled.stderr[-3000:]
    records = {record["url"]: record for record in read_records(output)}
    assert {url: record.get("data") for url, record in records.items()} == expected_data(site)
    assert site.fetch_counts() == every_page_once(site)


def test_the_api_takes_a_router_object_as_its_handler(site: SiteServer) -> None:
    listing_site(site)
    records = list(Crawl([site.url("/start.html")], threads=2, handler=router))

    assert {record["url"]: record.get("data") for record in records} == expected_data(site)


def test_workers_carry_labels_and_data_in_the_messages_of_the_urls_they_lead_to(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES, CRAWLER_HANDLERS=HANDLER)
    listing_site(site)
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        crawled = seed(
            env, site.url("/start.html"), "--handler", HANDLER, "--wait", "--records", str(output)
        )
    finally:
        assert workers.stop() == 0

    assert crawled.returncode == 0, crawled.stderr[-3000:]
    records = {record["url"]: record for record in read_records(output)}
    assert {url: record.get("data") for url, record in records.items()} == expected_data(site)
    assert site.fetch_counts() == every_page_once(site)
    assert "Traceback" not in "\n".join(workers.lines)


def test_a_bad_label_or_oversized_data_refuses_that_request_alone() -> None:
    handlers = Handlers(timeout=5)
    page = Page("http://h/a.html", "http://h/a.html", 200, {}, b"<p>")

    def asking(request: Request) -> Handled:
        return Handled(data={"ok": True}, follow=[request, "c.html"], items=[{"n": 1}])

    too_big = {"x": "a" * MAX_REQUEST_BYTES}
    for request, error in (
        (Request("b.html", "x" * (MAX_LABEL + 1)), "label must be a string of 1 to 100"),
        (Request("b.html", ""), "label must be a string of 1 to 100"),
        (Request("b.html", "item", too_big), f"over {MAX_REQUEST_BYTES}"),
        (Request("b.html", "item", {"n": float("nan")}), "data is not strict JSON"),
    ):
        outcome = handlers.run(lambda p, r=request: asking(r), page)  # type: ignore[misc]
        assert outcome.error is None
        assert len(outcome.refused) == 1 and error in outcome.refused[0], outcome.refused
        assert outcome.refused[0].startswith("request-refused: 'b.html': ")
        # the rest of the page stands: its data, its items, its other request
        assert outcome.data == {"ok": True} and outcome.items == [{"n": 1}]
        assert outcome.follow == [Request("c.html")]
    fine = handlers.run(lambda p: asking(Request("b.html", "item", {"n": 1})), page)
    assert fine.error is None and fine.refused == []
    assert fine.follow == [Request("b.html", "item", {"n": 1}), Request("c.html")]


class Processed(Middleware):
    """Each message processed: its format option, its URL and its record (or error)."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, Any]] = []

    def after_process_message(
        self, broker: dramatiq.Broker, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        record = result if exception is None else exception
        self.seen.append((message.options.get("format"), message.args[0], record))


def crawl_message(url: str, kwargs: dict[str, Any], **options: Any) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name=QUEUE, actor_name="crawl", args=(url,), kwargs=kwargs, options=options
    )


def test_this_worker_reads_format_3_and_refuses_a_bad_label_or_data_in_one_line(
    site: SiteServer,
    stub_broker: StubBroker,
    stub_worker: dramatiq.Worker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(example.page_handlers._loaded, HANDLER, router)
    processed = Processed()
    stub_broker.add_middleware(processed)
    for n in range(6):
        site.pages[f"/{n}.html"] = html(extra=f"<h1>Page {n}</h1>")
    options = {"crawl_id": f"labels-{uuid.uuid4().hex}", "handler": HANDLER}
    caplog.set_level(logging.INFO)
    big = {"x": "a" * MAX_REQUEST_BYTES}
    sent = [
        crawl_message(
            site.url("/0.html"), {"options": options, "label": "item", "data": {"from": "x"}},
            format=3,
        ),
        crawl_message(site.url("/1.html"), {"options": options, "label": "x" * 101}, format=3),
        crawl_message(site.url("/2.html"), {"options": options, "data": [1]}, format=3),
        crawl_message(site.url("/3.html"), {"options": options, "data": big}, format=3),
        crawl_message(site.url("/4.html"), {"options": options, "label": 7}, format=3),
        crawl_message(site.url("/5.html"), {"options": options, "label": "item"}, format=5),
    ]  # fmt: skip
    for message in sent:
        stub_broker.enqueue(message)
    stub_broker.join(QUEUE, fail_fast=False)
    stub_worker.join()

    assert site.fetch_counts() == Counter({"/0.html": 1})  # the rest: refused before any fetch
    read = {url: record for _, url, record in processed.seen}
    assert read[site.url("/0.html")]["data"] == {
        "kind": "item",
        "found_on": "x",
        "title": "Page 0",
    }
    assert len(stub_broker.dead_letters) == 5
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    url = site.url
    assert sorted(said) == sorted(
        [
            f"Giving up on URL {url('/1.html')!r}: message arguments: label must be null or a"
            f" string of 1 to 100 characters, got {quoted('x' * 101)}.",
            f"Giving up on URL {url('/2.html')!r}: message arguments: data must be null or a"
            " JSON object, got [1].",
            f"Giving up on URL {url('/3.html')!r}: message arguments: label and data take"
            f" {len(json.dumps([None, big]))} bytes of JSON, over {MAX_REQUEST_BYTES}.",
            f"Giving up on URL {url('/4.html')!r}: message arguments: label must be null or a"
            " string of 1 to 100 characters, got 7.",
            f"Giving up on URL {url('/5.html')!r}: message format 5 is not one this worker"
            " reads (1 to 4): a newer seeder's? Upgrade the workers, then --replay the crawl.",
        ]
    ), said


def test_only_messages_carrying_a_label_or_data_are_of_format_3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = scope.message_of(example.crawl, "http://h/a.html", {"depth": 1}, None)
    labelled = scope.message_of(
        example.crawl, "http://h/a.html", {"depth": 1, "label": "item"}, None
    )
    assert plain.options["format"] == scope.PLAIN_FORMAT == 2
    assert labelled.options["format"] == scope.LABELLED_FORMAT == 3
    messages.format_of(labelled.options)  # this worker reads it
    # A worker of the release before reads 1 and 2 only: it refuses format 3 in one line.
    monkeypatch.setattr(messages, "FORMAT", 2)
    messages.format_of(plain.options)
    with pytest.raises(InvalidMessage, match="message format 3 is not one this worker reads"):
        messages.format_of(labelled.options)


def test_a_url_takes_its_first_request_s_label_and_data_and_anchors_carry_none() -> None:
    anchors = ["http://h/1.html", "http://h/2.html"]
    asked = [
        Request("http://h/2.html", "item", {"n": 2}),
        Request("http://h/2.html", "other", {"n": 3}),
        Request("http://h/3.html", None, {"n": 4}),
        Request("http://h/4.html"),
        Request("http://h:99999/bad", "item"),
    ]
    follow, own, dropped = scope.page_links_to_follow(anchors, asked, CrawlOptions(), 0)
    assert follow == ["http://h/1.html", "http://h/2.html", "http://h/3.html", "http://h/4.html"]
    assert own == {"http://h/2.html": {"label": "item", "data": {"n": 2}}, "http://h/3.html": {
        "data": {"n": 4}
    }}  # fmt: skip
    assert [link for link, _ in dropped] == ["http://h:99999/bad"]
    # Past --max-depth nothing is followed, labelled or not.
    assert scope.page_links_to_follow(anchors, asked, CrawlOptions(max_depth=1), 1)[:2] == (
        [],
        {},
    )


def test_handler_timeout_is_the_crawl_s_within_what_the_time_limit_leaves() -> None:
    handlers = Handlers(timeout=1.5)
    assert handlers.timeout_for(None, 8.0) == 1.5  # the worker's CRAWLER_HANDLER_TIMEOUT
    assert handlers.timeout_for(0.2, 8.0) == 0.2
    assert handlers.timeout_for(5.0, 8.0) == 1.5  # 10 s - 8 s - 0.5 s
    assert handlers.timeout_for(5.0, 3.0) == 5.0  # --timeout 3 leaves more
    assert handler_timeout_flag("2.5") == 2.5
    for bad in ("0", "10", "-1", "x", "nan"):
        with pytest.raises(BadValue, match="is not a number of seconds above 0, below 10"):
            handler_timeout_flag(bad)
    with pytest.raises(InvalidMessage, match="handler_timeout must be a number of seconds"):
        CrawlOptions.from_message({"handler_timeout": 11})


def test_a_handler_timeout_shorter_than_a_slow_handler_fails_that_step_only(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/start.html"] = html(site.url("/slow.html"), site.url("/quick.html"))
    site.pages["/slow.html"] = html(site.url("/after.html"))
    site.pages["/quick.html"] = site.pages["/after.html"] = html()
    output = tmp_path / "records.jsonl"
    crawled = seed(
        environment(),
        site.url("/start.html"),
        "--local",
        "--handler",
        HANDLER,
        "--handler-timeout",
        "0.3",
        "--records",
        str(output),
    )

    assert crawled.returncode == 0, crawled.stderr[-3000:]
    records = {record["url"]: record for record in read_records(output)}
    assert {url: r.get("handler_error") for url, r in records.items()} == {
        site.url("/start.html"): None,
        site.url("/slow.html"): "handler-failed: took longer than 0.3s",
        site.url("/quick.html"): None,
        site.url("/after.html"): None,  # the slow page's links followed all the same
    }
    assert records[site.url("/quick.html")]["data"] == {
        "kind": "other",
        "label": None,
        "data": None,
    }
    assert site.fetch_counts() == Counter(
        {"/start.html": 1, "/slow.html": 1, "/quick.html": 1, "/after.html": 1}
    )
