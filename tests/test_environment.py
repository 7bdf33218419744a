"""Settings read from the environment, and what a worker says when one is wrong."""

from __future__ import annotations

import os
import subprocess
import uuid
from types import SimpleNamespace

import dramatiq.brokers.redis
import pytest

from crawler.brokers import make_broker
from crawler.environment import (
    Lifetimes,
    check_variables,
    dedup_store_name,
    dedup_url,
    lifetimes_from_environment,
    limits_from_environment,
    memcached_servers,
    rabbitmq_url,
    warc_max_bytes,
)
from crawler.fetching import new_session
from tests.site_server import SiteServer
from tests.support import clean_broker
from tests.workers import BIN, WorkerProcesses, environment


def test_rabbitmq_url_gets_dramatiqs_connection_defaults_unless_it_sets_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RABBITMQ_URL", "amqp://u:p@mq:5673/vhost?heartbeat=30")

    assert rabbitmq_url() == (
        "amqp://u:p@mq:5673/vhost?heartbeat=30&connection_attempts=5&blocked_connection_timeout=30"
    )


def test_memcached_servers_are_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMCACHED_SERVERS", "mc1:11211, mc2 ,")

    assert memcached_servers() == ["mc1:11211", "mc2"]


def test_limits_come_from_crawler_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAWLER_FETCH_DEADLINE", "2.5")
    monkeypatch.setenv("CRAWLER_MAX_LINKS_PER_PAGE", "7")

    limits = limits_from_environment()

    assert (limits.fetch_deadline, limits.max_links_per_page) == (2.5, 7)
    assert limits.max_body_bytes == 10 * 1024 * 1024


@pytest.mark.parametrize("value", ["abc", "0", "-3"])
def test_a_bad_limit_is_refused_naming_the_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAWLER_STORE_PATIENCE", value)

    with pytest.raises(
        ValueError, match=f"CRAWLER_STORE_PATIENCE must be a positive number, not '{value}'"
    ):
        limits_from_environment()


def test_a_worker_with_a_bad_limit_stops_at_start_up_saying_why() -> None:
    workers = WorkerProcesses(environment(CRAWLER_FETCH_DEADLINE="soon"), processes=1, threads=1)

    assert workers.process.wait(timeout=60) != 0
    workers.stop()
    assert workers.logged_any("CRAWLER_FETCH_DEADLINE must be a positive number, not 'soon'")


def test_fetch_sessions_read_the_environment_once_unless_a_proxy_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [name for name in os.environ if "proxy" in name.lower()]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")

    quiet = new_session()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    proxied = new_session()

    assert (quiet.trust_env, quiet.verify) == (False, "/etc/ssl/certs/ca-certificates.crt")
    assert proxied.trust_env is True


def test_an_idle_redis_worker_looks_at_its_queue_again_within_the_poll_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[float] = []
    # Dramatiq's Redis module alone gets a clock whose sleep only notes the pause.
    monkeypatch.setattr(dramatiq.brokers.redis, "time", SimpleNamespace(sleep=pauses.append))
    monkeypatch.setenv("CRAWLER_REDIS_POLL_MS", "40")
    with clean_broker("redis") as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        broker = make_broker()
        try:
            consumer = broker.consume(f"idle-{uuid.uuid4()}", prefetch=1, timeout=1000)
            polls = [next(consumer) for _ in range(12)]  # Dramatiq's pause doubles each time
        finally:
            broker.close()

    assert polls == [None] * 12
    # jittered: the capped pause is 50% to 100% of the cap
    assert len(pauses) == 12 and max(pauses) <= 0.04 and pauses[-1] >= 0.02


def test_lifetimes_come_from_crawler_variables_within_memcacheds_30_days(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert lifetimes_from_environment() == Lifetimes(claim=3600, grace=7 * 24 * 3600)
    monkeypatch.setenv("CRAWLER_CLAIM_TTL", "1.5")
    monkeypatch.setenv("CRAWLER_CRAWL_GRACE", "60")
    assert lifetimes_from_environment() == Lifetimes(claim=2, grace=60)
    assert lifetimes_from_environment().resend == 12
    monkeypatch.setenv("CRAWLER_RESEND_DELAY", "0")
    assert lifetimes_from_environment().resend == 0
    monkeypatch.setenv("CRAWLER_RESEND_DELAY", "-1")
    with pytest.raises(ValueError, match="CRAWLER_RESEND_DELAY must be a positive number or 0"):
        lifetimes_from_environment()
    monkeypatch.delenv("CRAWLER_RESEND_DELAY")

    monkeypatch.setenv("CRAWLER_CRAWL_GRACE", str(31 * 24 * 3600))
    with pytest.raises(ValueError, match="CRAWLER_CRAWL_GRACE must be at most 2592000 seconds"):
        lifetimes_from_environment()


def test_dedup_url_is_a_redis_url_or_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMCACHED_SERVERS", raising=False)  # the default, not the session's
    assert dedup_url() is None
    assert dedup_store_name() == "Memcached at localhost"
    monkeypatch.setenv("DEDUP_URL", "redis://:secret@store.example:6380/2")
    assert dedup_url() == "redis://:secret@store.example:6380/2"
    assert dedup_store_name() == "Redis at redis://store.example:6380/2"  # no password
    monkeypatch.setenv("DEDUP_URL", "memcached://store:11211")
    with pytest.raises(
        ValueError, match=r"DEDUP_URL must be a redis://, rediss:// or redis\+cluster:// URL"
    ):
        dedup_url()


@pytest.mark.parametrize("value", ["abc", "0", "-1", "0.5", "nan", "inf", "1e400"])
def test_a_bad_whole_number_is_refused_naming_the_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAWLER_RENDER_PAGES", value)

    with pytest.raises(
        ValueError, match=f"CRAWLER_RENDER_PAGES must be a whole number above zero, not '{value}'"
    ):
        check_variables()


def test_numbers_are_finite_unless_infinity_means_something(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for value in ("nan", "inf"):
        monkeypatch.setenv("CRAWLER_FETCH_DEADLINE", value)
        with pytest.raises(ValueError, match="CRAWLER_FETCH_DEADLINE must be a positive number"):
            check_variables()
    monkeypatch.delenv("CRAWLER_FETCH_DEADLINE")
    monkeypatch.setenv("CRAWLER_LOCAL_BUSY", "inf")  # every thread at work, whatever the CPU
    monkeypatch.setenv("CRAWLER_WARC_MAX_BYTES", "1e6")
    check_variables()
    assert warc_max_bytes() == 1_000_000


#: Services nothing listens on: the commands stop before they would reach any.
NO_SERVICES = {
    "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:9",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "MEMCACHED_SERVERS": "127.0.0.1:9",
}


@pytest.mark.parametrize(
    ("name", "value"), [("CRAWLER_RENDER_PAGES", "abc"), ("CRAWLER_RENDER_RESTART", "0")]
)
def test_a_bad_variable_stops_every_command_in_one_line_naming_it(
    name: str, value: str, site: SiteServer
) -> None:
    env = environment(**NO_SERVICES, **{name: value})
    said = f"{name} must be a whole number above zero, not {value!r}"
    commands = {
        "crawler crawl": ["crawl", "--local", site.url("/")],
        "crawler worker": ["worker", "-p", "1", "-t", "1"],
    }
    for prog, args in commands.items():
        stopped = subprocess.run(
            [str(BIN / "crawler"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (stopped.returncode, stopped.stderr) == (2, f"{prog}: {said}\n")

    workers = WorkerProcesses(env, processes=1, threads=1)  # dramatiq crawler.example

    assert workers.process.wait(timeout=60) == 2
    workers.stop()
    assert workers.logged_any(f"[example] [CRITICAL] {said}")
    assert not workers.logged_any("Traceback"), "\n".join(workers.lines)
    assert site.fetch_counts() == {}
