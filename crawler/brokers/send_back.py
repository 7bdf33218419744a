"""Every message a worker sends reaches the broker, or the message that sent it comes back.

A ``crawl`` message is acknowledged only once what it had to send went out: its
links (sent by the actor), its retry or deferral, and its record for a waiting
seeder.  When the broker refuses one of them (it is restarting, or a worker
thread's connection went stale while idle), the message is not acknowledged as
done: :class:`SendBack` marks it, and the consumer hands it back to the queue
instead (RabbitMQ ``basic_nack(requeue=True)``; Redis moves it from the worker's
acknowledgements back to the queue, retried by Dramatiq until Redis answers).
It is then redone, and sends again what it claimed.
"""

from __future__ import annotations

import logging
import threading
from contextlib import suppress
from functools import partial
from typing import Any

import dramatiq
import pika
import redis
from dramatiq.broker import Consumer, MessageProxy
from dramatiq.errors import BrokerConnectionError, ConnectionClosed
from dramatiq.middleware import Middleware, Retries, TimeLimit

logger = logging.getLogger("example")

#: What a broker raises when it cannot take a message right now.
BROKER_ERRORS: tuple[type[BaseException], ...] = (
    BrokerConnectionError,  # Dramatiq's ConnectionClosed and ConnectionFailed (RabbitMQ)
    redis.RedisError,  # connection errors, LOADING, and MISCONF/OOM/READONLY answers
    pika.exceptions.AMQPError,  # NackError and UnroutableError with publisher confirms
)

#: Publish attempts on RabbitMQ, each on a fresh connection after the first (as
#: Dramatiq's ``enqueue``): a worker thread's connection may have been closed by
#: RabbitMQ while it sat idle, its heartbeats unanswered.
PUBLISH_ATTEMPTS = 2


class SendBack(Middleware):
    """Remembers the messages whose links, retry, deferral or record could not be
    sent, so that their consumer hands them back to the queue instead of
    acknowledging (or dead-lettering) them.

    A mark is kept on the delivery (the message proxy the worker holds from
    processing to acknowledgement), not on the message id, which copies share.
    """

    def __init__(self) -> None:
        self._unsent: set[int] = set()
        self._lock = threading.Lock()

    def could_not_send(self, message: Any, what: str, error: BaseException) -> None:
        logger.warning(
            "Could not send %s of URL %r (%s: %s); the message goes back to the queue.",
            what,
            message.args[0] if message.args else None,
            type(error).__name__,
            error,
        )
        with self._lock:
            self._unsent.add(id(message))

    def must_come_back(self, message: Any) -> bool:
        with self._lock:
            return id(message) in self._unsent

    def came_back(self, message: Any) -> None:
        with self._lock:
            self._unsent.discard(id(message))


class ReliableRetries(Retries):
    """Dramatiq's ``Retries``, except that a retry the broker refused sends the
    message back instead of losing it (Dramatiq logs the error and acknowledges)."""

    def __init__(self, send_back: SendBack, **options: Any) -> None:
        super().__init__(**options)
        self.send_back = send_back

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        try:
            super().after_process_message(  # type: ignore[no-untyped-call]
                broker, message, result=result, exception=exception
            )
        except Exception as e:  # whatever kept the retry from the broker: it must not be lost
            self.send_back.could_not_send(message, "the retry", e)


class TimeLimitOver(Middleware):
    """Ends Dramatiq's time limit for a message as soon as its actor has returned.

    ``TimeLimit`` stops the clock in its own after-hook, which runs after every
    middleware added later; until then the publishes of those after-hooks (a retry,
    a record, with their reconnects) could be interrupted half-way.  Added last, its
    after-hook runs first.

    Parameters:
      time_limit(TimeLimit): The broker's ``TimeLimit`` middleware.
    """

    def __init__(self, time_limit: TimeLimit) -> None:
        self.time_limit = time_limit

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        self.time_limit.after_process_message(  # type: ignore[no-untyped-call]
            broker, message, result=result, exception=exception
        )

    after_skip_message = after_process_message


def middleware(send_back: SendBack) -> list[Middleware]:
    """Dramatiq's default middleware, with :class:`ReliableRetries` for ``Retries``."""
    from dramatiq.middleware import default_middleware

    stack: list[Middleware] = [m() for m in default_middleware if m is not Retries]
    return [*stack, send_back, ReliableRetries(send_back)]


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
            try:
                consumer.broker.do_requeue(consumer.queue_name, message.options["redis_message_id"])
            except redis.RedisError as e:  # Dramatiq retries it, as an ack, until Redis answers
                raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]
            consumer.queued_message_ids.discard(message.message_id)
        self.send_back.came_back(message)
