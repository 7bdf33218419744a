"""Fixtures for the real services and for fast StubBroker tests; what they share with
the test modules is in :mod:`tests.support`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.stores.memcached import MemcachedClient
from crawler.stores.redis import RedisStorePool
from crawler.tracking.bookkeeping import keep_books
from tests.site_server import SiteServer
from tests.support import (
    MemcachedProcess,
    RedisClusterProcesses,
    RedisProcess,
    clean_broker,
    clean_memcached,
)


@pytest.fixture
def site() -> Iterator[SiteServer]:
    server = SiteServer().start()
    yield server
    server.stop()


@pytest.fixture
def memcached() -> Iterator[MemcachedClient]:
    with clean_memcached() as client:
        yield client


@pytest.fixture(scope="session")
def own_redis_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A Redis of the tests' own for the ``DEDUP_URL`` store (append-only file)."""
    server = RedisProcess(tmp_path_factory.mktemp("redis-store"))
    yield server
    server.shut_down()


@pytest.fixture(scope="session")
def own_redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    """A Redis Cluster of the tests' own (three nodes) for ``DEDUP_URL=redis+cluster://``."""
    cluster = RedisClusterProcesses(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.shut_down()


@pytest.fixture(params=["memcached", "redis", "redis-cluster"])
def store(request: pytest.FixtureRequest, memcached: MemcachedClient) -> Any:
    """A dedup store's client, emptied: Memcached, or Redis as with ``DEDUP_URL`` (one
    server, or a cluster of three)."""
    if request.param == "memcached":
        return memcached
    if request.param == "redis-cluster":
        cluster = request.getfixturevalue("own_redis_cluster")
        cluster.flush()
        return RedisStorePool(cluster.url).client
    server = request.getfixturevalue("own_redis_store")
    server.flush()
    return RedisStorePool(server.url).client


@pytest.fixture(params=["memcached", "redis"])
def dedup_env(request: pytest.FixtureRequest, memcached: MemcachedClient) -> dict[str, str]:
    """The variables choosing the dedup store of a crawl's workers and seeder, emptied:
    none for Memcached (the default), ``DEDUP_URL`` for the tests' own Redis."""
    if request.param == "memcached":
        return {}
    server = request.getfixturevalue("own_redis_store")
    server.flush()
    return {"DEDUP_URL": server.url}


@pytest.fixture
def stub_broker(memcached: MemcachedClient) -> Iterator[StubBroker]:
    """The real ``crawl`` actor, bound to a StubBroker for the test."""
    broker = StubBroker()
    keep_books(broker, example.stores, example.lifetimes)
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
def rabbitmq_env(memcached: MemcachedClient) -> Iterator[dict[str, str]]:
    """Environment for workers and seeder on RabbitMQ, its queue purged."""
    with clean_broker("rabbitmq") as env:
        yield env


@pytest.fixture
def redis_env(memcached: MemcachedClient) -> Iterator[dict[str, str]]:
    """Environment for workers and seeder on Redis (``REDIS=1``), its database flushed."""
    with clean_broker("redis") as env:
        yield env


@pytest.fixture
def own_memcached() -> Iterator[MemcachedProcess]:
    memcached = MemcachedProcess()
    yield memcached
    memcached.stop()
