"""Ordinary outages during a crawl of real workers: idle connections, broker and Memcached
restarts, an interrupted ``--wait``, and the second chance of dead-lettered URLs.

Each test asserts what the README promises: pages fetched (and how often), records
received by ``--wait``, its exit code and the words the user sees.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pika
import pytest
import redis

from tests import faults
from tests.site_server import SiteServer, generate_site, html, page_path
from tests.support import (
    FAST_FAILURES,
    MemcachedProcess,
    RabbitmqProcess,
    RedisProcess,
    clean_memcached,
    crawl_id_of,
    read_records,
    wait_for_crawl,
)
from tests.workers import (
    WorkerProcesses,
    dead_letters,
    environment,
    queued_messages,
    seed,
)

#: How long ``--wait`` may take for the small crawls here before the test calls it hung.
WAIT_TIMEOUT = 90
#: The site crawled through an outage.
PAGES = 300
EVERY_PAGE = {page_path(i) for i in range(PAGES)}


def finish(waiting: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return waiting.communicate(timeout=WAIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        waiting.kill()
        stdout, stderr = waiting.communicate()
        raise AssertionError(f"--wait did not end; it said:\n{stdout}\n{stderr[-3000:]}") from None


@pytest.fixture
def own_rabbitmq() -> Iterator[RabbitmqProcess]:
    """A RabbitMQ node of the test's own, to restart: the machine's is never stopped."""
    node = RabbitmqProcess()
    yield node
    node.shut_down()


def test_workers_idle_past_rabbitmqs_heartbeat_still_deliver_every_record(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    # RabbitMQ closes a connection whose heartbeats go unanswered for two intervals;
    # a worker thread's publishing connection sits idle between crawls.
    url = rabbitmq_env["RABBITMQ_URL"]
    env = environment(
        **FAST_FAILURES, RABBITMQ_URL=url + ("&" if "?" in url else "?") + "heartbeat=1"
    )
    first = [f"/first/{i}.html" for i in range(8)]
    second = [f"/second/{i}.html" for i in range(16)]
    site.pages.update(dict.fromkeys(first + second, html()))
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        stdout, stderr = finish(wait_for_crawl(env, *map(site.url, first)))
        assert "8 pages fetched" in stdout, stderr
        time.sleep(4)  # idle: more than two heartbeat intervals without a word
        started = time.monotonic()
        waiting = wait_for_crawl(env, *map(site.url, second))
        stdout, stderr = finish(waiting)
    finally:
        assert workers.stop() == 0

    assert waiting.returncode == 0, stderr
    assert "16 pages fetched" in stdout and "0 failed." in stdout
    assert time.monotonic() - started < 30
    assert site.fetch_counts() == dict.fromkeys(first + second, 1)
    assert not workers.logged_any("CRITICAL")


@dataclass
class CrawlThroughAnOutage:
    """What a 300-page ``--wait --output`` crawl left after a service went away mid-crawl."""

    returncode: int
    stdout: str
    stderr: str
    urls: list[str]
    workers: WorkerProcesses


def crawl_through_an_outage(
    env: dict[str, str],
    site: SiteServer,
    tmp_path: Path,
    outage: Callable[[], None],
    *,
    after: int = 60,
) -> CrawlThroughAnOutage:
    """Crawl ``PAGES`` pages with 2 x 4 workers and ``--wait``; once ``after`` pages are
    done, run ``outage`` (take a service away, ``site.release()``, and bring it back).
    Under load the crawl could end before the service is away: the site holds its
    answers from 20 requests past ``after`` until the outage releases them."""
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    site.delay = 0.02
    site.hold_from = after + 20
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=2, threads=4)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)), "--output", str(output))
        workers.wait_until(lambda: workers.count("Done crawling") >= after)
        outage()
        stdout, stderr = finish(waiting)
    finally:
        assert workers.stop() == 0
    urls = [str(record["url"]) for record in read_records(output)]
    return CrawlThroughAnOutage(waiting.returncode, stdout, stderr, urls, workers)


def test_a_redis_restart_mid_crawl_loses_no_page_and_wait_sees_it_through(
    site: SiteServer, tmp_path: Path, memcached: object
) -> None:
    own_redis = RedisProcess(tmp_path)
    env = environment(**FAST_FAILURES, REDIS="1", REDIS_URL=own_redis.url)

    def restart() -> None:
        own_redis.shut_down()
        site.release()
        time.sleep(3)
        own_redis.start()

    try:
        crawl = crawl_through_an_outage(env, site, tmp_path, restart)
    finally:
        own_redis.shut_down()

    assert set(site.fetch_counts()) == EVERY_PAGE
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert f"{PAGES} pages fetched" in crawl.stdout and "0 failed." in crawl.stdout
    assert "waiting for Redis..." in crawl.stderr
    assert len(crawl.urls) == len(set(crawl.urls)) == PAGES
    assert crawl.workers.logged_any("goes back to the queue")
    assert not crawl.workers.logged_any("Unexpected failure in after_process_message")


def test_wait_rides_out_a_rabbitmq_restart_and_its_output_has_every_page(
    site: SiteServer, own_rabbitmq: RabbitmqProcess, tmp_path: Path
) -> None:
    # Records are confirmed by default: one RabbitMQ drops as it stops is sent again by
    # its message, which is redone rather than found done.
    env = environment(RABBITMQ_URL=own_rabbitmq.url, **FAST_FAILURES)

    def restart() -> None:
        own_rabbitmq.ctl("stop_app")
        site.release()
        time.sleep(3)
        own_rabbitmq.ctl("start_app")

    crawl = crawl_through_an_outage(env, site, tmp_path, restart)

    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert set(site.fetch_counts()) == EVERY_PAGE
    assert f"{PAGES} pages fetched" in crawl.stdout and "0 failed." in crawl.stdout
    assert "waiting for RabbitMQ..." in crawl.stderr
    assert len(crawl.urls) == len(set(crawl.urls)) == PAGES


def test_wait_says_when_rabbitmq_blocks_publishers_and_ends_once_it_lets_them_go(
    site: SiteServer, own_rabbitmq: RabbitmqProcess, tmp_path: Path
) -> None:
    env = environment(RABBITMQ_URL=own_rabbitmq.url, **FAST_FAILURES)

    def memory_alarm() -> None:
        own_rabbitmq.ctl("set_vm_memory_high_watermark", "absolute", "1")
        site.release()
        time.sleep(8)  # past the seeder's 5 s progress lines
        own_rabbitmq.ctl("set_vm_memory_high_watermark", "0.4")

    crawl = crawl_through_an_outage(env, site, tmp_path, memory_alarm)

    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "waiting for RabbitMQ, which blocks publishers (a memory or disk alarm)..." in (
        crawl.stderr
    )
    assert len(crawl.urls) == len(set(crawl.urls)) == PAGES


def test_a_memcached_restarted_empty_costs_at_most_one_more_fetch_a_page(
    site: SiteServer, rabbitmq_env: dict[str, str], own_memcached: MemcachedProcess, tmp_path: Path
) -> None:
    env = environment(
        **{
            **rabbitmq_env,
            **FAST_FAILURES,
            "MEMCACHED_SERVERS": own_memcached.servers,
            # Retries at 1, 2 and 4 s outlast the outage, as the default 15, 30, 60 s do.
            "CRAWLER_MIN_BACKOFF_MS": "1000",
        }
    )

    def restart_empty() -> None:
        own_memcached.stop()
        site.release()
        time.sleep(1.5)
        own_memcached.start()  # empty: every claim is forgotten

    crawl = crawl_through_an_outage(env, site, tmp_path, restart_empty, after=100)

    counts = site.fetch_counts()
    assert set(counts) == EVERY_PAGE
    # README "Not promised": one more fetch per restart, and a third for a page in hand
    # whose retry finds its URL taken (it crawls again to send links it may have claimed).
    assert max(counts.values()) <= 3
    assert sum(n == 3 for n in counts.values()) <= 2 * 4 * (1 + 5)  # in hand, and their links
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "0 failed." in crawl.stdout
    assert "waiting for Memcached..." in crawl.stderr
    assert crawl.workers.count("Giving up on URL") == 0
    assert len(set(crawl.urls)) == PAGES


def records_left(env: dict[str, str], crawl_id: str) -> bool:
    """Whether the crawl's records queue (or list) still exists on the broker."""
    name = f"crawler.records.{crawl_id}"
    if env.get("REDIS") == "1":
        client = redis.Redis.from_url(env["REDIS_URL"])
        try:
            return bool(client.exists(name))
        finally:
            client.close()
    connection = pika.BlockingConnection(pika.URLParameters(env["RABBITMQ_URL"]))
    try:
        connection.channel().queue_declare(name, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker:
        return False
    finally:
        if connection.is_open:
            connection.close()


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_ctrl_c_on_wait_deletes_its_records_queue_and_workers_stop_filling_it(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=3))
    site.delay = 0.1
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        workers.wait_until(lambda: workers.count("Done crawling") >= 3)
        waiting.send_signal(signal.SIGINT)
        stdout, _ = finish(waiting)
        crawled_then = workers.count("Done crawling")
        workers.wait_until(lambda: workers.count("Done crawling") >= crawled_then + 5)
        left = records_left(env, crawl_id)
    finally:
        workers.stop()

    assert waiting.returncode == 130
    assert f"The crawl goes on; see it with --status {crawl_id}" in stdout
    assert not left


def test_output_into_a_missing_directory_is_refused_before_anything_is_enqueued(
    rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    env = environment(**rabbitmq_env)
    missing = tmp_path / "no" / "such" / "dir" / "pages.jsonl"

    result = seed(env, "http://127.0.0.1:1/", "--wait", "--output", str(missing))

    assert result.returncode == 2
    assert f"cannot write --output {str(missing)!r}: No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr
    assert queued_messages(env) == 0


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_dead_lettered_urls_are_listed_and_one_replay_fetches_them_again(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, dedup_env: dict[str, str]
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **dedup_env, **FAST_FAILURES)
    # Down for the crawl's four attempts, back for the replay.
    site.behaviors["/down.html"] = faults.failing_then(
        html(site.url("/behind.html")), failures=4, fail=faults.status(503)
    )
    site.pages["/"] = html(site.url("/down.html"), site.url("/fine.html"))
    site.pages["/fine.html"] = site.pages["/behind.html"] = html()
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        stdout, _ = finish(wait_for_crawl(env, site.url("/")))
        crawl_id = crawl_id_of(stdout)
        assert "1 failed." in stdout
        listed = seed(env, "--dead-letters", crawl_id)
        every_crawl = seed(env, "--dead-letters", "all")
        nothing_of_another = seed(env, "--dead-letters", "f" * 32)
        replayed = seed(env, "--replay", crawl_id)
        workers.wait_until(lambda: site.fetched(["/behind.html"]))
        workers.wait_until(lambda: queued_messages(env) == 0)
        # RabbitMQ counts the ready messages only: the last one may still be ending.
        workers.wait_until(lambda: " 0 outstanding," in seed(env, "--status", crawl_id).stdout)
        status = seed(env, "--status", crawl_id)
        listed_after = seed(env, "--dead-letters", crawl_id)
    finally:
        assert workers.stop() == 0

    down = site.url("/down.html")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0].startswith(f"{down} (4 attempts; last retried for: ")
    assert "HTTP 503 Service Unavailable" in listed.stdout
    assert listed.stdout.splitlines()[-1] == f"1 dead-lettered URL(s) of crawl {crawl_id}"
    assert down in every_crawl.stdout
    assert every_crawl.stdout.splitlines()[-1] == "1 dead-lettered URL(s) of every crawl"
    assert nothing_of_another.stdout.strip().endswith("0 dead-lettered URL(s) of crawl " + "f" * 32)
    assert replayed.returncode == 0
    assert (
        replayed.stdout.splitlines()[-1] == f"1 dead-lettered URL(s) of crawl {crawl_id} sent again"
    )
    assert site.fetch_counts()["/down.html"] == 5
    assert site.fetch_counts()["/behind.html"] == 1
    assert f"crawl {crawl_id}: finished: 4 pages fetched" in status.stdout
    assert ", 0 failed;" in status.stdout and " 0 outstanding," in status.stdout
    assert listed_after.stdout.strip() == f"0 dead-lettered URL(s) of crawl {crawl_id}"
    assert dead_letters(env) == 0


def test_replay_with_memcached_flushed_still_fetches_the_url(
    site: SiteServer, redis_env: dict[str, str]
) -> None:
    """A dead letter outlives Memcached's memory (a week against an hour): the replayed
    message claims its URL anew."""
    env = environment(**redis_env, **FAST_FAILURES)
    site.behaviors["/down.html"] = faults.failing_then(html(), failures=4, fail=faults.status(503))
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        stdout, _ = finish(wait_for_crawl(env, site.url("/down.html")))
        crawl_id = crawl_id_of(stdout)
        with clean_memcached():
            pass
        replayed = seed(env, "--replay", crawl_id)
        workers.wait_until(lambda: site.fetch_counts()["/down.html"] == 5)
        workers.wait_until(lambda: queued_messages(env) == 0)
    finally:
        assert workers.stop() == 0

    assert replayed.returncode == 0
    assert not workers.logged_any("already been visited")
    assert dead_letters(env) == 0
