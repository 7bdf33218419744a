"""A message's ending counted once when the Redis store did a call but its reply was lost.

A Redis shut down (or a connection that drops) right after it ran a command, before
its reply reached the worker: the command is done (and in the append-only file), the
client gets a ``ConnectionError``, and the bookkeeping tries the step again.  A count
that is tried again must then add nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from crawler.environment import Lifetimes
from crawler.frontier import claims, counters
from crawler.stores.redis import RedisStoreClient
from crawler.tracking.bookkeeping import settle

LIFETIMES = Lifetimes()
URL = "http://127.0.0.1:1/page/0.html"
#: The calls that count an ending (the count, or its ``ended`` mark): whichever the
#: bookkeeping makes, the first one's reply is lost.
COUNTING = ("add", "incr", "incr_and_append", "count_once")


class RepliesLost:
    """A Redis store's client whose first call of each of ``methods`` is run by Redis,
    then fails as a connection dropped before the reply came (``Connection closed by
    server``)."""

    def __init__(self, client: RedisStoreClient, methods: tuple[str, ...]) -> None:
        self.client = client
        self.lost = set(methods)

    def __getattr__(self, name: str) -> Any:
        operation = getattr(self.client, name)
        if name not in self.lost:
            return operation

        def call(*args: Any, **kwargs: Any) -> Any:
            operation(*args, **kwargs)  # done by Redis...
            self.lost.discard(name)
            raise redis.ConnectionError("Connection closed by server.")  # ...its reply lost

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


@pytest.mark.parametrize("store", ["redis", "redis-cluster"], indirect=True)
@pytest.mark.parametrize(
    "outcome",
    [
        "crawled",  # its first ending known from its claim
        "failed",  # given up: counted through its ended mark
        "retrying",  # an attempt that failed: counted each time
    ],
)
def test_an_ending_whose_count_reply_was_lost_is_counted_once(store: Any, outcome: str) -> None:
    claims.claim(store, URL, Message().message_id, "crawl-1", LIFETIMES)
    counters.start(store, "crawl-1", 1, LIFETIMES.grace)
    pool = RepliesLost(store, COUNTING)

    settle(pool, LIFETIMES, None, patience=5)({"url": URL, "outcome": outcome}, Message())

    assert pool.lost != set(COUNTING), "no count's reply was lost"
    figures = counters.read(store, "crawl-1")
    assert figures is not None
    assert figures[outcome] == 1
    if outcome != "retrying":
        assert figures["outstanding"] == 0


@pytest.mark.parametrize("store", ["redis"], indirect=True)
def test_a_page_whose_url_was_marked_done_but_the_reply_lost_is_counted_once(store: Any) -> None:
    claims.claim(store, URL, Message().message_id, "crawl-1", LIFETIMES)
    counters.start(store, "crawl-1", 1, LIFETIMES.grace)
    pool = RepliesLost(store, ("cas",))  # the URL marked done; tried again, it says REPEAT

    settle(pool, LIFETIMES, None, patience=5)({"url": URL, "outcome": "crawled"}, Message())

    assert not pool.lost
    figures = counters.read(store, "crawl-1")
    assert figures is not None
    assert (figures["crawled"], figures["outstanding"]) == (1, 0)


@pytest.mark.parametrize("store", ["redis"], indirect=True)
def test_a_message_ended_again_is_not_counted_again(store: Any) -> None:
    for _ in range(2):  # a duplicate delivered twice: its ended mark counts it once
        settle(store_pool(store), LIFETIMES, None, patience=5)(
            {"url": URL, "outcome": "duplicate"}, Message()
        )
    figures = counters.read(store, "crawl-1")
    assert figures is not None
    assert figures["duplicate"] == 1


def store_pool(client: RedisStoreClient) -> RepliesLost:
    return RepliesLost(client, ())
