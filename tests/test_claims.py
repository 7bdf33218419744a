"""Claims against a real Memcached: who sends a link, and how deliveries are bounded."""

from __future__ import annotations

from typing import Any

import dramatiq
import pylibmc
import pytest
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.errors import PermanentError
from crawler.frontier import claims, counters

URLS = [f"http://127.0.0.1:1/page/{i}.html" for i in range(5)]


def queued(broker: StubBroker) -> list[dramatiq.Message[Any]]:
    return [dramatiq.Message.decode(body) for body in broker.queues[example.crawl.queue_name].queue]


def send(client: pylibmc.Client, parent: str, *, first_delivery: bool = True) -> list[str]:
    return claims.send_claimed(
        client, example.crawl, parent, URLS, {"depth": 1}, "crawl-1", first_delivery=first_delivery
    )


def test_send_claimed_sends_only_unclaimed_links_and_counts_them(
    memcached: pylibmc.Client, stub_broker: StubBroker
) -> None:
    memcached.set(claims.url_hash(URLS[1], "crawl-1"), b"someone-else")
    memcached.set(claims.url_hash(URLS[3], "crawl-1"), claims.DONE)

    sent = send(memcached, "parent-1")

    expected = [claims.child_message_id("parent-1", URLS[i]) for i in (0, 2, 4)]
    assert sent == expected
    assert [m.message_id for m in queued(stub_broker)] == expected
    assert [m.args[0] for m in queued(stub_broker)] == [URLS[0], URLS[2], URLS[4]]
    for i, message_id in zip((0, 2, 4), expected, strict=True):
        assert memcached.get(claims.url_hash(URLS[i], "crawl-1")) == message_id.encode()
    assert counters.read(memcached, "crawl-1")[counters.DISCOVERED] == 3  # type: ignore[index]
    # Another page linking to the same URLs sends nothing: all are claimed now.
    assert send(memcached, "parent-2") == []


def test_a_redelivered_parent_sends_again_what_it_claimed_before(
    memcached: pylibmc.Client, stub_broker: StubBroker
) -> None:
    first = send(memcached, "parent-1")
    assert len(first) == len(URLS)
    # Delivered again (the worker died after claiming): on the first delivery nothing is
    # taken as its own, on a redelivery its own claims are sent again under the same ids.
    assert send(memcached, "parent-1") == []
    assert send(memcached, "parent-1", first_delivery=False) == first
    assert counters.read(memcached, "crawl-1")[counters.DISCOVERED] == len(URLS)  # type: ignore[index]


class Delivery:
    """A message as a broker hands it over; ``redelivered`` as RabbitMQ says it, if at all."""

    def __init__(self, redelivered: bool | None, retries: int = 0) -> None:
        self.message_id = "message-1"
        self.options = {"retries": retries} if retries else {}
        if redelivered is not None:
            self.redelivered = redelivered


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_deliveries_of_one_attempt_are_bounded(memcached: pylibmc.Client, broker: str) -> None:
    def deliver(nth: int) -> bool:
        redelivered = (nth > 1) if broker == "rabbitmq" else None
        return claims.bound_deliveries(memcached, Delivery(redelivered), max_deliveries=3)  # type: ignore[arg-type]

    assert deliver(1) is True
    assert deliver(2) is False
    assert deliver(3) is False
    with pytest.raises(PermanentError, match="delivered 4 times"):
        deliver(4)
    # A retry is a new attempt with its own count, and not a first delivery.
    assert claims.bound_deliveries(memcached, Delivery(False, retries=1), 3) is False  # type: ignore[arg-type]
