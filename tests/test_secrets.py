"""Broker and dedup-store passwords stay secret: a crawl of real workers, with a password
in ``RABBITMQ_URL``, ``REDIS_URL`` and ``DEDUP_URL``, shows it in none of its outputs
(worker log, the seeder's words, ``--output`` records, ``--status``, ``--dead-letters``,
metrics), whether it succeeds or cannot reach a service.

RabbitMQ gets a user and a virtual host of this module's own (``rabbitmqctl``), Redis an
ACL user (``ACL SETUSER``), each with a password new on every run, all removed after.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from crawler.stores.memcached import MemcachedClient
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import (
    FAST_FAILURES,
    crawl_id_of,
    metric,
    metrics_port,
    own_redis_url,
    read_metrics,
    wait_for_crawl,
)
from tests.workers import WorkerProcesses, environment, seed

RABBITMQCTL = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
PAGES = 5
#: A port nothing listens on (discard): a service there cannot be reached.
CLOSED_PORT = 9


@dataclass(frozen=True)
class Credentials:
    """A user of RabbitMQ (on its own virtual host) and of Redis, sharing one password."""

    user: str
    password: str
    vhost: str

    def rabbitmq_url(self, *, user: str | None = None, port: int = 5672) -> str:
        # One connection attempt: a refusal is reported at once, not after 5 tries.
        return (
            f"amqp://{user or self.user}:{self.password}@127.0.0.1:{port}/{self.vhost}"
            "?connection_attempts=1"
        )

    def redis_url(self, *, user: str | None = None, port: int | None = None) -> str:
        parts = urlsplit(own_redis_url())
        host = f"{parts.hostname}:{port or parts.port or 6379}"
        return urlunsplit(parts._replace(netloc=f"{user or self.user}:{self.password}@{host}"))


@pytest.fixture(scope="module")
def credentials() -> Iterator[Credentials]:
    name = f"crawler-secret-test-{uuid.uuid4().hex[:8]}"
    secret = Credentials(user=name, password=f"pw-{uuid.uuid4().hex}", vhost=name)
    admin = redis.Redis.from_url(own_redis_url())
    try:
        rabbitmqctl("add_vhost", secret.vhost)
        rabbitmqctl("add_user", secret.user, secret.password)
        rabbitmqctl("set_permissions", "-p", secret.vhost, secret.user, ".*", ".*", ".*")
        admin.acl_setuser(
            secret.user,
            enabled=True,
            passwords=[f"+{secret.password}"],
            keys=["*"],
            channels=["*"],
            commands=["+@all"],
        )
        yield secret
    finally:
        admin.acl_deluser(secret.user)
        admin.close()
        rabbitmqctl("delete_user", secret.user, check=False)
        rabbitmqctl("delete_vhost", secret.vhost, check=False)  # its queues with it


def rabbitmqctl(*args: str, check: bool = True) -> None:
    subprocess.run([RABBITMQCTL, "-q", *args], check=check, capture_output=True, timeout=30)


def assert_nowhere(secret: str, outputs: dict[str, str]) -> None:
    """``secret`` appears in none of ``outputs`` (named, for the failure message)."""
    leaks = {name: text for name, text in outputs.items() if secret in text}
    assert not leaks, f"the password is in: {', '.join(leaks)}\n" + "\n".join(
        line for text in leaks.values() for line in text.splitlines() if secret in line
    )


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_a_crawl_with_passwords_fetches_every_page_and_shows_them_nowhere(
    broker: str,
    credentials: Credentials,
    site: SiteServer,
    memcached: MemcachedClient,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    if broker == "rabbitmq":  # the crawl's claims and counters in Memcached
        services = {"RABBITMQ_URL": credentials.rabbitmq_url()}
    else:  # the crawl's claims and counters in the broker's Redis database, emptied
        request.getfixturevalue("redis_env")
        url = credentials.redis_url()
        services = {"REDIS": "1", "REDIS_URL": url, "DEDUP_URL": url}
    env = environment(
        **services,
        **FAST_FAILURES,
        dramatiq_prom_db=str(tmp_path / "prometheus"),
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=2))
    site.behaviors["/broken.html"] = lambda handler, nth: handler.send_error(500)
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        # A broken page as well: its failure goes into a record, the summary and the
        # dead-letter queue.
        waiting = wait_for_crawl(
            env, site.url(page_path(0)), site.url("/broken.html"), "--output", str(output)
        )
        stdout, stderr = waiting.communicate(timeout=60)
        crawl_id = crawl_id_of(stdout)
        status = seed(env, "--status", crawl_id)
        dead = seed(env, "--dead-letters", crawl_id)
        metrics = read_metrics(metrics_port(env))
    finally:
        assert workers.stop() == 0

    assert waiting.returncode == 1, stderr  # the broken page failed, the rest was crawled
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)} | {"/broken.html": 4}
    assert f": {PAGES} pages fetched" in stdout and "1 failed." in stdout
    assert f": finished: {PAGES} pages fetched, " in status.stdout
    assert f"1 dead-lettered URL(s) of crawl {crawl_id}" in dead.stdout
    assert metric(metrics, 'crawler_pages_total{outcome="crawled"}') == PAGES
    assert len(output.read_text().splitlines()) == PAGES + 1
    assert_nowhere(
        credentials.password,
        {
            "worker log": "\n".join(workers.lines),
            "seeder stdout": stdout,
            "seeder stderr": stderr,
            "--output records": output.read_text(),
            "--status": status.stdout + status.stderr,
            "--dead-letters": dead.stdout + dead.stderr,
            "metrics": metrics,
        },
    )


def unreachable_env(case: str, secret: Credentials) -> dict[str, str]:
    """The environment of ``case``, one of :data:`UNREACHABLE`: the right password, but
    a wrong user or port."""
    wrong_user = secret.redis_url(user="nobody")
    wrong_port = secret.redis_url(port=CLOSED_PORT)
    return {
        "rabbitmq, a wrong user": environment(RABBITMQ_URL=secret.rabbitmq_url(user="nobody")),
        "rabbitmq, a wrong port": environment(RABBITMQ_URL=secret.rabbitmq_url(port=CLOSED_PORT)),
        "redis, a wrong user": environment(REDIS="1", REDIS_URL=wrong_user, DEDUP_URL=wrong_user),
        "redis, a wrong port": environment(REDIS="1", REDIS_URL=wrong_port, DEDUP_URL=wrong_port),
        "the dedup store in redis, a wrong user": environment(
            RABBITMQ_URL=secret.rabbitmq_url(), DEDUP_URL=wrong_user
        ),
    }[case]


#: What a seeder cannot reach in each case: the service its ``error: cannot reach ...``
#: line names, and whether ``--status`` (which reads the dedup store) reaches the store.
UNREACHABLE = {
    "rabbitmq, a wrong user": ("RabbitMQ", True),
    "rabbitmq, a wrong port": ("RabbitMQ", True),
    "redis, a wrong user": ("Redis", False),
    "redis, a wrong port": ("Redis", False),
    "the dedup store in redis, a wrong user": ("Redis", False),
}


@pytest.mark.parametrize("case", list(UNREACHABLE))
def test_a_seeder_that_cannot_reach_a_service_names_it_without_the_password(
    case: str, credentials: Credentials, tmp_path: Path
) -> None:
    name, store_reachable = UNREACHABLE[case]
    env = unreachable_env(case, credentials)
    output = tmp_path / "records.jsonl"

    seeding = seed(env, "http://127.0.0.1:1/", "--wait", "--output", str(output))
    status = seed(env, "--status", uuid.uuid4().hex)

    assert seeding.returncode == 1
    assert seeding.stderr.startswith(f"error: cannot reach {name} at ")
    assert seeding.stderr.count("\n") == 1
    if store_reachable:  # Memcached: it knows no such crawl
        assert status.returncode == 2 and status.stderr.startswith("error: no crawl ")
    else:
        assert status.returncode == 1
        assert status.stderr.startswith("error: cannot reach Redis at redis://127.0.0.1:")
    assert_nowhere(
        credentials.password,
        {
            "seeder stdout": seeding.stdout,
            "seeder stderr": seeding.stderr,
            "--output records": output.read_text() if output.exists() else "",
            "--status": status.stdout + status.stderr,
        },
    )


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_a_worker_that_cannot_reach_its_broker_logs_no_password(
    broker: str, credentials: Credentials, tmp_path: Path
) -> None:
    env = environment(
        **(
            {"RABBITMQ_URL": credentials.rabbitmq_url(port=CLOSED_PORT)}
            if broker == "rabbitmq"
            else {
                "REDIS": "1",
                "REDIS_URL": credentials.redis_url(port=CLOSED_PORT),
                "DEDUP_URL": credentials.redis_url(port=CLOSED_PORT),
            }
        ),
        dramatiq_prom_db=str(tmp_path),
    )
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        # Both consumers (of the queue and of its delay queue) fail, and say why.
        workers.wait_until(lambda: workers.count("Consumer encountered a connection error") >= 2)
    finally:
        assert workers.stop() == 0

    assert_nowhere(credentials.password, {"worker log": "\n".join(workers.lines)})


@pytest.mark.parametrize("variable", ["RABBITMQ_URL", "REDIS_URL", "DEDUP_URL"])
def test_a_password_with_an_unescaped_slash_is_refused_without_showing_a_piece_of_it(
    variable: str, credentials: Credentials, tmp_path: Path
) -> None:
    """urllib reads ``user:abc/def@host`` as host ``user``, port ``abc``, path ``/def@host``:
    pika and redis-py would quote ``abc`` in their error."""
    left, right = credentials.password[:12], credentials.password[12:]
    scheme = "amqp" if variable == "RABBITMQ_URL" else "redis"
    url = f"{scheme}://{credentials.user}:{left}/{right}@127.0.0.1:6379/15"
    env = environment(
        **{variable: url},
        **({"REDIS": "1"} if variable == "REDIS_URL" else {}),
        dramatiq_prom_db=str(tmp_path),
    )

    seeding = seed(env, "http://127.0.0.1:1/")
    workers = WorkerProcesses(env, processes=1, threads=1)
    assert workers.process.wait(timeout=60) != 0
    workers.stop()

    for piece in (left, right):
        assert_nowhere(
            piece,
            {
                "seeder stderr": seeding.stdout + seeding.stderr,
                "worker log": "\n".join(workers.lines),
            },
        )
    refusal = f"{variable} cannot be read as a URL"
    assert seeding.returncode != 0 and refusal in seeding.stderr
    assert workers.logged_any(refusal)


def test_a_dedup_url_of_another_scheme_is_refused_without_showing_it(
    credentials: Credentials,
) -> None:
    env = environment(DEDUP_URL=f"memcached://{credentials.user}:{credentials.password}@127.0.0.1")

    seeding = seed(env, "http://127.0.0.1:1/")

    assert seeding.returncode != 0
    assert "DEDUP_URL must be a redis://, rediss:// or redis+cluster:// URL" in seeding.stderr
    assert_nowhere(credentials.password, {"seeder stderr": seeding.stderr})
