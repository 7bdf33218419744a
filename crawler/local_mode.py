"""``--local``: the same ``crawl`` actor in one process, with no services at all.

Only the broker (Dramatiq's ``StubBroker`` with an in-process ``Worker``) and the
dedup store (:class:`~crawler.stores.memory.MemoryPool`) differ from a distributed
crawl; fetching, extraction, claims and failures are the very same code.
"""

from __future__ import annotations

import logging
import signal
from typing import Any

import dramatiq
from dramatiq.errors import QueueJoinTimeout

from crawler.brokers import local
from crawler.environment import Lifetimes, local_backoffs
from crawler.middleware import QuickRetries
from crawler.outcomes import WRITTEN
from crawler.records import Record, RecordFile
from crawler.stores import StorePool
from crawler.tracking.bookkeeping import keep_books
from crawler.tracking.progress import Progress, ProgressLogHandler

#: Milliseconds between progress redraws while waiting for the crawl to end.
REFRESH_MS = 200
#: Milliseconds Ctrl-C waits for fetches in flight before leaving them.
STOP_TIMEOUT_MS = 3000


def run(
    actor: dramatiq.Actor[Any, Any],
    pool: StorePool,
    lifetimes: Lifetimes,
    seeds: list[dramatiq.Message[Any]],
    *,
    threads: int,
    output: RecordFile | None,
    verbose: bool,
) -> int:
    """Crawl from the ``seeds`` messages of ``actor`` until nothing is left; 0 when no URL failed
    for good.  ``pool`` is the in-memory store the actor uses, ``lifetimes`` its
    entries' (as the actor's)."""
    progress = Progress()
    _log_through(progress, logging.INFO if verbose else logging.WARNING)

    def keep(record: Record, message: Any) -> None:
        progress.record(record)
        if output is not None and record.get("outcome") in WRITTEN:
            output.write(record)

    broker = local.serve(actor)
    broker.add_middleware(QuickRetries(*local_backoffs()))
    keep_books(broker, pool, lifetimes, also=keep, on_discover=progress.discover)
    broker.emit_after("process_boot")  # starts Dramatiq's time-limit watchdog, as workers do
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    interrupted = False
    try:
        for message in seeds:
            broker.enqueue(message)
        while True:
            try:
                broker.join(actor.queue_name, timeout=REFRESH_MS, fail_fast=False)
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


def _log_through(progress: Progress, level: int) -> None:
    handler = ProgressLogHandler(progress)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
