"""``python -m crawler.example URL``: a bad URL is refused and nothing is enqueued."""

from __future__ import annotations

import pytest

from tests.support import own_redis_url, usage_error
from tests.workers import environment, queued_messages, seed

LONG_LABEL = "a" * 64
LONG_HOST = ".".join(["a" * 50] * 5) + ".com"  # 258 characters


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("not-a-url", "'not-a-url' is not an http:// or https:// URL"),
        ("ftp://127.0.0.1/file", "'ftp://127.0.0.1/file' is not an http:// or https:// URL"),
        ("http://", "'http://' has no host name"),
        (
            "http://127.0.0.1:99999/",
            "'http://127.0.0.1:99999/' is not a valid URL: Port out of range 0-65535",
        ),
        (
            "http://127.0.0.1:0/",
            "'http://127.0.0.1:0/' is not a valid URL: Port 0 is reserved: no server listens on it",
        ),
        ("http://a..b/", "'http://a..b/' is not a valid URL: Host name 'a..b' has an empty label"),
        (
            f"http://{LONG_LABEL}.com/",
            f"'http://{LONG_LABEL}.com/' is not a valid URL: "
            "Host name has a label of 64 characters, over 63",
        ),
        (
            f"http://{LONG_HOST}/",
            f"'http://{LONG_HOST}/' is not a valid URL: Host name of 258 characters, over 253",
        ),
    ],
)
def test_seeder_refuses_a_bad_url_and_enqueues_nothing(
    url: str, reason: str, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env)

    result = seed(env, url)

    assert result.returncode == 2
    assert usage_error(result.stderr) == (
        f"python -m crawler.example: error: argument url: {reason}"
    )
    assert queued_messages(env) == 0


def test_seeder_enqueues_one_message_for_a_good_url(rabbitmq_env: dict[str, str]) -> None:
    env = environment(**rabbitmq_env)

    result = seed(env, "http://127.0.0.1:1/page.html#section")

    assert result.returncode == 0, result.stderr
    assert queued_messages(env) == 1


def test_seeder_says_in_one_line_that_a_url_is_missing() -> None:
    result = seed(environment())

    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "python -m crawler.example: error: give at least one URL to crawl",
        "See 'python -m crawler.example --help'.",
    ]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (
            ["--local", "--threads", "0"],
            "argument --threads: '0' is not a whole number from 1 to 512",
        ),
        (["--max-pages", "1.5"], "argument --max-pages: '1.5' is not a whole number above zero"),
        (["--max-rate", "fast"], "argument --max-rate: 'fast' is not a number from 0.001 to 10000"),
        (["--max-depth", "-1"], "argument --max-depth: '-1' is not a whole number"),
    ],
)
def test_seeder_refuses_a_bad_option_value_saying_which(args: list[str], reason: str) -> None:
    result = seed(environment(), "http://127.0.0.1:1/", *args)

    assert result.returncode == 2
    assert usage_error(result.stderr) == f"python -m crawler.example: error: {reason}"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        # pika lets a failed look-up of the broker's host through bare (a gaierror).
        (
            {"RABBITMQ_URL": "amqp://guest:guest@no-such-host.invalid:5672?connection_attempts=1"},
            "RabbitMQ at amqp://no-such-host.invalid:5672",
        ),
        # The dedup store (a real Redis) answers, the broker does not: the broker is named.
        (
            {
                "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:9?connection_attempts=1",
                "DEDUP_URL": own_redis_url(),
            },
            "RabbitMQ at amqp://127.0.0.1:9",
        ),
    ],
)
def test_a_broker_the_seeder_cannot_reach_is_named_in_one_line(
    overrides: dict[str, str], named: str
) -> None:
    result = seed(environment(**overrides), "http://127.0.0.1:9/")

    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach {named}: "), result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1  # one line: why, and what to do about it
    reason = result.stderr.removeprefix(f"error: cannot reach {named}: ")
    assert reason[0].isalpha() and "(no reason given" not in reason  # always says why
    assert "set RABBITMQ_URL" in reason and "needs no service: --local)" in reason
