"""The brokers' middleware hooks (:class:`crawler.brokers.hooks.QuickHooks`) are called as
Dramatiq's own broker calls them: the same middleware, in the same order, with the same
failures; and robots.txt rules parsed once a body (:func:`robots_rules.parsed`)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Middleware, SkipMessage

from crawler.brokers.hooks import QuickHooks
from crawler.brokers.local import PriorityStubBroker
from crawler.frontier import robots_rules


class Witness(Middleware):
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    def before_enqueue(self, broker: Any, message: Any, delay: Any) -> None:
        self.calls.append(f"{self.name} before")

    def after_enqueue(self, broker: Any, message: Any, delay: Any) -> None:
        self.calls.append(f"{self.name} after")


class Skipping(Middleware):
    def before_process_message(self, broker: Any, message: Any) -> None:
        raise SkipMessage()


class Failing(Middleware):
    def after_ack(self, broker: Any, message: Any) -> None:
        raise RuntimeError("broken hook")


class Inherits(Witness):
    """Hooks of a base class other than Dramatiq's are hooks too."""


def calls_made(broker: Any) -> list[str]:
    calls: list[str] = []
    broker.add_middleware(Witness("a", calls))
    broker.emit_before("enqueue", None, None)
    broker.add_middleware(Inherits("b", calls))  # added after the hooks were first looked up
    broker.emit_before("enqueue", None, None)
    broker.emit_after("enqueue", None, None)
    return calls


def test_hooks_are_called_as_dramatiq_calls_them(caplog: pytest.LogCaptureFixture) -> None:
    ours, dramatiqs = PriorityStubBroker(), StubBroker()
    assert calls_made(ours) == calls_made(dramatiqs) == [
        "a before", "a before", "b before", "b after", "a after",
    ]  # fmt: skip
    # An instance's own hook counts as Dramatiq's getattr finds it.
    calls: list[str] = []
    plain = Middleware()
    plain.after_nack = lambda broker, message: calls.append("instance")  # type: ignore[method-assign]
    ours.add_middleware(plain)
    ours.emit_after("nack", None)
    assert calls == ["instance"]
    # A MiddlewareError from a before_ hook stops the message; any other failure is logged.
    ours.add_middleware(Skipping())
    with pytest.raises(SkipMessage):
        ours.emit_before("process_message", None)
    ours.add_middleware(Failing())
    with caplog.at_level(logging.CRITICAL):
        ours.emit_after("ack", None)
    assert "Unexpected failure in after_ack" in caplog.text


def test_a_broker_made_without_middleware_emits_to_none() -> None:
    class Bare(QuickHooks, StubBroker):
        pass

    bare = Bare(middleware=[])
    bare.emit_before("enqueue", None, None)
    bare.emit_after("enqueue", None, None)
    assert bare.middleware == []


def test_robots_rules_are_parsed_once_a_body() -> None:
    body = b"User-agent: *\nDisallow: /private\n"
    rules = robots_rules.parsed(body, "dramatiq-crawler/1")
    assert robots_rules.parsed(bytes(body), "dramatiq-crawler/1") is rules
    assert not rules.can_fetch("http://a.example/private/x", "any")
    assert robots_rules.parsed(body, "other/1") is not rules
    long = body + b"#" * robots_rules.KEPT_BODY
    assert robots_rules.parsed(long, "dramatiq-crawler/1") is not robots_rules.parsed(
        long, "dramatiq-crawler/1"
    )
