"""A message's bookkeeping across a dedup store that fails for a moment (a restart)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from crawler.environment import Lifetimes
from crawler.frontier import claims, counters
from crawler.frontier.digests import owner_token
from crawler.records import Record
from crawler.stores.memory import MemoryClient
from crawler.tracking.bookkeeping import settle

LIFETIMES = Lifetimes()
URL = "http://127.0.0.1:1/page/0.html"


class Restarting:
    """A store whose next ``failures`` calls of ``method`` fail as Redis does when down."""

    def __init__(self, method: str, failures: int) -> None:
        self.store = MemoryClient()
        self.method, self.failures = method, failures
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        operation = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name == self.method and self.failures > 0:
                self.failures -= 1
                raise redis.ConnectionError("Connection refused")
            return operation(*args, **kwargs)

        return call

    @contextmanager
    def reserve(self) -> Iterator[Any]:
        yield self


class Message:
    """A crawl message as the Recorder hands it over, delivered once."""

    def __init__(self) -> None:
        self.message_id = "message-1"
        self.options: dict[str, Any] = {}
        self.kwargs: dict[str, Any] = {"options": {"crawl_id": "crawl-1"}}


def ended(pool: Restarting, patience: float) -> dict[str, int]:
    claims.claim(pool.store, URL, Message().message_id, "crawl-1", LIFETIMES)
    counters.start(pool.store, "crawl-1", 1, LIFETIMES.grace)
    settle(pool, LIFETIMES, None, patience=patience)({"url": URL, "outcome": "crawled"}, Message())
    figures = counters.read(pool.store, "crawl-1")
    assert figures is not None
    return figures


@pytest.mark.parametrize("method", ["gets", "cas", "incr_and_append", "delete"])
def test_a_store_failing_twice_mid_bookkeeping_still_counts_the_page_once(method: str) -> None:
    pool = Restarting(method, failures=2)
    figures = ended(pool, patience=5)
    assert figures["crawled"] == 1
    assert figures["outstanding"] == 0
    # The URL was marked done once: the failed step was tried again, not the ones before.
    assert pool.calls.count("cas") == 1 + (2 if method == "cas" else 0)


def test_a_store_down_longer_than_the_patience_loses_only_the_count() -> None:
    pool = Restarting("incr_and_append", failures=1000)
    figures = ended(pool, patience=0.3)
    assert figures["crawled"] == 0
    done = claims.DONE + owner_token(Message().message_id)
    assert pool.store.get(claims.url_hash(URL, "crawl-1")) == done


def test_a_failure_whose_count_fails_once_is_counted_once_all_the_same() -> None:
    pool = Restarting("incr", failures=1)
    claims.claim(pool.store, URL, Message().message_id, "crawl-1", LIFETIMES)
    counters.start(pool.store, "crawl-1", 1, LIFETIMES.grace)
    settle(pool, LIFETIMES, None, patience=5)({"url": URL, "outcome": "failed"}, Message())

    figures = counters.read(pool.store, "crawl-1")
    assert figures is not None
    assert figures["failed"] == 1  # the ended mark left before the failed count is not asked again
    assert figures["outstanding"] == 0


@pytest.mark.parametrize(
    ("options", "batched", "has_links"),
    [
        # A seeder of this release, without and with --output.
        ({"batched_records": True, "records_without_links": True}, True, False),
        ({"batched_records": True}, True, True),
        # A seeder from before both options: one record a message, links and all.
        ({}, False, True),
    ],
)
def test_a_record_goes_to_the_seeder_as_the_seeder_asked(
    options: dict[str, bool], batched: bool, has_links: bool
) -> None:
    message, published = Message(), []
    message.kwargs = {"options": {"crawl_id": "crawl-1", "collect_records": True, **options}}
    record: Record = {
        "url": URL,
        "outcome": "crawled",
        "links": ["http://127.0.0.1:1/a"],
        "sent": [],
    }
    pool = Restarting("get", failures=0)
    claims.claim(pool.store, URL, message.message_id, "crawl-1", LIFETIMES)

    settle(pool, LIFETIMES, lambda *sent: published.append(sent))(record, message)

    [(crawl_id, sent_record, sent_batched)] = published
    assert crawl_id == "crawl-1" and sent_batched is batched
    assert ("links" in sent_record) is has_links and sent_record["url"] == URL
