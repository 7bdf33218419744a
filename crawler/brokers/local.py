"""``--local``'s broker: Dramatiq's ``StubBroker`` in this process, with priorities."""

from __future__ import annotations

import itertools
import json
import queue
from typing import Any

import dramatiq
from dramatiq.brokers.stub import StubBroker


class PriorityStubBroker(StubBroker):
    """Dramatiq's ``StubBroker``, its queues handing out the message of highest
    ``broker_priority`` first (``--breadth-first``), as RabbitMQ's do; then in order."""

    def declare_queue(self, queue_name: str) -> None:
        if queue_name not in self.queues:
            super().declare_queue(queue_name)
            self.queues[queue_name] = _Priorities()


class _Priorities(queue.PriorityQueue):  # type: ignore[type-arg]
    """Encoded messages, by priority, then in the order they came."""

    def __init__(self) -> None:
        super().__init__()
        self._order = itertools.count()

    def put(self, item: bytes, block: bool = True, timeout: float | None = None) -> None:
        priority = json.loads(item)["options"].get("broker_priority") or 0
        super().put((-priority, next(self._order), item), block, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> bytes:
        item: bytes = super().get(block, timeout)[2]
        return item


def serve(actor: dramatiq.Actor[Any, Any]) -> PriorityStubBroker:
    """A :class:`PriorityStubBroker` for ``actor``, which it now sends to (``--local``:
    the process's only broker)."""
    broker = PriorityStubBroker()
    broker.declare_actor(actor)
    actor.broker = broker
    dramatiq.set_broker(broker)
    return broker
