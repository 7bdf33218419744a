"""Dramatiq's RabbitMQ broker, handing back unsent messages."""

from __future__ import annotations

from typing import Any

from dramatiq.brokers.rabbitmq import RabbitmqBroker

from crawler.brokers.send_back import ReturningConsumer, SendBack, middleware


class ReturningRabbitmqBroker(RabbitmqBroker):
    """Dramatiq's ``RabbitmqBroker``, its consumers handing back the messages
    ``send_back`` marks.

    Parameters:
      send_back(SendBack): Marks the messages whose follow-ups the broker refused.
    """

    def __init__(self, *, send_back: SendBack, **parameters: Any) -> None:
        super().__init__(middleware=middleware(send_back), **parameters)
        self.send_back = send_back

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        consumer = super().consume(queue_name, prefetch, timeout)
        return ReturningConsumer(consumer, self.send_back)
