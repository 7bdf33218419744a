"""A page handler whose module declares a Dramatiq actor of its own, without ``broker=``
(slow work handed on, as docs/usage.md suggests): loaded by a worker, the actor must
be on the worker's broker."""

from __future__ import annotations

from typing import Any

import dramatiq

from crawler.handlers import Page


@dramatiq.actor(queue_name="tests-slow-work")
def slow_work(url: str) -> None:
    pass


def hand_on(page: Page) -> dict[str, Any]:
    slow_work.send(page.url)
    return {}
