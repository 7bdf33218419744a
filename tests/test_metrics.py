"""The crawler's metrics are made once per process, even when the thread making them
is interrupted half-way (Dramatiq's time limit raises inside a thread)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import prometheus_client
import pytest

from crawler import metrics


@pytest.fixture
def fresh_metrics() -> Iterator[None]:
    """No crawler metric made yet in this process; the ones there were afterwards."""
    saved = dict(metrics._created)
    for collector in {id(c): c for c in saved.values()}.values():
        prometheus_client.REGISTRY.unregister(collector)
    metrics._created.clear()
    metrics._pages_by_outcome.clear()
    yield
    for collector in {id(c): c for c in metrics._created.values()}.values():
        prometheus_client.REGISTRY.unregister(collector)
    metrics._created.clear()
    metrics._pages_by_outcome.clear()
    metrics._created.update(saved)
    for collector in {id(c): c for c in saved.values()}.values():
        prometheus_client.REGISTRY.register(collector)


class TimeLimitExceeded(BaseException):
    pass


def test_a_thread_interrupted_while_making_the_metrics_leaves_none_half_made(
    fresh_metrics: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_histogram = prometheus_client.Histogram

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise TimeLimitExceeded  # after crawler_pages_total was registered

    monkeypatch.setattr(prometheus_client, "Histogram", interrupted)
    with pytest.raises(TimeLimitExceeded):
        metrics.page_ended("crawled", 3)
    monkeypatch.setattr(prometheus_client, "Histogram", real_histogram)

    metrics.page_ended("crawled", 3)  # the next message's thread: no Duplicated timeseries
    metrics.page_read(0.1, 100)
    assert (
        prometheus_client.REGISTRY.get_sample_value("crawler_pages_total", {"outcome": "crawled"})
        == 1
    )
