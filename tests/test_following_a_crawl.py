"""Following a crawl of real workers: ``--wait``, ``--output``, ``--status`` and metrics."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from itertools import islice
from pathlib import Path
from typing import Any, cast

import dramatiq
import pytest

from crawler import example
from crawler.brokers import make_broker
from crawler.frontier.keep_alive import KeepAlive
from crawler.records import Record
from crawler.tracking import record_queue, seeder
from tests.site_server import SiteServer, generate_site, html, page_path
from tests.support import (
    FAST_FAILURES,
    crawl_id_of,
    metric,
    metrics_port,
    read_metrics,
    read_records,
    wait_for_crawl,
    wait_until,
    waited_crawl,
)
from tests.workers import WorkerProcesses, environment, queued_messages, seed

PAGES = 120


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_wait_returns_0_after_every_page_with_one_record_each_and_metrics_agree(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    dedup_env: dict[str, str],
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env),
        **dedup_env,
        **FAST_FAILURES,
        dramatiq_prom_db=str(tmp_path),
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=2, threads=4)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)), "--output", str(output))
        stdout, stderr = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, stderr
        # The crawl is over when --wait returns: every page was fetched by then.
        assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)}
        # The last message is acknowledged just after its record went out.
        wait_until(lambda: queued_messages(env) == 0, timeout=5)
        metrics = read_metrics(metrics_port(env))
        status = seed(env, "--status", crawl_id_of(stdout))
    finally:
        assert workers.stop() == 0

    records = read_records(output)
    assert sorted(r["url"] for r in records) == sorted(site.url(page_path(i)) for i in range(PAGES))
    assert all(len(r["links"]) == 5 for r in records)  # --output asks for the links
    assert f": {PAGES} pages fetched" in stdout and "0 failed." in stdout
    assert status.returncode == 0
    assert f": finished: {PAGES} pages fetched, " in status.stdout
    assert ", 0 failed;" in status.stdout and " 0 outstanding," in status.stdout
    assert metric(metrics, 'crawler_pages_total{outcome="crawled"}') == PAGES
    assert metric(metrics, "crawler_fetch_duration_seconds_count") == PAGES
    assert metric(metrics, "crawler_links_found_total") == PAGES * 5
    assert metric(metrics, "dramatiq_messages_total") >= PAGES


def test_wait_exits_1_and_names_the_page_that_always_fails(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    site.pages["/"] = html(site.url("/fine.html"), site.url("/broken.html"))
    site.pages["/fine.html"] = html()
    site.behaviors["/broken.html"] = lambda handler, nth: handler.send_error(500)
    output = tmp_path / "records.jsonl"
    waiting, stdout, _, _ = waited_crawl(env, site.url("/"), "--output", str(output))

    assert waiting.returncode == 1
    assert site.fetch_counts()["/broken.html"] == 4
    assert "2 pages fetched" in stdout and "1 failed." in stdout
    assert f"  failed: {site.url('/broken.html')}: HTTP 500" in stdout
    outcomes = {r["url"]: r["outcome"] for r in read_records(output)}
    assert outcomes[site.url("/broken.html")] == "failed"


def test_a_worker_killed_mid_crawl_still_gives_a_complete_duplicate_free_output(
    site: SiteServer, redis_env: dict[str, str], tmp_path: Path
) -> None:
    env = environment(**redis_env, **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    site.delay = 0.02
    output = tmp_path / "records.jsonl"
    doomed = WorkerProcesses(env, processes=1, threads=4)
    waiting = wait_for_crawl(env, site.url(page_path(0)), "--output", str(output))
    doomed.wait_until(lambda: doomed.count("Done crawling") >= 20)
    doomed.kill()
    fresh = WorkerProcesses(env, processes=1, threads=4)
    try:
        _, stderr = waiting.communicate(timeout=120)
    finally:
        assert fresh.stop() == 0

    assert waiting.returncode == 0, stderr
    urls = [r["url"] for r in read_records(output)]
    assert len(urls) == len(set(urls)) == PAGES
    assert set(site.fetch_counts()) == {page_path(i) for i in range(PAGES)}


def test_status_of_an_unknown_crawl_says_so() -> None:
    result = seed(environment(), "--status", "0" * 32)

    assert result.returncode == 2
    assert result.stderr.strip() == f"error: no crawl {'0' * 32} is known to Memcached"


class ReaderOfOneBatch:
    """Hands over its records in one read, and fails if asked for anything after them."""

    def __init__(self, records: list[dict[str, object]]) -> None:
        self.records = records
        self.closed = False

    def read(self, timeout: float) -> Iterator[dict[str, object]]:
        yield from self.records
        raise AssertionError("read on after the crawl's last record")

    def close(self) -> None:
        self.closed = True


def test_wait_ends_on_the_crawls_last_record_without_reading_on(memcached: object) -> None:
    reader = ReaderOfOneBatch(
        [
            {"message_id": "seed", "url": "http://h/", "outcome": "crawled", "sent": ["child"]},
            {"message_id": "child", "url": "http://h/c", "outcome": "crawled", "sent": []},
        ]
    )

    pool = example.stores
    crawl_id, keep_alive = uuid.uuid4().hex, KeepAlive(grace=60)
    exit_code = seeder.follow(pool, crawl_id, ["seed"], reader, None, keep_alive)  # type: ignore[arg-type]

    assert exit_code == 0 and reader.closed


def numbered(n: int) -> Record:
    """A record that is its number alone: the records queue carries it as any other
    (only the seeder reads a record's fields)."""
    return cast(Record, {"n": n})


def number_of(record: Record) -> int:
    return int(cast(dict[str, Any], record)["n"])


def test_a_rabbitmq_reader_stopped_early_acknowledges_what_was_read_and_hands_back_the_rest(
    rabbitmq_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in rabbitmq_env.items():
        monkeypatch.setenv(name, value)
    broker, observer = make_broker(), make_broker()
    crawl_id = uuid.uuid4().hex
    reader = record_queue.Reader(broker, crawl_id)
    batches = record_queue.Batches(broker)
    try:
        for n in range(3):
            batches(crawl_id, numbered(n), False)
        with closing(reader.read(timeout=5)) as arriving:
            assert next(arriving) == numbered(0)
        waiting_now = observer.channel.queue_declare(record_queue.name(crawl_id), passive=True)  # type: ignore[attr-defined]
        with closing(reader.read(timeout=0.5)) as arriving:
            rest = list(arriving)
    finally:
        batches.close()
        reader.close()
        broker.close()
        observer.close()

    assert waiting_now.method.message_count == 2  # n=0 acknowledged; n=1, 2 back in the queue
    assert rest == [numbered(1), numbered(2)]


def batches_on(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> tuple[dramatiq.Broker, str, record_queue.Batches]:
    """A broker from ``env``, a crawl id, and the record batches of a worker on it."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    broker = make_broker()
    return broker, uuid.uuid4().hex, record_queue.Batches(broker)


def first_alone_then_together(
    batches: record_queue.Batches, publish: Callable[[int], object], others: range
) -> None:
    """Publish record 0; once it is on its way alone (taken from the waiting ones), the
    records ``others`` at once, from a thread each; wait for every thread."""
    first = threading.Thread(target=publish, args=(0,))
    first.start()
    wait_until(lambda: batches._sending.locked() and not batches._waiting, timeout=10)
    threads = [threading.Thread(target=publish, args=(n,)) for n in others]
    for thread in threads:
        thread.start()
    for thread in [first, *threads]:
        thread.join(timeout=20)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_records_that_end_together_travel_as_one_message_and_each_arrives_once(
    broker_env: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, crawl_id, batches = batches_on(request.getfixturevalue(broker_env), monkeypatch)
    send, sent_bodies = record_queue._send, list[bytes]()

    def first_send_waits_for_the_others(broker: object, crawl_id: str, body: bytes) -> None:
        if not sent_bodies:  # the others queue up behind this send meanwhile
            wait_until(lambda: len(batches._waiting.get(crawl_id, ())) == 7, timeout=10)
        sent_bodies.append(body)
        send(broker, crawl_id, body)  # type: ignore[arg-type]

    monkeypatch.setattr(record_queue, "_send", first_send_waits_for_the_others)
    reader = record_queue.Reader(broker, crawl_id)
    try:
        first_alone_then_together(batches, lambda n: batches(crawl_id, numbered(n)), range(1, 8))
        with closing(reader.read(timeout=2)) as arriving:
            records = list(islice(arriving, 8))
    finally:
        batches.close()
        reader.close()
        broker.close()

    assert len(sent_bodies) == 2  # the first record alone, then the seven that waited
    assert sorted(number_of(record) for record in records) == list(range(8))


class Interrupted(BaseException):
    """As Dramatiq's time limit interrupts a thread: not an ``Exception``."""


def test_a_batch_not_sent_raises_in_each_thread_whose_record_it_held_as_a_plain_error(
    redis_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, crawl_id, batches = batches_on(redis_env, monkeypatch)
    calls = []

    def interrupted(broker: object, crawl_id: str, body: bytes) -> None:
        calls.append(body)
        if len(calls) == 1:
            wait_until(lambda: len(batches._waiting.get(crawl_id, ())) == 3, timeout=10)
            return
        raise Interrupted  # the second sender's time limit strikes mid-send

    monkeypatch.setattr(record_queue, "_send", interrupted)
    raised: list[BaseException | None] = []

    def publish(n: int) -> None:
        try:
            batches(crawl_id, numbered(n))
            raised.append(None)
        except BaseException as e:
            raised.append(e)

    first_alone_then_together(batches, publish, range(1, 4))
    broker.close()

    assert len(calls) == 2 and len(raised) == 4
    assert raised.count(None) == 1  # the first record went out alone
    # The sender's own interruption is its alone; the two records it carried fail
    # as an Exception, which the bookkeeping turns into a message sent back.
    assert sum(isinstance(e, Interrupted) for e in raised) == 1
    not_sent = [e for e in raised if isinstance(e, record_queue.RecordNotSent)]
    assert len(not_sent) == 2 and all(isinstance(e.__cause__, Interrupted) for e in not_sent)
    assert not batches._waiting


def test_a_record_whose_batch_was_lost_by_an_interrupted_sender_is_not_sent_and_says_so(
    redis_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, crawl_id, batches = batches_on(redis_env, monkeypatch)
    sent = []
    monkeypatch.setattr(record_queue, "_send", lambda *arguments: sent.append(arguments))
    # As if a sender had taken this crawl's waiting records and been interrupted
    # before it could mark them: the record is no longer waiting, and not sent.

    class Forgetful(dict[str, list[record_queue._Pending]]):
        def setdefault(self, key: str, default: Any = None) -> list[record_queue._Pending]:
            return []

    batches._waiting = Forgetful()

    with pytest.raises(record_queue.RecordNotSent):
        batches(crawl_id, numbered(0))
    broker.close()

    assert sent == []


def test_records_a_redis_reader_took_without_receiving_them_are_read_at_its_next_read(
    redis_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stopping right after it applied the reader's take, before its reply: the
    records wait in the crawl's list of records taken, not lost."""
    broker, crawl_id, batches = batches_on(redis_env, monkeypatch)
    reader = record_queue.Reader(broker, crawl_id)
    try:
        for n in range(3):
            batches(crawl_id, numbered(n), False)
        take = broker.client.register_script(record_queue._TAKE)  # type: ignore[attr-defined]
        taken = record_queue._taken_key(crawl_id)
        assert len(take(keys=[record_queue.name(crawl_id), taken], args=[2, 60_000])) == 2
        with closing(reader.read(timeout=0.5)) as arriving:
            records = list(arriving)
        left = broker.client.exists(taken)  # type: ignore[attr-defined]
    finally:
        reader.close()
        batches.close()
        broker.close()

    assert records == [numbered(0), numbered(1), numbered(2)]
    assert left == 0
