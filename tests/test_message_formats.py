"""Two actors on the crawler's queue, and the format a message says it is in.

Pages are ``crawl`` messages, sitemaps (``--sitemaps``) ``crawl_sitemap`` messages; both
carry ``format`` 2 in their options.  A worker still acts on a message of format 1 (what a
seeder of the release before sends: a ``crawl`` message naming a sitemap with ``sitemap``
and ``listed``) as it was meant, and refuses a message of a format newer than its own with
one clear line and a dead letter.  Real actor, real worker threads, real Memcached, on a
StubBroker; then real ``dramatiq crawler.example`` workers on RabbitMQ, with ``--replay``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from collections import Counter
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Middleware

from crawler import example, messages
from crawler.brokers import QUEUE
from crawler.environment import Lifetimes
from crawler.errors import InvalidMessage
from crawler.frontier import claims, scope
from crawler.stores.memcached import MemcachedClient
from tests import faults
from tests.site_server import Page, SiteServer, html
from tests.support import FAST_FAILURES, wait_until
from tests.workers import PROJECT_ROOT, WorkerProcesses, dead_letters, environment, seed


def urlset(*urls: str) -> Page:
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    body = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    return Page(body.encode(), content_type="application/xml")


class Processed(Middleware):
    """Each message processed: its actor, its format option, its URL and its record."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, str, Any]] = []

    def after_process_message(
        self, broker: dramatiq.Broker, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        record = result if exception is None else exception
        self.seen.append(
            (message.actor_name, message.options.get("format"), message.args[0], record)
        )


@pytest.fixture
def processed(stub_broker: StubBroker) -> Processed:
    middleware = Processed()
    stub_broker.add_middleware(middleware)
    return middleware


def crawl_message(url: str, kwargs: dict[str, Any], **options: Any) -> dramatiq.Message[Any]:
    """A ``crawl`` message as another program sends it: no format unless given."""
    return dramatiq.Message(
        queue_name=QUEUE, actor_name="crawl", args=(url,), kwargs=kwargs, options=options
    )


def run(broker: StubBroker, worker: dramatiq.Worker, *sent: dramatiq.Message[Any]) -> None:
    for message in sent:
        broker.enqueue(message)
    broker.join(QUEUE, fail_fast=False)
    worker.join()


def test_a_format_1_crawl_message_naming_a_sitemap_is_read_as_one_and_its_pages_crawled(
    site: SiteServer, stub_broker: StubBroker, stub_worker: dramatiq.Worker, processed: Processed
) -> None:
    site.pages["/robots.txt"] = Page(
        f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n".encode(), content_type="text/plain"
    )
    site.pages["/sitemap.xml"] = urlset(site.url("/a.html"), site.url("/b.html"))
    site.pages["/a.html"] = site.pages["/b.html"] = site.pages["/c.html"] = html()
    options = {"crawl_id": f"format-1-{uuid.uuid4().hex}"}
    robots = site.url("/robots.txt")
    part = {"pages": [site.url("/c.html")], "sitemaps": []}

    # What the seeder of the release before sends: robots.txt as a crawl message with
    # sitemap=1, and a part of a long sitemap as one with listed.
    run(
        stub_broker,
        stub_worker,
        crawl_message(robots, {"options": options, "sitemap": 1}),
        crawl_message(
            site.url("/sitemap.xml#part-1"), {"options": options, "sitemap": 2, "listed": part}
        ),
    )

    assert site.fetch_counts() == Counter(
        {"/robots.txt": 1, "/sitemap.xml": 1, "/a.html": 1, "/b.html": 1, "/c.html": 1}
    )
    seen = {(actor, version, url): record for actor, version, url, record in processed.seen}
    assert seen[("crawl", None, robots)]["sitemaps"] == 1  # read as a sitemap: its record
    assert seen[("crawl", None, site.url("/sitemap.xml#part-1"))]["links"] == [site.url("/c.html")]
    # What it sent is in this release's format: the sitemap to its actor, pages to crawl.
    assert seen[("crawl_sitemap", 2, site.url("/sitemap.xml"))]["outcome"] == "sitemap"
    for page in ("/a.html", "/b.html", "/c.html"):
        assert seen[("crawl", 2, site.url(page))]["status"] == 200
    assert len(processed.seen) == 6 and stub_broker.dead_letters == []


def test_a_format_1_page_message_is_crawled_as_before(
    site: SiteServer, stub_broker: StubBroker, stub_worker: dramatiq.Worker, processed: Processed
) -> None:
    site.pages["/p.html"] = html()
    url = site.url("/p.html")

    run(stub_broker, stub_worker, crawl_message(url, {"depth": 1, "sitemap": 0, "listed": None}))

    assert site.fetch_counts() == Counter({"/p.html": 1})
    assert [(actor, record["outcome"]) for actor, _, _, record in processed.seen] == [
        ("crawl", "crawled")
    ]


@pytest.mark.parametrize("version", [5, "2", True, None, 0])
def test_a_message_of_a_format_this_worker_does_not_read_is_dead_lettered_with_one_line(
    version: Any,
    site: SiteServer,
    stub_broker: StubBroker,
    stub_worker: dramatiq.Worker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    site.pages["/p.html"] = html()
    url = site.url("/p.html")
    caplog.set_level(logging.INFO)

    run(stub_broker, stub_worker, crawl_message(url, {}, format=version))

    assert site.fetch_counts() == Counter()
    assert len(stub_broker.dead_letters) == 1
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [
        f"Giving up on URL {url!r}: message format {version!r} is not one this worker reads"
        " (1 to 4): a newer seeder's? Upgrade the workers, then --replay the crawl."
    ], said


def test_new_messages_carry_the_format_and_a_sitemap_goes_to_its_own_actor(
    stub_broker: StubBroker, memcached: MemcachedClient
) -> None:
    crawl_id = f"send-{uuid.uuid4().hex}"
    page, sitemap = "http://127.0.0.1:1/same", "http://127.0.0.1:1/same"
    sent = [
        *claims.send_claimed(
            memcached, example.crawl, "p", [page], {"depth": 1}, crawl_id, Lifetimes()
        ),
        *claims.send_claimed(
            memcached,
            example.crawl,
            "p",
            [sitemap],
            {"sitemap": 2},
            crawl_id,
            Lifetimes(),
            sitemaps=True,
        ),
    ]

    queue = stub_broker.queues[QUEUE]
    queued = [dramatiq.Message.decode(queue.get_nowait()) for _ in range(queue.qsize())]
    # A page and a sitemap of the same URL: two claims, two messages, two actors.
    assert [m.message_id for m in queued] == sent and len(sent) == 2
    assert [(m.actor_name, m.args, m.options["format"]) for m in queued] == [
        ("crawl", (page,), scope.PLAIN_FORMAT),
        ("crawl_sitemap", (sitemap,), scope.PLAIN_FORMAT),
    ]
    assert [claims.claim_name_of(m, page) for m in queued] == [page, claims.SITEMAP_MARK + page]
    assert {m.queue_name for m in queued} == {QUEUE} == {example.crawl_sitemap.queue_name}


def test_each_actor_checks_its_own_arguments_and_replay_checks_as_workers_do(
    stub_broker: StubBroker,
) -> None:
    url = "http://127.0.0.1:9/sitemap.xml"
    with pytest.raises(InvalidMessage, match="sitemap must be a whole number from 1 to 4, got 0"):
        example.crawl_sitemap(url, sitemap=0)
    with pytest.raises(InvalidMessage, match="unexpected keyword argument 'sitemap'"):
        example.crawl(url, sitemap=1)  # type: ignore[call-arg]

    def check(actor: str, kwargs: dict[str, Any], **options: Any) -> None:
        messages.check_message(
            stub_broker,
            dramatiq.Message(
                queue_name=QUEUE, actor_name=actor, args=(url,), kwargs=kwargs, options=options
            ),
        )

    check("crawl", {"sitemap": 2, "listed": None})  # format 1: crawl named sitemaps
    check("crawl_sitemap", {"sitemap": 2}, format=2)
    check("crawl", {"depth": 1}, format=2)
    with pytest.raises(InvalidMessage, match="sitemap must be a whole number from 0 to 4, got 9"):
        check("crawl", {"sitemap": 9})
    with pytest.raises(InvalidMessage, match="unexpected keyword argument 'sitemap'"):
        check("crawl", {"sitemap": 2}, format=2)
    check("crawl", {"depth": 1, "label": "item", "data": {"a": 1}}, format=3)
    check("crawl", {"depth": 1, "request": {"method": "POST", "key": "k"}, "jar": 2}, format=4)
    with pytest.raises(InvalidMessage, match="message format 5 is not one this worker reads"):
        check("crawl_sitemap", {"sitemap": 2}, format=5)


#: A message's attempts: the first try and max_retries=3 retries.
ATTEMPTS = 4
SENDER = """\
import json, sys
from crawler.example import crawl, crawl_sitemap
actors = {"crawl": crawl, "crawl_sitemap": crawl_sitemap}
for actor, args, kwargs, options in json.load(sys.stdin):
    actors[actor].send_with_options(args=args, kwargs=kwargs, **options)
"""


def test_real_workers_read_both_formats_and_replay_keeps_each_message_as_it_was(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    """On RabbitMQ: a format-1 ``crawl`` message naming a sitemap and a ``crawl_sitemap``
    message, both dead-lettered while their sitemaps' server is down (503, every
    attempt), are replayed once it answers and read; a message of format 5 stays a dead
    letter.  (A missing sitemap, a 404, is an answer: recorded, not dead-lettered.)"""
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    options = {"crawl_id": f"formats-{uuid.uuid4().hex}"}
    site.pages["/one.xml"] = urlset(site.url("/a.html"))
    for page in ("/a.html", "/b.html", "/c.html", "/p.html"):
        site.pages[page] = html()
    for path, listed in (("/gone-1.xml", "/b.html"), ("/gone-2.xml", "/c.html")):
        site.behaviors[path] = faults.failing_then(  # down for the crawl's four attempts
            urlset(site.url(listed)), failures=ATTEMPTS, fail=faults.status(503)
        )
    sent = [
        ("crawl", [site.url("/one.xml")], {"options": options, "sitemap": 2}, {}),
        ("crawl", [site.url("/gone-1.xml")], {"options": options, "sitemap": 2}, {}),
        (
            "crawl_sitemap",
            [site.url("/gone-2.xml")],
            {"options": options, "sitemap": 2},
            {"format": 2},
        ),
        ("crawl", [site.url("/p.html")], {"options": options}, {"format": 5}),
    ]
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        subprocess.run(
            [sys.executable, "-c", SENDER], input=json.dumps(sent), cwd=PROJECT_ROOT, env=env,
            check=True, text=True, timeout=60,
        )  # fmt: skip
        workers.wait_until(
            lambda: workers.count("Giving up on URL") == 3 and workers.logged_any("Done crawling")
        )
        # The third is logged as given up a moment before the broker holds it dead.
        wait_until(lambda: dead_letters(env) == 3, timeout=10)
        replay = seed(env, "--replay", options["crawl_id"])
        workers.wait_until(lambda: workers.count("Done crawling") == 3)
    finally:
        assert workers.stop() == 0

    assert "not sent again: workers refuse it (message format 5 is not one" in replay.stdout
    assert "2 dead-lettered URL(s)" in replay.stdout, replay.stdout + replay.stderr
    assert dead_letters(env) == 1
    counts = site.fetch_counts()
    assert counts == Counter(
        {
            "/one.xml": 1,
            "/a.html": 1,
            "/gone-1.xml": ATTEMPTS + 1,
            "/b.html": 1,
            "/gone-2.xml": ATTEMPTS + 1,
            "/c.html": 1,
        }
    )
    log = "\n".join(workers.lines)
    assert "Traceback" not in log and "CRITICAL" not in log, workers.tracebacks()
    assert workers.count("Done reading sitemap") == 3
