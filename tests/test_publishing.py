"""A page's links reach RabbitMQ together (one transaction) before the page counts as
done: a link is never held only in a connection's buffer when the page's record goes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dramatiq
import pika
import pytest

from crawler.brokers import make_broker
from crawler.frontier import claims
from tests.support import rabbitmq_vhost


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with rabbitmq_vhost("crawler-publishing") as url:
        monkeypatch.setenv("RABBITMQ_URL", url)
        monkeypatch.delenv("REDIS", raising=False)
        monkeypatch.delenv("CRAWLER_PUBLISH_CONFIRMS", raising=False)
        broker = make_broker()
        broker.declare_queue("links")
        yield broker
        broker.close()


def messages(count: int, priority: int | None = None) -> list[dramatiq.Message[Any]]:
    options = {} if priority is None else {"broker_priority": priority}
    return [
        dramatiq.Message(
            queue_name="links",
            actor_name="crawl",
            args=(f"http://x/{n}",),
            kwargs={},
            options=options,
        )
        for n in range(count)
    ]


def queued(broker: Any) -> list[tuple[str, int | None]]:
    """The ids and priorities of the messages on ``links``, taken off it."""
    channel = broker.connection.channel()
    found: list[tuple[str, int | None]] = []
    while True:
        method, properties, body = channel.basic_get("links", auto_ack=True)
        if method is None:
            return found
        found.append((dramatiq.Message.decode(body).message_id, properties.priority))


def test_all_messages_are_on_the_queue_when_enqueue_all_returns(broker: Any) -> None:
    sent = messages(20, priority=3)
    claims.enqueue_all(broker, sent)
    assert sorted(queued(broker)) == sorted((m.message_id, 3) for m in sent)


def test_a_commit_lost_with_its_connection_publishes_nothing_and_is_sent_again(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection dies after the messages were written and before ``tx.commit``:
    RabbitMQ keeps none of them, and the retry on a fresh connection sends each once."""
    commits = 0
    real_commit = pika.adapters.blocking_connection.BlockingChannel.tx_commit

    def commit_after_losing_the_first(channel: Any) -> Any:
        nonlocal commits
        commits += 1
        if commits == 1:
            channel.connection.close()  # what a RabbitMQ restart does to it
        return real_commit(channel)

    channel_class = pika.adapters.blocking_connection.BlockingChannel
    monkeypatch.setattr(channel_class, "tx_commit", commit_after_losing_the_first)
    sent = messages(5)
    claims.enqueue_all(broker, sent)
    assert commits == 2
    assert sorted(queued(broker)) == sorted((m.message_id, None) for m in sent)


def test_a_broker_that_stays_away_raises(broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    real_commit = pika.adapters.blocking_connection.BlockingChannel.tx_commit

    def never(channel: Any) -> Any:
        channel.connection.close()
        return real_commit(channel)

    monkeypatch.setattr(pika.adapters.blocking_connection.BlockingChannel, "tx_commit", never)
    with pytest.raises(dramatiq.errors.ConnectionClosed):
        claims.enqueue_all(broker, messages(3))
    monkeypatch.undo()
    assert queued(broker) == []
