"""``--local``: the same ``crawl`` actor in one process, with no services at all.

Only the broker (Dramatiq's ``StubBroker`` with an in-process ``Worker``) and the
dedup store (:class:`~crawler.stores.memory.MemoryPool`) differ from a distributed
crawl; fetching, extraction, claims and failures are the very same code.  With
``--state DIR`` both are kept on disk as well (:mod:`crawler.stores.saved`), and the
same command again carries on with the crawl.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

import dramatiq
from dramatiq.errors import QueueJoinTimeout

from crawler.brokers import local
from crawler.environment import Lifetimes, local_backoffs
from crawler.frontier import counters
from crawler.middleware import QuickRetries
from crawler.outcomes import FAILED, NOT_FINAL, WRITTEN
from crawler.records import Record, RecordFile
from crawler.stores import StorePool
from crawler.stores.saved import SavedState
from crawler.tracking import figures, seeder
from crawler.tracking.bookkeeping import keep_books
from crawler.tracking.progress import Progress, ProgressLogHandler

#: Milliseconds between progress redraws while waiting for the crawl to end.
REFRESH_MS = 200
#: Milliseconds Ctrl-C waits for fetches in flight before leaving them.
STOP_TIMEOUT_MS = 3000


class AnotherCrawl(ValueError):
    """The ``--state`` directory holds another command's crawl."""


def seeds_to_send(
    saved: SavedState, seeds: list[dramatiq.Message[Any]], command: dict[str, Any]
) -> list[dramatiq.Message[Any]]:
    """The seeds to send: every one for a new crawl (``command``, its URLs and options,
    is saved); none when the state file holds this command's crawl already (its
    messages are there).  Raises :class:`AnotherCrawl` for another command's."""
    known = saved.fact("command")
    if known is None:
        saved.set_fact("crawl_id", _crawl_id(seeds))
        saved.set_fact("command", command)
        return seeds
    if known != json.loads(json.dumps(command)):
        raise AnotherCrawl(
            f"{str(saved.path.parent)!r} holds the state of another crawl"
            f" ({' '.join(known['urls'])}, other options): give it the same command, or"
            " another --state directory"
        )
    return []


def run(
    actor: dramatiq.Actor[Any, Any],
    pool: StorePool,
    lifetimes: Lifetimes,
    seeds: list[dramatiq.Message[Any]],
    *,
    threads: int,
    output: RecordFile | None,
    verbose: bool,
    saved: SavedState | None = None,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Crawl from the ``seeds`` messages of ``actor`` until nothing is left; 0 when no URL failed
    for good.  ``pool`` is the in-memory store the actor uses, ``lifetimes`` its
    entries' (as the actor's).  With ``saved`` (``--state``) and no seeds, carry on
    with the crawl the state file holds.  Each final record goes to ``on_record`` too;
    ``stop`` set stops the crawl as Ctrl-C does."""
    progress = Progress()
    _log_through(progress, logging.INFO if verbose else logging.WARNING)

    def keep(record: Record, message: Any) -> None:
        progress.record(record)
        if output is not None and record.get("outcome") in WRITTEN:
            output.write(record)
        if on_record is not None and record.get("outcome") not in NOT_FINAL:
            on_record(record)

    broker = local.serve(actor, saved)
    broker.add_middleware(QuickRetries(*local_backoffs()))
    keep_books(broker, pool, lifetimes, also=keep, on_discover=progress.discover)
    broker.emit_after("process_boot")  # starts Dramatiq's time-limit watchdog, as workers do
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    interrupted = False
    try:
        if saved is not None and not seeds:
            _carry_on(broker, pool, saved, progress)
        _start(pool, seeds, lifetimes)
        for message in seeds:
            broker.enqueue(message)
        while True:
            try:
                broker.join(actor.queue_name, timeout=REFRESH_MS, fail_fast=False)
                break
            except QueueJoinTimeout:
                progress.show()
                if stop is not None and stop.is_set():
                    interrupted = True
                    break
    except KeyboardInterrupt:
        interrupted = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the summary
    finally:
        worker.stop(timeout=STOP_TIMEOUT_MS if interrupted else 600_000)
        if output is not None:
            output.close()
        if saved is not None:
            saved.close()
    print(progress.summary(interrupted=interrupted), flush=True)
    if interrupted:
        if saved is not None:
            print(
                f"The crawl is kept in {str(saved.path.parent)!r}: run the same command"
                " again to carry on.",
                flush=True,
            )
        return 130
    return 1 if progress.counts[FAILED] else 0


def _start(pool: StorePool, seeds: list[dramatiq.Message[Any]], lifetimes: Lifetimes) -> None:
    """Count a new crawl's seeds as discovered, and list it for the dashboard."""
    crawl_id = _crawl_id(seeds)
    if crawl_id is None:
        return
    with pool.reserve() as client:
        counters.start(client, crawl_id, len(seeds), lifetimes.grace)
        figures.describe(client, crawl_id, seeder.about(seeds, "local"), lifetimes.grace)


def _crawl_id(seeds: list[dramatiq.Message[Any]]) -> str | None:
    """The id of the crawl the seeds start (their options name it)."""
    return (seeds[0].kwargs.get("options") or {}).get("crawl_id") if seeds else None


def _carry_on(
    broker: local.PriorityStubBroker, pool: StorePool, saved: SavedState, progress: Progress
) -> None:
    """Put back the messages the state file holds, and the crawl's figures so far."""
    crawl_id = saved.fact("crawl_id")
    with pool.reserve() as client:
        figures = counters.read(client, crawl_id) if crawl_id else None
    if figures is not None:
        progress.carry_on(figures)
    left = broker.restore()
    print(
        f"Carrying on with the crawl kept in {str(saved.path.parent)!r}: {left} URL(s)"
        " queued or in hand when it stopped.",
        flush=True,
    )


def _log_through(progress: Progress, level: int) -> None:
    handler = ProgressLogHandler(progress)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
