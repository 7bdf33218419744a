"""The crawler on a RabbitMQ shared with other Dramatiq programs: it never changes a
queue they declare, so a plain worker and producer on ``default`` keep working before,
during and after a crawl (``--breadth-first``, whose queues carry priorities)."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import dramatiq
import pika
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, rabbitmq_vhost, wait_for_crawl
from tests.workers import BIN, PROJECT_ROOT, WorkerProcesses, environment

PAGES = 60


def send_notes(url: str, numbers: range) -> None:
    """What a plain Dramatiq producer does: declare ``default`` and enqueue to it."""
    broker = RabbitmqBroker(url=url)
    broker.declare_queue("default", ensure=True)
    for number in numbers:
        message: dramatiq.Message[None] = dramatiq.Message(
            queue_name="default", actor_name="note", args=(number,), kwargs={}, options={}
        )
        broker.enqueue(message)
    broker.close()


def default_is_plain(url: str) -> bool:
    """Whether ``default`` takes Dramatiq's own declaration (no ``x-max-priority``)."""
    broker = RabbitmqBroker(url=url)
    try:
        broker.declare_queue("default", ensure=True)
        return True
    except pika.exceptions.ChannelClosedByBroker as e:
        assert e.reply_code == 406, e
        return False
    finally:
        broker.close()


def test_a_plain_dramatiq_program_on_default_works_before_during_and_after_a_crawl(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=3))
    site.delay = 0.01
    log = tmp_path / "notes.log"
    with rabbitmq_vhost("crawler-coexistence") as url:
        env = environment(RABBITMQ_URL=url, PLAIN_APP_LOG=str(log), **FAST_FAILURES)
        # The crawler first on this broker: its workers declare their queues, a crawl ends.
        crawlers = WorkerProcesses(env, processes=1, threads=4)
        plain: subprocess.Popen[str] | None = None
        try:
            first = wait_for_crawl(env, site.url(page_path(0)), "--breadth-first")
            _, first_stderr = first.communicate(timeout=120)
            send_notes(url, range(0, 10))  # before the next crawl, after the first
            plain = subprocess.Popen(
                [str(BIN / "dramatiq"), "tests.plain_app", "--processes", "1", "--threads", "1"],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            waiting = wait_for_crawl(env, site.url(page_path(0)), "--breadth-first")
            crawlers.wait_until(lambda: crawlers.count("Done crawling") >= PAGES + PAGES // 3)
            send_notes(url, range(10, 20))  # during
            _, stderr = waiting.communicate(timeout=120)
            send_notes(url, range(20, 30))  # after
            deadline = time.monotonic() + 30
            while len(notes(log)) < 30 and time.monotonic() < deadline:
                time.sleep(0.1)
            plain_stays_plain = default_is_plain(url)
        finally:
            assert crawlers.stop() == 0
            plain_log = ""
            if plain is not None:
                plain.terminate()
                plain_log, _ = plain.communicate(timeout=30)

    assert first.returncode == 0, first_stderr[-2000:]
    assert waiting.returncode == 0, stderr[-2000:]
    assert site.fetch_counts() == Counter({page_path(i): 2 for i in range(PAGES)})
    assert sorted(notes(log)) == list(range(30)), plain_log[-3000:]
    assert "PRECONDITION_FAILED" not in plain_log and "PRECONDITION_FAILED" not in stderr
    assert not crawlers.logged_any("PRECONDITION_FAILED")
    assert plain_stays_plain


def notes(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []
