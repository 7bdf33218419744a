"""``--local``: the same ``crawl`` actor in one process, with no services at all.

Only the broker (Dramatiq's ``StubBroker`` with an in-process ``Worker``) and the
dedup store (:class:`~crawler.stores.memory.MemoryPool`) differ from a distributed
crawl; fetching, extraction, claims and failures are the very same code.  With
``--state DIR`` both are kept on disk as well (:mod:`crawler.stores.saved`), and the
same command again carries on with the crawl: a page in hand when the process was
killed (not when it crashed) counts no delivery (:func:`_give_back`), and a disk with no
room left stops the crawl at once (:class:`~crawler.stores.saved.DiskFull`).
"""

from __future__ import annotations

import json
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dramatiq
from dramatiq.errors import QueueJoinTimeout

from crawler.archiving.warc import WarcFiles
from crawler.brokers import local
from crawler.crawl_spec import CrawlError, CrawlSpec
from crawler.embedded.worker import LocalWorker
from crawler.environment import Lifetimes, local_backoffs, local_busy
from crawler.frontier import claims, counters
from crawler.items import counting as item_counts
from crawler.items.sinks import ItemSinkError, ItemSinks
from crawler.middleware import QuickRetries, install
from crawler.outcomes import FAILED, NOT_FINAL, WRITTEN
from crawler.records import Record, RecordSink
from crawler.stores import StorePool
from crawler.stores.saved import CRASH_LOG_NAME, DiskFull, SavedState, no_room
from crawler.tracking import figures, seeder, statistics
from crawler.tracking.bookkeeping import keep_books
from crawler.tracking.progress import Progress, ProgressLogHandler

# the module's name before embedded/, kept: users filter the log on it
logger = logging.getLogger("crawler.local_mode")

#: Milliseconds between progress redraws while waiting for the crawl to end.
REFRESH_MS = 200
#: Milliseconds Ctrl-C waits for fetches in flight before leaving them.
STOP_TIMEOUT_MS = 3000


class AnotherCrawl(ValueError):
    """The ``--state`` directory holds another command's crawl."""


def seeds_to_send(
    saved: SavedState, seeds: seeder.Messages, command: dict[str, Any]
) -> seeder.Messages:
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
    seeds: seeder.Messages,
    spec: CrawlSpec,
    *,
    output: RecordSink | None,
    saved: SavedState | None = None,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
    warc_files: WarcFiles | None = None,
    progress: Progress | None = None,
    items: ItemSinks | None = None,
) -> int:
    """Crawl from the ``seeds`` messages of ``actor`` until nothing is left; 0 when no URL failed
    for good.  ``actor`` is the ``crawl`` actor of ``--local``'s broker
    (:func:`crawler.brokers.local.serve`, made with ``saved``): no actor's broker is
    rebound.  ``pool`` is the in-memory store the actor uses, ``lifetimes`` its
    entries' (as the actor's).  Without ``progress``, the command line's: progress and
    log lines on stderr (the root logger's handler, at INFO with the ``spec``'s ``-v``), the
    summary printed; with it, the caller's (the Python API's): counted there and shown
    on its stream, nothing printed, the logging left as the caller configured it.  With
    ``saved`` (``--state``) and no seeds, carry on with the crawl the state file holds.
    Each final record goes to ``on_record`` too; ``stop`` set stops the crawl as Ctrl-C
    does.  Each page's items go to ``items`` (the sink is closed at the end).  Raises
    :class:`DiskFull` once the state file, ``output`` or the ``warc_files`` found no
    room left, :class:`ItemSinkError` once ``items`` could not be written: the crawl
    stopped at once, nothing more written (with ``--state``, the page whose items were
    not written is not acknowledged: carried on, it is fetched again)."""
    full = _watch_for_no_room(saved, warc_files)
    progress, quiet = progress_for(progress, spec, full)
    keep = keeper(progress, full, output, on_record, items)
    broker, worker = _start_worker(actor, saved, spec, pool, lifetimes, keep, progress)
    interrupted = False
    try:
        _send_seeds(broker, pool, lifetimes, seeds, saved, progress, quiet=quiet)
        interrupted = _wait(broker, actor.queue_name, progress, full, stop)
    except KeyboardInterrupt:
        interrupted = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the summary
    except DiskFull:
        if full.error is None:
            raise
    finally:
        quick = interrupted or full.error is not None
        worker.stop(timeout=STOP_TIMEOUT_MS if quick else 600_000)
        close_files(full, output, saved, warc_files, items)
    full.raise_what_stopped(progress)
    status = say_the_end(progress, saved, interrupted=interrupted, quiet=quiet)
    return write_stats(spec, progress, status)


def progress_for(progress: Progress | None, spec: CrawlSpec, full: NoRoom) -> tuple[Progress, bool]:
    """The run's progress, and whether the run is quiet: the caller's ``progress`` (the
    Python API's), the logging left as the caller configured it; else the command line's
    (none shown with ``-q``), log lines through it on stderr or to ``--log-file`` at the
    ``spec``'s level (:attr:`~crawler.crawl_spec.CrawlSpec.log_threshold`), none once
    ``full``."""
    if progress is not None:
        return progress, True
    progress = Progress(stream=None if spec.quiet else sys.stderr)
    log_through(
        progress, spec.log_threshold, quiet=full.event, log_file=spec.log_file,
        not_html_at_info=spec.not_html_at_info,
    )  # fmt: skip
    return progress, False


def _watch_for_no_room(saved: SavedState | None, warc_files: WarcFiles | None) -> NoRoom:
    """What stops the crawl once a disk is full, told by the state file and the WARC
    files when theirs has no room left."""
    full = NoRoom(saved)
    if saved is not None:
        saved.on_full = lambda error: full.noted(error.path)
    if warc_files is not None:
        warc_files.on_no_room = full.note
    return full


def _start_worker(
    actor: dramatiq.Actor[Any, Any],
    saved: SavedState | None,
    spec: CrawlSpec,
    pool: StorePool,
    lifetimes: Lifetimes,
    keep: Callable[[Record, Any], None],
    progress: Progress,
) -> tuple[local.PriorityStubBroker, LocalWorker]:
    """``actor``'s broker, its books kept (each record to ``keep``, each discovery counted
    in ``progress``), and its worker with the ``spec``'s threads, started."""
    broker, worker = workers(actor, saved, spec.fetching_threads)
    keep_books(broker, pool, lifetimes, also=keep, on_discover=progress.discover)
    broker.emit_after("process_boot")  # starts Dramatiq's time-limit watchdog, as workers do
    worker.start()
    return broker, worker


def _send_seeds(
    broker: local.PriorityStubBroker,
    pool: StorePool,
    lifetimes: Lifetimes,
    seeds: seeder.Messages,
    saved: SavedState | None,
    progress: Progress,
    *,
    quiet: bool,
) -> None:
    """Begin the run (``--state``: carrying on with the crawl kept when there are no
    ``seeds``), count the seeds as discovered and send them."""
    if saved is not None:
        _begin_run(broker, pool, saved, progress, carry_on=not seeds, quiet=quiet)
    start_counting(pool, seeds, lifetimes)
    for message in seeds:
        broker.enqueue(message)


def workers(
    actor: dramatiq.Actor[Any, Any], saved: SavedState | None, threads: int
) -> tuple[local.PriorityStubBroker, LocalWorker]:
    """``actor``'s broker (``--local``'s, with its short backoff), and its ``threads``."""
    broker = actor.broker
    if not isinstance(broker, local.PriorityStubBroker) or broker.saved is not saved:
        raise ValueError("one_process.run needs the actor of local.serve(crawl, saved)")
    install(broker, QuickRetries(*local_backoffs()))
    return broker, LocalWorker(broker, actor.queue_name, threads, busy=local_busy())


def keeper(
    progress: Progress,
    full: NoRoom,
    output: RecordSink | None,
    on_record: Callable[[Record], None] | None,
    items: ItemSinks | None = None,
) -> Callable[[Record, Any], None]:
    """What the books do with each record: its items written to ``items``, counted in
    ``progress``, written to ``output``, handed to ``on_record`` when final; nothing
    more once a disk is full or the item sink failed."""

    def keep(record: Record, message: Any) -> None:
        if full.error is not None:  # stopping: nothing more written
            raise full.sink_error or DiskFull(full.error.path)
        if items is not None and record.get("outcome") not in NOT_FINAL:
            try:
                items.take(record)
            except ItemSinkError as e:
                raise full.sink_failed(e) from e
        progress.record(record)
        if output is not None and record.get("outcome") in WRITTEN:
            try:
                output.write(record)
            except OSError as e:
                if not no_room(e):
                    raise
                raise full.note(output.path) from e
        if on_record is not None and record.get("outcome") not in NOT_FINAL:
            on_record(record)

    return keep


def _wait(
    broker: local.PriorityStubBroker,
    queue_name: str,
    progress: Progress,
    full: NoRoom,
    stop: threading.Event | None,
) -> bool:
    """Wait until the queue is empty or a disk is full, showing progress meanwhile;
    True when ``stop`` was set first (the crawl interrupted)."""
    while full.error is None:
        try:
            broker.join(queue_name, timeout=REFRESH_MS, fail_fast=False)
            return False
        except QueueJoinTimeout:
            if full.error is not None:
                return False
            progress.show()
            if stop is not None and stop.is_set():
                return True
    return False


def close_files(
    full: NoRoom,
    output: RecordSink | None,
    saved: SavedState | None,
    warc_files: WarcFiles | None,
    items: ItemSinks | None = None,
) -> None:
    """Close what the crawl wrote to, once its worker stopped; what was left to write
    may find no room either when a disk is full already."""
    if items is not None:
        try:
            items.close()
        except ItemSinkError as e:
            full.sink_failed(e)
    if warc_files is not None:
        warc_files.on_no_room = None
    if output is not None:
        try:
            output.close()
        except OSError as e:  # what was left to write found no room either
            if full.error is None or not no_room(e):
                raise
    if saved is not None:
        saved.close()


def say_the_end(
    progress: Progress, saved: SavedState | None, *, interrupted: bool, quiet: bool
) -> int:
    """The summary of the crawl (none when ``quiet``: the caller shows its progress); the
    exit status."""
    if quiet:
        return exit_status(progress, interrupted=interrupted)
    print(progress.summary(interrupted=interrupted), flush=True)
    if interrupted and saved is not None:
        print(
            f"The crawl is kept in {str(saved.path.parent)!r}: run the same command"
            " again to carry on.",
            flush=True,
        )
    return exit_status(progress, interrupted=interrupted)


def write_stats(spec: CrawlSpec, progress: Progress, status: int) -> int:
    """``--stats FILE``: the crawl's statistics written there (:mod:`crawler.tracking.statistics`);
    the exit status, 1 for a file that could not be written (said in one line)."""
    if spec.stats is None:
        return status
    try:
        statistics.write(spec.stats, progress.statistics(spec.options.crawl_id))
    except OSError as e:
        print(f"cannot write --stats {str(spec.stats)!r}: {e.strerror or e}", file=sys.stderr)
        return status or 1
    return status


def exit_status(progress: Progress, *, interrupted: bool) -> int:
    """130 when interrupted, else 1 when a URL failed for good, else 0."""
    if interrupted:
        return 130
    return 1 if progress.counts[FAILED] else 0


def start_counting(pool: StorePool, seeds: seeder.Messages, lifetimes: Lifetimes) -> None:
    """Count a new crawl's seeds as discovered, and list it for the dashboard."""
    crawl_id = _crawl_id(seeds)
    if crawl_id is None:
        return
    with pool.reserve() as client:
        counters.start(client, crawl_id, len(seeds), lifetimes.grace)
        figures.describe(client, crawl_id, seeder.about(seeds, "local"), lifetimes.grace)


def _crawl_id(seeds: seeder.Messages) -> str | None:
    """The id of the crawl the seeds start (their options name it)."""
    first = next(iter(seeds), None)  # made from a seed file, maybe: only the first read
    return None if first is None else (first.kwargs.get("options") or {}).get("crawl_id")


def _begin_run(
    broker: local.PriorityStubBroker,
    pool: StorePool,
    saved: SavedState,
    progress: Progress,
    *,
    carry_on: bool,
    quiet: bool = False,
) -> None:
    """``--state``: watch this run for crashes, and ``carry_on`` with the crawl the
    state file holds (else a new crawl's run begins, nothing in hand)."""
    crash_log = saved.watch_crashes()
    if carry_on:
        _carry_on(broker, pool, saved, progress, crash_log, quiet=quiet)
    else:
        saved.set_fact("run", {"crash_log": crash_log, "deliveries": {}})


def _carry_on(
    broker: local.PriorityStubBroker,
    pool: StorePool,
    saved: SavedState,
    progress: Progress,
    crash_log: int,
    *,
    quiet: bool = False,
) -> None:
    """Put back the messages the state file holds, and the crawl's figures so far; a
    delivery cut short by the last run's interruption given back, unless it crashed
    (``crash_log``: the size of its log now)."""
    crawl_id = saved.fact("crawl_id")
    with pool.reserve() as client:
        figures = counters.read(client, crawl_id) if crawl_id else None
        if figures is not None:
            figures["items"] = item_counts.read(client, crawl_id)
            figures["items_dropped"] = item_counts.read_dropped(client, crawl_id)
    if figures is not None:
        progress.carry_on(figures)
    kept = broker.kept()
    last_run = saved.fact("run") or {}
    crashed = crash_log > int(last_run.get("crash_log", crash_log))
    counted = _give_back(pool, saved, kept, last_run.get("deliveries", {}), crash_log, crashed)
    left = broker.restore(kept)
    say = logger.info if quiet else _print
    say(
        f"Carrying on with the crawl kept in {str(saved.path.parent)!r}: {left} URL(s)"
        " queued or in hand when it stopped."
    )
    if crashed:
        say(
            f"The last run crashed (its traceback is in"
            f" {str(saved.path.parent / CRASH_LOG_NAME)!r}): each of the {counted} URL(s) in"
            " hand then counts a delivery."
        )


def _print(line: str) -> None:
    print(line, flush=True)


def _give_back(
    pool: StorePool,
    saved: SavedState,
    kept: list[dramatiq.Message[Any]],
    before: dict[str, int],
    crash_log: int,
    crashed: bool,
) -> int:
    """Kills are not poison: a message's deliveries are counted in the store
    (:func:`crawler.frontier.claims.first_of_attempt`) as it is taken, and one that was
    in hand when the last run stopped was counted once more than it finished.  When
    that run did not crash (a kill, Ctrl-C, a power cut, the OOM killer), that delivery
    is given back: the count goes down by one, never below one (one marks a message
    delivered before, which resends the links it may have claimed).  When it crashed,
    the counts stay.  The counts as they now are, with the crash log's size, are saved
    for the next run to compare with: those that grew were in hand.  How many grew."""
    counts, grew = {}, 0
    with pool.reserve() as client:
        for message in kept:
            key = claims.deliveries_key(message)
            count = client.get(key)
            if count is None:  # never taken, or its attempt ended
                continue
            if count != before.get(key):  # taken in the last run, and not finished
                grew += 1
                if not crashed and count > 1:
                    count = client.incr(key, -1)
            counts[key] = count
    saved.set_fact("run", {"crash_log": crash_log, "deliveries": counts})
    return grew


class NoRoom:
    """The first write the disk had no room for, in any thread: the crawl stops, the
    state file (when kept) writes nothing more, and the log goes quiet."""

    def __init__(self, saved: SavedState | None) -> None:
        self.saved = saved
        self.event = threading.Event()
        self.error: DiskFull | None = None
        #: The item sink's failure, when that is what stopped the crawl.
        self.sink_error: ItemSinkError | None = None
        self._lock = threading.Lock()

    def sink_failed(self, error: ItemSinkError) -> ItemSinkError:
        """The item sink could not write: the crawl stops as for a full disk (the
        state file writes nothing more: the page in hand is not acknowledged)."""
        with self._lock:
            if self.sink_error is None:
                self.sink_error = error
        self.note(error.args[0] if error.args else "the item sink")
        return error

    def note(self, path: Path | str) -> DiskFull:
        """The device of ``path`` is full: a :class:`DiskFull` to raise.  The state file
        stops first: a thread that sees :attr:`error` and gives its message up must not
        then acknowledge it on disk, its ending unwritten."""
        if self.saved is not None:
            self.saved.stop_writing(path)  # tells noted()
        return self.noted(path)

    def noted(self, path: Path | str) -> DiskFull:
        """The crawl stops (the state file, when kept, writes nothing more already)."""
        with self._lock:
            if self.error is None:
                self.error = DiskFull(path)
                self.event.set()
        return DiskFull(self.error.path)

    def raise_what_stopped(self, progress: Progress) -> None:
        """Raise what stopped the crawl, if anything did: the item sink's failure, or
        :class:`DiskFull`, the progress line cleared first."""
        if self.sink_error is not None:
            progress.clear()
            raise self.sink_error
        if self.error is not None:
            progress.clear()
            raise DiskFull(self.error.path)


def log_through(
    progress: Progress,
    level: int,
    quiet: threading.Event,
    log_file: Path | None = None,
    *,
    not_html_at_info: bool = False,
) -> None:
    """Log lines of ``level`` and above through the progress bar (on stderr, or without
    one), or to ``log_file``, none once ``quiet`` is set.  With ``not_html_at_info``
    (``crawler crawl``'s), upstream's "not HTML" line, a warning on workers, is a page's
    line: shown from INFO (:func:`page_line`).  pika's own lines about a connection
    (the seeder says in one line what it cannot reach) are shown at DEBUG only."""
    handler: logging.Handler
    if log_file is not None:
        try:
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as e:
            raise CrawlError(f"--log-file {str(log_file)!r}: {e.strerror or e}") from e
    elif progress.stream is None:  # -q: no progress line, the errors still said
        handler = logging.StreamHandler(sys.stderr)
    else:
        handler = ProgressLogHandler(progress)
    handler.addFilter(lambda record: not quiet.is_set())
    if level > logging.INFO and not_html_at_info:
        handler.addFilter(lambda record: not page_line(record))
    if level > logging.DEBUG:
        handler.addFilter(lambda record: not record.name.startswith("pika"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


#: Upstream's line for a response that is not HTML, as the actor logs it (a warning).
NOT_HTML_LINE = re.compile(r"Skipping URL .* since it's not HTML\.", re.S)


def page_line(record: logging.LogRecord) -> bool:
    """Whether ``record`` is upstream's "not HTML" warning, one a PDF or an image: a
    line about one page, which a crawl here shows with every page's (``-v``), not as
    what needs a person.  Read from its text: a shard's lines come formatted."""
    return record.levelno == logging.WARNING and bool(NOT_HTML_LINE.fullmatch(record.getMessage()))
