"""The ceiling: a Dramatiq actor that does nothing, on the crawler's own broker set-up."""

from __future__ import annotations

import dramatiq

from crawler.brokers import make_broker

broker = make_broker()
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=0)
def noop() -> None:
    """Nothing: what is left is Dramatiq's and the broker's own cost per message."""
