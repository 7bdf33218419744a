"""The test session's own services, as pytest-redis and pytest-rabbitmq make them: a
Memcached and a Redis on free ports, a virtual host of its own on this machine's
RabbitMQ, and Dramatiq's Prometheus port and files; made when the session starts,
removed when it ends.  The session's environment points at them, so every test, worker
and seeder uses them and nothing of the user's.

And a guard: before the session, a mark in each of the user's services (the ``crawler``
queue of ``RABBITMQ_URL``, a key in the Redis database the tests once flushed, a key in
the default Memcached), checked after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pika
import redis

from crawler.brokers import QUEUE
from crawler.brokers.rabbitmq import MAX_PRIORITY
from crawler.environment import rabbitmq_url
from crawler.stores.memcached import MemcachedError, client_of

#: What the user's services look like to the tests, before the session points elsewhere.
USERS_REDIS_URL = "redis://127.0.0.1:6379/15"
USERS_MEMCACHED = "127.0.0.1:11211"


def start() -> Callable[[], None]:
    """Start the session's services, point ``os.environ`` at them: what stops them."""
    from tests.support import MemcachedProcess, RedisProcess, free_port

    directory = Path(tempfile.mkdtemp(prefix="crawler-tests-"))
    memcached = MemcachedProcess(memory_mb=256)
    (directory / "redis").mkdir()
    store = RedisProcess(directory / "redis", appendfsync="no")
    vhost = f"crawler-tests-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    _rabbitmqctl("add_vhost", vhost)
    user = urllib.parse.urlsplit(rabbitmq_url()).username or "guest"
    _rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
    parts = urllib.parse.urlsplit(rabbitmq_url())
    own_rabbitmq = urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(vhost)))
    os.environ.update(
        CRAWLER_OWN_SERVICES="1",
        MEMCACHED_SERVERS=memcached.servers,
        CRAWLER_TEST_REDIS_URL=store.url.rsplit("/", 1)[0] + "/15",
        RABBITMQ_URL=own_rabbitmq,
        dramatiq_prom_host="127.0.0.1",
        dramatiq_prom_port=str(free_port()),
        dramatiq_prom_db=str(directory / "prometheus"),
    )
    (directory / "prometheus").mkdir()
    for name in ("REDIS", "REDIS_URL", "DEDUP_URL"):
        os.environ.pop(name, None)

    def stop() -> None:
        memcached.stop()
        store.shut_down()
        _rabbitmqctl("delete_vhost", vhost)
        shutil.rmtree(directory, ignore_errors=True)

    return stop


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "--quiet", *args], check=True, capture_output=True, timeout=60)


class UsersData:
    """A mark in each of the user's services that answers, to find intact afterwards.

    Parameters:
      rabbitmq(str): The user's RabbitMQ (``RABBITMQ_URL`` before the session).
    """

    def __init__(self, rabbitmq: str) -> None:
        self.rabbitmq = rabbitmq
        self.mark = f"crawler-tests-mark-{uuid.uuid4().hex}"
        self.planted: list[str] = []
        self.created_queue = False

    def plant(self) -> None:
        with suppress(redis.RedisError):
            redis.Redis.from_url(USERS_REDIS_URL).set(self.mark, b"the user's")
            self.planted.append("redis")
        with suppress(MemcachedError):
            client = client_of([USERS_MEMCACHED])
            client.set(self.mark, b"the user's")
            client.disconnect_all()
            self.planted.append("memcached")
        with suppress(pika.exceptions.AMQPError):
            connection = pika.BlockingConnection(pika.URLParameters(self.rabbitmq))
            channel = connection.channel()
            try:
                channel.queue_declare(QUEUE, passive=True)
            except pika.exceptions.ChannelClosedByBroker:
                channel = connection.channel()
                channel.queue_declare(
                    QUEUE, durable=True, arguments={"x-max-priority": MAX_PRIORITY}
                )
                self.created_queue = True
            channel.basic_publish("", QUEUE, self.mark.encode())
            connection.close()
            self.planted.append("rabbitmq")

    def missing(self) -> list[str]:
        """The services whose mark is gone (and the marks taken away again)."""
        gone = []
        if "redis" in self.planted:
            client = redis.Redis.from_url(USERS_REDIS_URL)
            if client.get(self.mark) != b"the user's":
                gone.append(f"redis {USERS_REDIS_URL}")
            client.delete(self.mark)
        if "memcached" in self.planted:
            memcached = client_of([USERS_MEMCACHED])
            if memcached.get(self.mark) != b"the user's":
                gone.append(f"memcached {USERS_MEMCACHED}")
            memcached.delete(self.mark)
            memcached.disconnect_all()
        if "rabbitmq" in self.planted and not self._take_back_queue_mark():
            gone.append(f"the {QUEUE!r} queue of RabbitMQ")
        return gone

    def _take_back_queue_mark(self) -> bool:
        connection = pika.BlockingConnection(pika.URLParameters(self.rabbitmq))
        channel = connection.channel()
        found = False
        try:
            while not found:
                method, _, body = channel.basic_get(QUEUE)
                if method is None:
                    break
                if body == self.mark.encode():
                    channel.basic_ack(method.delivery_tag)
                    found = True
            channel.close()  # what is not acknowledged goes back to the queue, as it was
            if self.created_queue:
                try:
                    connection.channel().queue_delete(QUEUE, if_empty=True)
                except pika.exceptions.ChannelClosedByBroker as e:
                    if e.reply_code != 406:  # not empty: another run's or user's now, left
                        raise
        finally:
            if connection.is_open:
                connection.close()
        return found
