"""What a worker sends reaches the broker, or the message that sent it comes back: the
broker's side (:class:`ReturningConsumer`, the middleware stack with
:class:`~crawler.middleware.SendBack`), and what a broker raises when it cannot take a
message."""

from __future__ import annotations

from contextlib import suppress
from functools import cache, partial
from typing import Any

import pika
from dramatiq.broker import Consumer, MessageProxy
from dramatiq.errors import BrokerConnectionError, ConnectionClosed
from dramatiq.middleware import Middleware, Retries

from crawler.middleware import ReliableRetries, SendBack, ordered


@cache
def broker_errors() -> tuple[type[BaseException], ...]:
    """What a broker raises when it cannot take a message right now (``redis`` loaded
    here, on first use: :func:`crawler.stores.redis_errors`)."""
    import redis

    return (
        BrokerConnectionError,  # Dramatiq's ConnectionClosed and ConnectionFailed (RabbitMQ)
        redis.RedisError,  # connection errors, LOADING, and MISCONF/OOM/READONLY answers
        pika.exceptions.AMQPError,  # NackError and UnroutableError with publisher confirms
    )


#: Publish attempts on RabbitMQ, each on a fresh connection after the first (as
#: Dramatiq's ``enqueue``): a worker thread's connection may have been closed by
#: RabbitMQ while it sat idle, its heartbeats unanswered.
PUBLISH_ATTEMPTS = 2


def middleware(send_back: SendBack) -> list[Middleware]:
    """Dramatiq's default middleware, with :class:`ReliableRetries` for ``Retries``, in
    :data:`crawler.middleware.ORDER`."""
    from dramatiq.middleware import default_middleware

    stack: list[Middleware] = [m() for m in default_middleware if m is not Retries]
    return ordered([*stack, send_back, ReliableRetries(send_back)])


class ReturningConsumer(Consumer):
    """A broker's consumer that hands back the messages :class:`SendBack` marked.

    Parameters:
      consumer(Consumer): The broker's own consumer.
      send_back(SendBack): Says which messages must come back.
    """

    def __init__(self, consumer: Consumer, send_back: SendBack) -> None:
        self.consumer = consumer
        self.send_back = send_back

    def __iter__(self) -> ReturningConsumer:
        return self

    def __next__(self) -> MessageProxy | None:
        return next(self.consumer)

    def ack(self, message: MessageProxy) -> None:
        if self.send_back.must_come_back(message):
            self._hand_back(message)
        else:
            self.consumer.ack(message)

    def nack(self, message: MessageProxy) -> None:
        if self.send_back.must_come_back(message):
            self._hand_back(message)
        else:
            self.consumer.nack(message)

    def requeue(self, messages: Any) -> None:
        self.consumer.requeue(messages)

    def close(self) -> None:
        self.consumer.close()

    def _hand_back(self, message: MessageProxy) -> None:
        # Dramatiq retries this, as an acknowledgement, until the broker answers.
        consumer: Any = self.consumer
        if hasattr(consumer, "known_tags"):  # RabbitMQ
            try:
                consumer.known_tags.remove(message._tag)
            except KeyError:  # its connection died: RabbitMQ requeued it already
                self.send_back.came_back(message)
                return
            # If the connection is gone, RabbitMQ requeued the message with it.
            with suppress(pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError):
                consumer.connection.add_callback_threadsafe(
                    partial(consumer.channel.basic_nack, message._tag, requeue=True)
                )
        else:  # Redis: from this worker's acknowledgements back onto the queue
            import redis

            try:
                consumer.broker.do_requeue(consumer.queue_name, message.options["redis_message_id"])
            except redis.RedisError as e:  # Dramatiq retries it, as an ack, until Redis answers
                raise ConnectionClosed(e) from None
            consumer.queued_message_ids.discard(message.message_id)
        self.send_back.came_back(message)
