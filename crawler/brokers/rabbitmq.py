"""Dramatiq's RabbitMQ broker, handing back unsent messages, its queues with priorities."""

from __future__ import annotations

import logging
from typing import Any

import pika.exceptions
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.common import dq_name

from crawler.brokers.returning import ReturningConsumer, middleware
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
