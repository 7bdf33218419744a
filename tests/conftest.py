"""Fixtures for the real services and for fast StubBroker tests; what they share with
the test modules is in :mod:`tests.support`."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from crawler.environment import rabbitmq_url
from crawler.middleware import CurrentBroker, install
from crawler.stores.memcached import MemcachedClient
from crawler.stores.redis import RedisStorePool
from crawler.tracking.bookkeeping import keep_books
from tests import cpu_report, private_services
from tests.cpu_report import pytest_runtest_makereport  # noqa: F401  (a hook)
from tests.postgres_server import PostgresProcess
from tests.site_server import SiteServer
from tests.support import (
    MemcachedProcess,
    RedisClusterProcesses,
    RedisProcess,
    clean_broker,
    clean_memcached,
)


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module is imported (``crawler.example`` reads its broker's address
    then): mark the user's services, and point the environment at the session's own.
    Under pytest-xdist each worker process has services of its own; the controller,
    which runs no test, starts none."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Run as a background job: its children would ignore Ctrl-C too, and the tests
        # that press it would see nothing happen.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    cpu_report.register(config)
    worker = hasattr(config, "workerinput")
    if not worker:
        users = private_services.UsersData(rabbitmq_url())
        users.plant()
        config.stash[USERS] = users
    if worker or not config.getoption("numprocesses", default=None):
        config.stash[STOP] = private_services.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The user's services hold what they held: else the session fails, saying which."""
    if STOP in session.config.stash:
        session.config.stash[STOP]()
        del session.config.stash[STOP]
    users = session.config.stash.get(USERS, None)
    if users is None:
        return
    missing = users.missing()
    if missing:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"the tests touched the user's data: {', '.join(missing)}", red=True
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


USERS = pytest.StashKey[private_services.UsersData]()
STOP = pytest.StashKey[Callable[[], None]]()


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
    """The real ``crawl`` actor and its sitemaps' actor, bound to a StubBroker for the test
    (tests call ``example.crawl`` and send with it directly: the crawler itself never
    rebinds an actor, its bodies send through ``actor_for``)."""
    from crawler import example

    broker = StubBroker()
    install(broker, CurrentBroker())
    keep_books(broker, example.stores, example.lifetimes)
    broker.emit_after("process_boot")
    original = example.crawl.broker
    for actor in (example.crawl, example.crawl_sitemap):
        broker.declare_actor(actor)
        actor.broker = broker
    dramatiq.set_broker(broker)
    yield broker
    example.crawl.broker = example.crawl_sitemap.broker = original
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


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresProcess]:
    """A PostgreSQL of the tests' own (:mod:`tests.postgres_server`), removed afterwards."""
    server = PostgresProcess()
    yield server
    server.remove()


@pytest.fixture
def own_memcached() -> Iterator[MemcachedProcess]:
    memcached = MemcachedProcess()
    yield memcached
    memcached.stop()
