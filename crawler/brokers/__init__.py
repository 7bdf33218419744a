"""The crawl's broker: RabbitMQ, or Redis with ``REDIS=1``, each delivering every message
a worker sends or handing back the message that sent it (:mod:`.send_back`)."""

from __future__ import annotations

import dramatiq
from dramatiq.middleware import CurrentMessage, TimeLimit
from dramatiq.middleware.prometheus import Prometheus

from crawler.brokers.returning import broker_errors
from crawler.environment import (
    publish_confirms,
    rabbitmq_url,
    redis_broker_settings,
    redis_url,
    uses_redis,
)
from crawler.middleware import PromptDelays, RetryTurns, SendBack, TimeLimitOver, install

__all__ = ["QUEUE", "SendBack", "broker_errors", "make_broker"]

#: The queue of the ``crawl`` actor.  Not Dramatiq's ``default``: on RabbitMQ the crawler's
#: queue carries priorities (``x-max-priority``, for ``--breadth-first``), and a queue's
#: arguments are fixed by whoever declares it first, so sharing ``default`` would break
#: every plain Dramatiq program on the same broker (or the crawler's priorities).
QUEUE = "crawler"


def make_broker(send_back: SendBack | None = None) -> dramatiq.Broker:
    """A ``RedisBroker`` when ``REDIS=1``, otherwise a ``RabbitmqBroker``; either hands
    back the messages ``send_back`` marks instead of acknowledging them.

    Neither connects until the first message is sent or consumed.  The Redis
    broker checks for dead workers often enough that the messages a killed
    worker held come back within about a minute (Dramatiq's default is rare).
    """
    send_back = send_back or SendBack()
    broker: dramatiq.Broker
    if uses_redis():
        from crawler.brokers.redis import PromptRedisBroker

        broker = PromptRedisBroker(send_back=send_back, url=redis_url(), **redis_broker_settings())
    else:
        from crawler.brokers.rabbitmq import ReturningRabbitmqBroker

        # With publisher confirms a publish returns once RabbitMQ holds the message, so a
        # message is never acknowledged on the strength of a publish lost in a broker
        # crash; they cost about a quarter of the pages per second, so they are opt-in.
        broker = ReturningRabbitmqBroker(
            send_back=send_back, url=rabbitmq_url(), confirm_delivery=publish_confirms()
        )
    time_limit = next(m for m in broker.middleware if isinstance(m, TimeLimit))
    # Prometheus serves /metrics on port 9191 from `dramatiq` workers.
    install(
        broker, CurrentMessage(), Prometheus(), PromptDelays(), RetryTurns(),
        TimeLimitOver(time_limit),
    )  # fmt: skip
    return broker
