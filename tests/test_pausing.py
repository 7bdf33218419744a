"""``crawler pause ID`` / ``resume ID``: a paused crawl's messages wait in the broker,
unfetched and with their retries untouched, while other crawls go on."""

from __future__ import annotations

import time
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.environment import Lifetimes
from crawler.frontier import claims, counters
from crawler.middleware.recorder import Recorder
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, crawl_id_of, wait_for_crawl, wait_until
from tests.workers import WorkerProcesses, environment, seed

#: Seconds after ``pause`` returns by which no new fetch of the crawl may start: only
#: messages already past their claim check go on.
LAG = 0.5
#: Claims last 3 s here: the pause outlives them, and the journal answers; a fetch the
#: site holds while the test pauses the crawl stays well within them.
CLAIM_TTL = 3


def test_a_paused_crawl_s_message_is_put_back_unclaimed_with_a_growing_wait(
    store: Any, stub_broker: StubBroker
) -> None:
    url = "http://127.0.0.1:1/page.html"
    counters.start(store, "crawl-1", 1, 60)
    counters.pause(store, "crawl-1", 60)
    lifetimes = Lifetimes()
    assert claims.claim(store, url, "m-1", "crawl-1", lifetimes) == claims.PAUSED
    assert store.get(claims.url_hash(url, "crawl-1")) is None  # nothing claimed

    message = example.crawl.message(url)
    delayed = stub_broker.queues[f"{example.crawl.queue_name}.DQ"].queue
    for pauses, wait in enumerate([1000, 2000, 4000, 5000, 5000]):
        before = time.time() * 1000
        claims.put_back_paused(stub_broker, message, longest=5000)
        sent = dramatiq.Message.decode(delayed[-1])
        assert sent.message_id == message.message_id  # the same message: its claim holds
        assert sent.options["pauses"] == pauses + 1 and "retries" not in sent.options
        assert before + wait - 50 <= sent.options["eta"] <= time.time() * 1000 + wait
        message = sent

    counters.resume(store, "crawl-1")
    assert claims.claim(store, url, "m-1", "crawl-1", lifetimes) == claims.OWNED


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_paused_crawl_fetches_nothing_while_another_runs_then_ends_each_page_once(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, memcached: object
) -> None:
    # Answers held while the test pauses the crawl must not time out (and count a retry).
    failures = {**FAST_FAILURES, "CRAWLER_FETCH_DEADLINE": "8"}
    env = environment(
        **request.getfixturevalue(broker_env),
        **failures,
        CRAWLER_PAUSE_MAX_DELAY_MS="300",
        CRAWLER_CLAIM_TTL=str(CLAIM_TTL),
    )
    pages = 60
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    site.delay = 0.03
    site.hold_from = 6  # the crawl cannot finish before it is paused
    control = SiteServer().start()
    control.pages.update(generate_site(control.base_url, pages=30, links_per_page=5))
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        site.wait_for_requests(6)
        paused = seed(env, "--pause", crawl_id)
        paused_at = time.monotonic()
        site.release()
        status = seed(env, "--status", crawl_id)
        other = seed(env, control.url(page_path(0)), "--wait")
        # Paused longer than its claims live: its URLs' journal entries answer for them.
        wait_until(lambda: time.monotonic() > paused_at + 2 * CLAIM_TTL, timeout=10)
        resumed_at = time.monotonic()
        resumed = seed(env, "--resume", crawl_id)
        _, stderr = waiting.communicate(timeout=120)
        after = seed(env, "--status", crawl_id)
    finally:
        control.stop()
        assert workers.stop() == 0

    assert paused.returncode == 0 and paused.stdout.startswith(f"crawl {crawl_id} paused: ")
    assert f"crawl {crawl_id}: paused: " in status.stdout
    late = [r.path for r in site.requests if paused_at + LAG < r.time < resumed_at]
    assert late == []
    assert other.returncode == 0, other.stderr[-2000:]
    assert control.fetch_counts() == {page_path(i): 1 for i in range(30)}
    assert resumed.returncode == 0 and resumed.stdout.strip() == f"crawl {crawl_id} resumed"
    assert waiting.returncode == 0, stderr[-2000:]
    assert ", paused" in stderr  # the waiting seeder's progress line said so
    assert site.fetch_counts() == {page_path(i): 1 for i in range(pages)}
    assert f"crawl {crawl_id}: finished: " in after.stdout
    assert " 0 failed attempts retried," in after.stdout  # waiting used up no retry
    assert seed(env, "--pause", "0" * 32).returncode == 2


def test_a_paused_crawl_s_message_put_back_is_not_discovered_again(
    stub_broker: StubBroker,
) -> None:
    """``--local`` counts each URL discovered when its message is first sent (the
    Recorder's ``on_discover``); a paused crawl's message put back is that URL again,
    as a retry or a deferral is."""
    found: list[None] = []
    recorder = Recorder(
        on_record=lambda record, message: None, on_discover=lambda: found.append(None)
    )
    message = example.crawl.message("http://127.0.0.1:1/page.html")
    recorder.after_enqueue(stub_broker, message, None)
    assert len(found) == 1
    claims.put_back_paused(stub_broker, message, longest=5000)
    put_back = dramatiq.Message.decode(
        stub_broker.queues[f"{example.crawl.queue_name}.DQ"].queue[-1]
    )
    for again in (
        put_back,
        message.copy(options={"retries": 1}),
        message.copy(options={"deferrals": 1}),
    ):
        recorder.after_enqueue(stub_broker, again, 1000)
    assert len(found) == 1
