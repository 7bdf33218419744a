"""Dramatiq's RabbitMQ broker, handing back unsent messages, its queues with priorities."""

from __future__ import annotations

import logging
from typing import Any

import dramatiq
import pika
import pika.exceptions
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.common import dq_name
from dramatiq.errors import ConnectionClosed

from crawler.brokers.returning import PUBLISH_ATTEMPTS, ReturningConsumer, middleware
from crawler.middleware import SendBack

logger = logging.getLogger("example")

#: The queues' ``x-max-priority``: ``--breadth-first`` messages go by depth, seeds
#: first (:func:`crawler.frontier.scope.priority`); messages without one come last.
MAX_PRIORITY = 10
#: What RabbitMQ answers a declaration that differs from the queue's: it was declared
#: before with other arguments (by a crawler from before priorities).
PRECONDITION_FAILED = 406


class ReturningRabbitmqBroker(RabbitmqBroker):
    """Dramatiq's ``RabbitmqBroker``, its consumers handing back the messages
    ``send_back`` marks, its queues declared with ``MAX_PRIORITY``.

    A queue that exists without priorities is used as it is, with a warning: its
    messages go in arrival order until it is deleted (when empty) and declared anew.

    Parameters:
      send_back(SendBack): Marks the messages whose follow-ups the broker refused.
    """

    def __init__(self, *, send_back: SendBack, **parameters: Any) -> None:
        super().__init__(middleware=middleware(send_back), max_priority=MAX_PRIORITY, **parameters)
        self.send_back = send_back
        self._without_priorities: set[str] = set()

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        consumer = super().consume(queue_name, prefetch, timeout)
        return ReturningConsumer(consumer, self.send_back)

    def enqueue_all(self, messages: list[dramatiq.Message[Any]]) -> None:
        """Publish ``messages`` (no delay) together: return once RabbitMQ holds every
        one of them, or raise :class:`ConnectionClosed`.

        A page's links go this way before its record says they were sent.  A plain
        publish returns once the message is written to the connection, and RabbitMQ
        drops what it had not routed when it stops: the page would then be marked done
        with a link lost.  Here the links go through a transaction on a channel of
        their own (``tx.commit`` answers once the messages are on their queues, and
        persisted), one round trip a page rather than a confirm a link.  A commit whose
        answer was lost is published again on a fresh connection: the duplicates carry
        the same message ids and claims make them harmless.
        """
        if not messages:
            return
        if self.confirm_delivery:  # every publish waits for its confirm already
            for message in messages:
                self.enqueue(message)
            return
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                channel = self._transaction_channel()
                for message in messages:
                    self.declare_queue(message.queue_name, ensure=True)
                    self.emit_before("enqueue", message, None)
                    channel.basic_publish(
                        exchange="",
                        routing_key=message.queue_name,
                        body=message.encode(),
                        properties=pika.BasicProperties(
                            delivery_mode=2, priority=message.options.get("broker_priority")
                        ),
                    )
                channel.tx_commit()
                break
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError) as e:
                del self.connection  # its channels with it: the next attempt opens new ones
                if attempt == PUBLISH_ATTEMPTS:
                    raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]
        for message in messages:
            self.emit_after("enqueue", message, None)

    def _transaction_channel(self) -> Any:
        """This thread's channel in transaction mode, on its connection."""
        connection = self.connection
        channel = getattr(self.state, "transactions", None)
        if channel is None or not channel.is_open or channel.connection is not connection:
            channel = self.state.transactions = connection.channel()
            channel.tx_select()
        return channel

    def _declare_queue(self, queue_name: str) -> Any:
        try:
            return super()._declare_queue(queue_name)  # type: ignore[no-untyped-call]
        except pika.exceptions.ChannelClosedByBroker as e:
            return self._as_it_is(queue_name, e)

    def _declare_dq_queue(self, queue_name: str) -> Any:
        try:
            return super()._declare_dq_queue(queue_name)  # type: ignore[no-untyped-call]
        except pika.exceptions.ChannelClosedByBroker as e:
            return self._as_it_is(dq_name(queue_name), e)

    def _as_it_is(self, name: str, error: pika.exceptions.ChannelClosedByBroker) -> Any:
        """Use the queue ``name`` as it was declared before, without priorities."""
        if error.reply_code != PRECONDITION_FAILED:
            raise error
        del self.channel  # RabbitMQ closed it
        if name not in self._without_priorities:
            self._without_priorities.add(name)
            logger.warning(
                "RabbitMQ queue %r was declared without priorities (x-max-priority): its"
                " messages go in arrival order, --breadth-first too. Delete it when it is"
                " empty (rabbitmqctl delete_queue %s) for the crawler to declare it anew.",
                name,
                name,
            )
        return self.channel.queue_declare(queue=name, durable=True, passive=True)
