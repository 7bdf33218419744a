"""The broker processing the current message, as Dramatiq's ``CurrentMessage`` keeps the
message: an actor's body sends to the broker its message came from
(:func:`actor_for`), and no actor's ``broker`` is ever rebound (``--local`` declares
actors of its own on its broker, the same functions under the same names)."""

from __future__ import annotations

import contextvars
from typing import Any, TypeVar

import dramatiq
from dramatiq.middleware import Middleware

_BROKER: contextvars.ContextVar[dramatiq.Broker | None] = contextvars.ContextVar(
    "crawler_current_broker", default=None
)


class CurrentBroker(Middleware):
    """Records the broker processing the current message, for the thread processing it
    (:meth:`get_current_broker`)."""

    @classmethod
    def get_current_broker(cls) -> dramatiq.Broker | None:
        """The broker whose message the calling thread processes; None outside an actor
        run by a worker of a broker with this middleware."""
        return _BROKER.get()

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        _BROKER.set(broker)

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        _BROKER.set(None)

    def after_skip_message(self, broker: dramatiq.Broker, message: Any) -> None:
        _BROKER.set(None)


def actor_for(actor: dramatiq.Actor[Any, Any]) -> dramatiq.Actor[Any, Any]:
    """The actor named as ``actor`` on the broker processing the current message (what
    its body sends to); ``actor`` itself outside one, or when that broker has none."""
    broker = _BROKER.get()
    if broker is None or broker is actor.broker:
        return actor
    try:
        found: dramatiq.Actor[Any, Any] = broker.get_actor(actor.actor_name)
    except dramatiq.errors.ActorNotFound:
        return actor
    return found


_Parts = TypeVar("_Parts")


def parts_for(default: _Parts) -> _Parts:
    """The parts the broker processing the current message crawls with (a ``--local``
    crawl's own, its broker's ``crawl_parts``: :func:`crawler.brokers.local.serve`);
    ``default`` (the worker's) outside one, or for a broker without parts of its own."""
    broker = _BROKER.get()
    parts: _Parts | None = None if broker is None else getattr(broker, "crawl_parts", None)
    return default if parts is None else parts
