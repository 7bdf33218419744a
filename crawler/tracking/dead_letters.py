"""A crawl's dead-lettered messages: listed with ``--dead-letters``, sent again with ``--replay``.

Dramatiq keeps the messages it gave up on in the dead-letter queue (RabbitMQ
``crawler.XQ``, Redis ``dramatiq:crawler.XQ``) for a week.  A URL given up during
an outage of the site, the broker or Memcached is one command away from a second
chance: ``--replay`` sends each of the crawl's dead letters again under its own
message id (so it keeps its claim on the URL), with fresh retries, and reopens it
in the crawl's counters; then it leaves the dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dramatiq
import pika
from dramatiq.common import q_name, xq_name

from crawler.environment import Lifetimes
from crawler.errors import InvalidMessage
from crawler.frontier import claims, counters
from crawler.messages import check_message
from crawler.records import kwargs_of, url_of
from crawler.stores import StorePool

if TYPE_CHECKING:
    import redis
    from dramatiq.brokers.redis import RedisBroker

#: The ``--dead-letters``/``--replay`` argument that stands for every crawl, and for
#: the bare ``crawl(url)`` messages of upstream, which belong to none.
ALL = "all"

Message = dramatiq.Message[Any]


def crawl_of(message: Message) -> str | None:
    options = kwargs_of(message).get("options")
    return options.get("crawl_id") if isinstance(options, dict) else None


def _belongs(message: Message, crawl_id: str) -> bool:
    return crawl_id == ALL or crawl_of(message) == crawl_id


def listing(broker: dramatiq.Broker, queue: str, crawl_id: str) -> list[Message]:
    """The crawl's dead letters, left where they are."""
    return _visit(broker, queue, crawl_id, send_again=None)


def replay(
    broker: dramatiq.Broker, queue: str, crawl_id: str, pool: StorePool, lifetimes: Lifetimes
) -> tuple[list[Message], list[tuple[Message, str]]]:
    """Send the crawl's dead letters again and take them off the dead-letter queue; each
    URL's claim is its message's again (``lifetimes`` long), to be finished anew.
    Returns those sent, and those left where they are, each with why: a message that
    workers refuse as invalid (:mod:`crawler.messages`) would only be refused again."""
    invalid: list[tuple[Message, str]] = []

    def send_again(message: Message) -> bool:
        try:
            check_message(broker, message)
        except InvalidMessage as e:
            invalid.append((message, str(e)))
            return False
        options = {"replays": int(message.options.get("replays", 0)) + 1}
        for kept in ("broker_priority", "format"):  # --breadth-first; the message's format
            if kept in message.options:
                options[kept] = message.options[kept]
        # The claim and the counters first: a worker may take the message the moment it
        # is sent, and must find its URL its own again (else its ending is a repeat,
        # never counted, and the crawl stays one URL short of finished).  Should the
        # send then fail, the message stays a dead letter, to be replayed again.
        owner = crawl_of(message)
        with pool.reserve() as client:
            name = claims.claim_name_of(message, url_of(message))
            claims.reopen(client, name, message.message_id, owner, lifetimes)
            if owner is not None:
                counters.reopened(client, owner, message.message_id)
        broker.enqueue(
            dramatiq.Message(
                queue_name=q_name(message.queue_name),
                actor_name=message.actor_name,
                args=message.args,
                kwargs=message.kwargs,
                options=options,
                message_id=message.message_id,
            )
        )
        return True

    return _visit(broker, queue, crawl_id, send_again=send_again), invalid


#: Sends a dead letter again, or says it stays (False).
SendAgain = Callable[[Message], bool]


def _visit(
    broker: dramatiq.Broker, queue: str, crawl_id: str, send_again: SendAgain | None
) -> list[Message]:
    """The crawl's dead letters; with ``send_again``, each is sent again and then
    taken off the dead-letter queue."""
    from dramatiq.brokers.redis import RedisBroker  # (loads redis: only here, not at start)

    if isinstance(broker, RedisBroker):
        return _visit_redis(broker, queue, crawl_id, send_again)
    return _visit_rabbitmq(broker, queue, crawl_id, send_again)


def _visit_redis(
    broker: RedisBroker,
    queue: str,
    crawl_id: str,
    send_again: SendAgain | None,
) -> list[Message]:
    client: redis.Redis = broker.client
    dead = f"{broker.namespace}:{xq_name(queue)}"
    found = []
    for redis_id, data in client.hscan_iter(f"{dead}.msgs"):
        message = dramatiq.Message.decode(data)
        if not _belongs(message, crawl_id):
            continue
        if send_again is not None:
            if not send_again(message):
                continue
            client.zrem(dead, redis_id)
            client.hdel(f"{dead}.msgs", redis_id)
        found.append(message)
    return found


def _visit_rabbitmq(
    broker: Any,
    queue: str,
    crawl_id: str,
    send_again: SendAgain | None,
) -> list[Message]:
    broker.declare_queue(queue, ensure=True)  # and its dead-letter queue
    # A connection of its own: the replays' enqueue may replace the broker's thread
    # connection on a hiccup, and the dead letters taken must be acknowledged where
    # they were taken.
    connection = pika.BlockingConnection(broker.parameters)
    channel = connection.channel()
    found = []
    try:
        while True:
            method, _properties, body = channel.basic_get(xq_name(queue), auto_ack=False)
            if method is None:
                break
            message = dramatiq.Message.decode(body)
            if not _belongs(message, crawl_id):
                continue
            if send_again is not None:
                if not send_again(message):
                    continue  # not acknowledged: back to the queue when the connection closes
                channel.basic_ack(method.delivery_tag)
            found.append(message)
    finally:
        connection.close()  # every dead letter not acknowledged goes back to the queue
    return found
