"""The crawler's Dramatiq middleware, one a module, as Dramatiq's own ``middleware``
package: :class:`Recorder` (a record of every ``crawl`` message), :class:`SendBack` (a
message whose follow-ups the broker refused comes back), :class:`ReliableRetries`
(Dramatiq's ``Retries`` through it), :class:`TimeLimitOver` (the time limit ends
with the actor), :class:`QuickRetries` (``--local``'s short backoff), :class:`RetryTurns`
(a retry takes a host turn of its own) and
:class:`CurrentBroker` (the broker of the message being processed: :func:`actor_for`)
and :class:`PromptDelays` (a worker puts delayed messages back on time).

:data:`ORDER` is the one place their order is kept, with Dramatiq's own, for workers,
``--local`` and the Python API alike: :func:`ordered` sorts a broker's first stack by
it, and :func:`install` adds a middleware to a broker at its place in it.
"""

from __future__ import annotations

import dramatiq
from dramatiq.middleware import (
    AgeLimit,
    Callbacks,
    CurrentMessage,
    Middleware,
    Pipelines,
    Retries,
    ShutdownNotifications,
    TimeLimit,
)
from dramatiq.middleware.prometheus import Prometheus

from crawler.middleware.current_broker import CurrentBroker, actor_for, parts_for
from crawler.middleware.prompt_delays import PromptDelays
from crawler.middleware.quick_retries import QuickRetries
from crawler.middleware.recorder import Recorder
from crawler.middleware.reliable_retries import ReliableRetries
from crawler.middleware.retry_turns import RetryTurns
from crawler.middleware.send_back import SendBack
from crawler.middleware.time_limit_over import TimeLimitOver

__all__ = [
    "ORDER",
    "CurrentBroker",
    "PromptDelays",
    "QuickRetries",
    "Recorder",
    "ReliableRetries",
    "RetryTurns",
    "SendBack",
    "TimeLimitOver",
    "actor_for",
    "install",
    "ordered",
    "parts_for",
]

#: Every middleware a crawler's broker may have, in the order of its stack: Dramatiq
#: runs the before-hooks top down and the after-hooks bottom up.  A broker has those it
#: needs (workers: :class:`SendBack` and :class:`ReliableRetries`, Prometheus and
#: :class:`TimeLimitOver`; ``--local``: Dramatiq's ``Retries`` and
#: :class:`QuickRetries`; both :class:`RetryTurns`), each at its place here.
ORDER: tuple[type[Middleware], ...] = (
    AgeLimit,
    TimeLimit,
    ShutdownNotifications,
    Callbacks,
    Pipelines,
    SendBack,  # its after-hook, after Retries' and the Recorder's: what to hand back
    Recorder,  # before Retries: its after-hook runs after Retries', to see final failures
    Retries,  # ReliableRetries on workers
    RetryTurns,  # its after-hook before Retries': a retry without its attempt's turn
    QuickRetries,  # --local: a backoff of its own on each message enqueued
    CurrentMessage,  # claims read the message being processed
    CurrentBroker,  # actor bodies send to the broker their message came from (actor_for)
    Prometheus,  # workers' /metrics on port 9191
    PromptDelays,  # workers: delayed messages back on time (a host's turn)
    TimeLimitOver,  # last: its after-hook runs first, ending the time limit
)


def _place(middleware: Middleware) -> int:
    for place, kind in enumerate(ORDER):
        if isinstance(middleware, kind):
            return place
    raise ValueError(f"{type(middleware).__name__} has no place in crawler.middleware.ORDER")


def ordered(stack: list[Middleware]) -> list[Middleware]:
    """``stack`` in :data:`ORDER`: a broker's first middleware."""
    return sorted(stack, key=_place)


def install(broker: dramatiq.Broker, *stack: Middleware) -> None:
    """Add each of ``stack`` to ``broker`` at its place in :data:`ORDER`."""
    for middleware in stack:
        place = _place(middleware)
        after = next((m for m in broker.middleware if _place(m) > place), None)
        broker.add_middleware(middleware, before=None if after is None else type(after))
