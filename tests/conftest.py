"""Fixtures for the real services and for fast StubBroker tests; what they share with
the test modules is in :mod:`tests.support`."""

from __future__ import annotations

from collections.abc import Iterator

import dramatiq
import pylibmc
import pytest
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.following.bookkeeping import keep_books
from tests.site_server import SiteServer
from tests.support import MemcachedProcess, clean_broker, clean_memcached


@pytest.fixture
def site() -> Iterator[SiteServer]:
    server = SiteServer().start()
    yield server
    server.stop()


@pytest.fixture
def memcached() -> Iterator[pylibmc.Client]:
    with clean_memcached() as client:
        yield client


@pytest.fixture
def stub_broker(memcached: pylibmc.Client) -> Iterator[StubBroker]:
    """The real ``crawl`` actor, bound to a StubBroker for the test."""
    broker = StubBroker()
    keep_books(broker, example.memcache_pool, example.lifetimes)
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


@pytest.fixture
def own_memcached() -> Iterator[MemcachedProcess]:
    memcached = MemcachedProcess()
    yield memcached
    memcached.stop()
