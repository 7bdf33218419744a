"""Service addresses from the environment, so one code base runs anywhere.

Every name here is documented in the README's configuration table.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import dramatiq

#: Where RabbitMQ listens unless ``RABBITMQ_URL`` says otherwise.
DEFAULT_RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672"
#: Where Redis listens unless ``REDIS_URL`` says otherwise.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: The Memcached servers unless ``MEMCACHED_SERVERS`` says otherwise.
DEFAULT_MEMCACHED_SERVERS = "localhost"

#: The connection settings Dramatiq's own default RabbitMQ broker uses; a URL
#: that sets one of them itself keeps its own value.
RABBITMQ_URL_DEFAULTS = {
    "heartbeat": "5",
    "connection_attempts": "5",
    "blocked_connection_timeout": "30",
}


def uses_redis() -> bool:
    """``REDIS=1`` selects the Redis broker, as in the upstream example."""
    return os.getenv("REDIS") == "1"


def rabbitmq_url() -> str:
    url = os.getenv("RABBITMQ_URL") or DEFAULT_RABBITMQ_URL
    parts = urlsplit(url)
    query = dict(RABBITMQ_URL_DEFAULTS)
    query.update(parse_qsl(parts.query))
    return urlunsplit(parts._replace(query=urlencode(query)))


def redis_url() -> str:
    return os.getenv("REDIS_URL") or DEFAULT_REDIS_URL


def memcached_servers() -> list[str]:
    """``MEMCACHED_SERVERS`` is a comma-separated list such as ``mc1:11211,mc2``."""
    value = os.getenv("MEMCACHED_SERVERS") or DEFAULT_MEMCACHED_SERVERS
    return [server.strip() for server in value.split(",") if server.strip()]


def make_broker() -> dramatiq.Broker:
    """A ``RedisBroker`` when ``REDIS=1``, otherwise a ``RabbitmqBroker``.

    Neither connects until the first message is sent or consumed.
    """
    if uses_redis():
        from dramatiq.brokers.redis import RedisBroker

        return RedisBroker(url=redis_url())  # type: ignore[no-untyped-call]

    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    return RabbitmqBroker(url=rabbitmq_url())
