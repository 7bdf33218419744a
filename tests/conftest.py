"""Fixtures for the real services and for fast StubBroker tests.

The tests purge the ``default`` queue on ``RABBITMQ_URL``, flush the Redis
database at ``CRAWLER_TEST_REDIS_URL`` (db 15 unless set) and flush Memcached at
``MEMCACHED_SERVERS``: point them at services that hold nothing you need.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import dramatiq
import pylibmc
import pytest
import redis
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import CurrentMessage, Retries

from crawler import example
from crawler.bookkeeping import settle
from crawler.environment import memcached_servers, rabbitmq_url
from crawler.records import Recorder
from tests.site_server import SiteServer

TEST_REDIS_URL = os.getenv("CRAWLER_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def site() -> Iterator[SiteServer]:
    server = SiteServer().start()
    yield server
    server.stop()


#: Worker settings that keep fault tests short; the defaults users get are untouched.
FAST_FAILURES = {
    "CRAWLER_MIN_BACKOFF_MS": "100",
    "CRAWLER_MAX_BACKOFF_MS": "2000",
    "CRAWLER_FETCH_DEADLINE": "1.5",
    "CRAWLER_REDIS_HEARTBEAT_TIMEOUT_MS": "5000",
    "CRAWLER_REDIS_MAINTENANCE_CHANCE": "1000000",
}


@contextmanager
def clean_memcached() -> Iterator[pylibmc.Client]:
    client = pylibmc.Client(memcached_servers(), binary=True)
    client.flush_all()
    yield client
    client.flush_all()
    client.disconnect_all()


@contextmanager
def clean_broker(name: str) -> Iterator[dict[str, str]]:
    """The environment selecting broker ``name``, its crawler queues emptied around use."""
    if name == "redis":
        client = redis.Redis.from_url(TEST_REDIS_URL)
        client.flushdb()
        yield {"REDIS": "1", "REDIS_URL": TEST_REDIS_URL}
        client.flushdb()
        client.close()
    else:
        purge_rabbitmq()
        yield {"RABBITMQ_URL": rabbitmq_url()}
        purge_rabbitmq()


def purge_rabbitmq() -> None:
    broker = RabbitmqBroker(url=rabbitmq_url())
    broker.declare_queue("default", ensure=True)
    broker.flush_all()
    broker.close()


@pytest.fixture
def memcached() -> Iterator[pylibmc.Client]:
    with clean_memcached() as client:
        yield client


@pytest.fixture
def stub_broker(memcached: pylibmc.Client) -> Iterator[StubBroker]:
    """The real ``crawl`` actor, bound to a StubBroker for the test."""
    broker = StubBroker()
    broker.add_middleware(CurrentMessage())
    broker.add_middleware(
        Recorder(on_record=settle(lambda: example.memcache_pool, publish=None)), before=Retries
    )
    broker.emit_after("process_boot")
    original = example.crawl.broker
    broker.declare_actor(example.crawl)
    example.crawl.broker = broker
    dramatiq.set_broker(broker)
    yield broker
    example.crawl.broker = original
    dramatiq.set_broker(original)
    broker.close()


@pytest.fixture
def stub_worker(stub_broker: StubBroker) -> Iterator[dramatiq.Worker]:
    worker = dramatiq.Worker(stub_broker, worker_timeout=100, worker_threads=4)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def rabbitmq_env(memcached: pylibmc.Client) -> Iterator[dict[str, str]]:
    """Environment for workers and seeder on RabbitMQ, its queue purged."""
    with clean_broker("rabbitmq") as env:
        yield env


@pytest.fixture
def redis_env(memcached: pylibmc.Client) -> Iterator[dict[str, str]]:
    """Environment for workers and seeder on Redis (``REDIS=1``), its database flushed."""
    with clean_broker("redis") as env:
        yield env


class MemcachedProcess:
    """A Memcached of the test's own on a free port, to stop, pause and restart."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port: int = sock.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        as_root = ["-u", "root"] if os.geteuid() == 0 else []
        self.process = subprocess.Popen(
            ["memcached", *as_root, "-l", "127.0.0.1", "-p", str(self.port)]
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "memcached did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)


@pytest.fixture
def own_memcached() -> Iterator[MemcachedProcess]:
    memcached = MemcachedProcess()
    yield memcached
    memcached.stop()
