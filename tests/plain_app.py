"""A plain Dramatiq program on the ``default`` queue, as Dramatiq's own examples are:
the neighbour the crawler must leave alone on a shared RabbitMQ.  Each message's number
is appended to the file ``PLAIN_APP_LOG`` names."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

broker = RabbitmqBroker(url=os.environ["RABBITMQ_URL"])
dramatiq.set_broker(broker)


@dramatiq.actor
def note(number: int) -> None:
    with open(os.environ["PLAIN_APP_LOG"], "a") as log:
        log.write(f"{number}\n")
