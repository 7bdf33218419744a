"""``--local``: the same ``crawl`` actor in one process, with no services at all.

Only the broker (Dramatiq's ``StubBroker`` with an in-process ``Worker``) and the
dedup store (:class:`~crawler.memory_store.MemoryPool`) differ from a distributed
crawl; fetching, extraction, claims and failures are the very same code.
"""

from __future__ import annotations

import logging
import signal
from types import ModuleType
from typing import Any

import dramatiq
from dramatiq.brokers.stub import StubBroker
from dramatiq.errors import QueueJoinTimeout
from dramatiq.middleware import CurrentMessage, Retries
from dramatiq.rate_limits.backends import StubBackend

from crawler.bookkeeping import settle
from crawler.memory_store import MemoryPool
from crawler.progress import Progress, ProgressLogHandler
from crawler.records import WRITTEN, Record, Recorder, RecordFile

#: Milliseconds between progress redraws while waiting for the crawl to end.
REFRESH_MS = 200
#: Milliseconds Ctrl-C waits for fetches in flight before leaving them.
STOP_TIMEOUT_MS = 3000


def run(
    example: ModuleType,
    urls: list[str],
    kwargs: dict[str, Any],
    *,
    threads: int,
    output: RecordFile | None,
    verbose: bool,
) -> int:
    """Crawl from ``urls`` until nothing is left; 0 when no URL failed for good."""
    progress = Progress()
    _log_through(progress, logging.INFO if verbose else logging.WARNING)

    settle_crawl = settle(lambda: example.memcache_pool, publish=None)

    def keep(record: Record, message: Any) -> None:
        progress.record(record)
        if output is not None and record.get("outcome") in WRITTEN:
            output.write(record)
        settle_crawl(record, message)

    broker = StubBroker()
    broker.add_middleware(CurrentMessage())
    broker.add_middleware(Recorder(on_record=keep, on_discover=progress.discover), before=Retries)
    _use(example, broker)
    broker.emit_after("process_boot")  # starts Dramatiq's time-limit watchdog, as workers do
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    queue_name = example.crawl.queue_name
    interrupted = False
    try:
        for url in urls:
            example.crawl.send_with_options(args=(url,), kwargs=kwargs)
        while True:
            try:
                broker.join(queue_name, timeout=REFRESH_MS, fail_fast=False)
                break
            except QueueJoinTimeout:
                progress.show()
    except KeyboardInterrupt:
        interrupted = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the summary
    finally:
        worker.stop(timeout=STOP_TIMEOUT_MS if interrupted else 600_000)
        if output is not None:
            output.close()
    print(progress.summary(interrupted=interrupted), flush=True)
    if interrupted:
        return 130
    return 1 if progress.failures else 0


def _use(example: ModuleType, broker: StubBroker) -> None:
    """Point the example's actor at ``broker``, its dedup and rate limits at process memory."""
    example.memcache_pool = MemoryPool()  # type: ignore[attr-defined]
    example.rate_limits_backend = StubBackend()  # type: ignore[attr-defined,no-untyped-call]
    broker.declare_actor(example.crawl)
    example.crawl.broker = broker
    dramatiq.set_broker(broker)


def _log_through(progress: Progress, level: int) -> None:
    handler = ProgressLogHandler(progress)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
