"""``--local --processes N``: one crawl in N processes, every core busy.

Each process (forked from this one) is the whole of ``--local`` for one shard of the
URLs (:mod:`crawler.embedded.shards`): its own broker, worker threads and in-memory
store, the same ``crawl`` actor.  This process crawls nothing: it sends each shard its
seeds, and takes in what the shards send back (their records, log lines and the URLs
they discovered) as ``--local`` does its own: counted in the progress and the summary,
written to ``--output`` and ``--items``, handed to ``on_record``.  It sees the end (no
shard holds a message and no hand-over is in transit: :meth:`Shards.finished`), and
stops them all on Ctrl-C (``stop``), a full disk or a shard that died.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import logging.handlers
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.context import ForkContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import dramatiq

from crawler.brokers import local
from crawler.crawl_spec import CrawlSpec
from crawler.embedded import one_process, shared_store
from crawler.embedded.shards import (
    Handover,
    ShardBroker,
    Shards,
    die_with_parent,
    owner_of,
    url_of,
)
from crawler.environment import Lifetimes
from crawler.frontier import claims, recrawl
from crawler.items.sinks import ItemSinkError, ItemSinks
from crawler.links import sites
from crawler.options import CrawlOptions
from crawler.records import Record, RecordSink
from crawler.stores import Stores
from crawler.stores.saved import DiskFull
from crawler.tracking import seeder
from crawler.tracking.bookkeeping import keep_books
from crawler.tracking.progress import Progress
from crawler.worker_parts import PartsOf

# the module's name before embedded/, kept: users filter the log on it
logger = logging.getLogger("crawler.local_processes")

#: Seconds a shard waits on its inbox before it looks whether it is idle.
SHARD_POLL = 0.02
#: A shard sends its records on at least this often (seconds), or every BATCH of them.
SEND_EVERY, BATCH = 0.05, 64
#: Seconds past --local's own stop timeout that stopping shards get before they are killed.
STOP_GRACE = 5.0


class ProcessLost(RuntimeError):
    """A crawling process ended without being told to (killed, or it failed)."""


@dataclass(frozen=True)
class _Stop:
    """The word to a shard to stop: ``quick`` (interrupted) or once idle."""

    quick: bool


def run(
    crawl: dramatiq.Actor[Any, Any],
    parts_of: PartsOf,
    seeds: seeder.Messages,
    spec: CrawlSpec,
    *,
    output: RecordSink | None,
    earlier: tuple[str, list[tuple[str, recrawl.Earlier]]] | None = None,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    items: ItemSinks | None = None,
) -> int:
    """Crawl from ``seeds`` (messages of ``crawl``) in the ``spec``'s processes sharing
    its threads (at least one each), each with the crawl's parts made of its own stores
    (``parts_of``), until nothing is left: as
    :func:`crawler.embedded.one_process.run` does in one (its exit status, summary and errors:
    :class:`DiskFull`, :class:`ItemSinkError`; :class:`ProcessLost` when a process
    died).  The ``--warc`` directory is the one the messages name; ``earlier`` the
    crawl's id and its ``--recrawl-from`` pages, each kept by its shard."""
    full = one_process.NoRoom(None)
    progress, quiet = one_process.progress_for(progress, spec, full)
    keep = one_process.keeper(progress, full, output, on_record, items)
    context = multiprocessing.get_context("fork")  # the crawl as this process made it
    shards = Shards.make(context, spec.crawling_processes)
    shards.let_inboxes_go()
    messages = list(seeds)
    store = _prepare_to_fork(context, messages)
    whole = output is not None or on_record is not None
    children = _fork_shards(
        context, shards, crawl, parts_of, store, messages, spec, earlier, whole_records=whole
    )
    relay = _Relay(shards.results)  # started once every shard is forked
    try:
        interrupted, lost = _follow(shards, children, store, relay, keep, progress, full, stop)
    except BaseException:  # a record that could not be kept (--output, on_record)
        _tell_stop(shards, children, quick=True)
        raise
    finally:
        _reap(children)
        relay.close()
        one_process.close_files(full, output, None, None, items)
        if store is not None:
            store.shutdown()
    full.raise_what_stopped(progress)
    if lost is not None:
        progress.clear()
        raise ProcessLost(lost)
    status = one_process.say_the_end(progress, None, interrupted=interrupted, quiet=quiet)
    return one_process.write_stats(spec, progress, status)


def _prepare_to_fork(
    context: ForkContext, messages: list[dramatiq.Message[Any]]
) -> shared_store.SharedStore | None:
    """What the shards share, made once before they are forked: the store of the keys
    they share, started when the crawl has any (else None), and ``--same-site``'s suffix
    list."""
    options = CrawlOptions.from_message(messages[0].kwargs.get("options")) if messages else None
    store = (
        shared_store.start(context, die_with_parent)
        if options is not None and _shares_keys(options)
        else None
    )
    if options is not None and options.allowed_sites:
        sites.prepare()  # --same-site's suffix list, built once for every shard
    return store


def _fork_shards(
    context: ForkContext,
    shards: Shards,
    crawl: dramatiq.Actor[Any, Any],
    parts_of: PartsOf,
    store: shared_store.SharedStore | None,
    messages: list[dramatiq.Message[Any]],
    spec: CrawlSpec,
    earlier: tuple[str, list[tuple[str, recrawl.Earlier]]] | None,
    *,
    whole_records: bool,
) -> list[BaseProcess]:
    """Start the ``spec``'s processes, one a shard, each with its seeds among
    ``messages``, its share of the threads and of the ``earlier`` pages; ``whole_records``
    when the records go on whole (to ``--output`` or ``on_record``), not only counted."""
    processes, threads = spec.crawling_processes, spec.fetching_threads
    warc = None if spec.options.warc is None else Path(spec.options.warc)
    children: list[BaseProcess] = []
    # What this process holds now (modules, the suffix list, the seeds) is never
    # collected in the shards: frozen at their fork, a shard's collections do not walk
    # it (nor write to its pages, copied on write otherwise), as the gc module's
    # documentation advises; this process's own collections see it again at once.
    gc.freeze()
    try:
        for index in range(processes):
            mine = [m for m in messages if owner_of(url_of(m), processes) == index]
            share = threads // processes + (index < threads % processes)  # the threads in all
            arguments = (
                shards, index, crawl, parts_of, store, share, mine,
                _of_shard(earlier, index, processes), warc, logging.getLogger().getEffectiveLevel(),
                whole_records,
            )  # fmt: skip
            child = context.Process(
                target=_shard, name=f"crawler-shard-{index}", args=arguments, daemon=True
            )
            child.start()
            children.append(child)
    finally:
        gc.unfreeze()
    return children


def _reap(children: list[BaseProcess]) -> None:
    """Wait for each shard's process to end, killing those still alive after
    :data:`STOP_GRACE` seconds."""
    for each in children:
        each.join(STOP_GRACE)
        if each.is_alive():
            each.kill()
            each.join()


def _shares_keys(options: CrawlOptions) -> bool:
    """Whether the crawl has keys its shards share (:mod:`crawler.embedded.shared_store`)."""
    shared = options.obey_robots or options.sitemaps or options.auto_throttle or options.cookies
    shared = shared or options.near_duplicates is not None
    return shared or any(
        value is not None
        for value in (
            options.max_pages, options.max_pages_per_host, options.max_per_host,
            options.max_rate, options.warc,
        )
    )  # fmt: skip


def _of_shard(
    earlier: tuple[str, list[tuple[str, recrawl.Earlier]]] | None, index: int, count: int
) -> tuple[str, list[tuple[str, recrawl.Earlier]]] | None:
    """The crawl's id and the ``--recrawl-from`` pages of shard ``index``."""
    if earlier is None:
        return None
    crawl_id, pages = earlier
    return crawl_id, [page for page in pages if owner_of(page[0], count) == index]


def _follow(
    shards: Shards,
    children: list[BaseProcess],
    store: shared_store.SharedStore | None,
    relay: _Relay,
    keep: Callable[[Record, Any], None],
    progress: Progress,
    full: one_process.NoRoom,
    stop: threading.Event | None,
) -> tuple[bool, str | None]:
    """Take in what the shards send until each said it ended, telling them to stop at
    the crawl's end, on ``stop`` or Ctrl-C (then interrupted), a full disk, a lost
    shard or a lost shared ``store``; whether interrupted, and what was lost."""
    ended: set[int] = set()
    stopping, interrupted, lost = False, False, None
    shown = time.monotonic()
    while len(ended) < len(children):
        try:
            lost = lost or _take_in(relay.received, ended, keep, progress)
            if not stopping:
                lost = lost or _gone(children, ended) or _store_gone(store)
                quick = (
                    lost is not None
                    or full.error is not None
                    or (stop is not None and stop.is_set())
                )
                if quick or shards.finished():
                    interrupted = stop is not None and stop.is_set()
                    _tell_stop(shards, children, quick=quick)
                    stopping, deadline = True, time.monotonic() + _stop_seconds()
            elif time.monotonic() > deadline or _all_gone(children, ended):
                break  # what is left is killed
            if not stopping and time.monotonic() - shown > one_process.REFRESH_MS / 1000:
                progress.show()
                shown = time.monotonic()
        except KeyboardInterrupt:
            interrupted = True
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the summary
            if not stopping:
                _tell_stop(shards, children, quick=True)
                stopping, deadline = True, time.monotonic() + _stop_seconds()
    return interrupted, lost


def _stop_seconds() -> float:
    return one_process.STOP_TIMEOUT_MS / 1000 + STOP_GRACE


class _Relay:
    """The shards' results, read by a thread of its own: a shard killed part-way
    through sending a batch leaves the rest unread for ever, and the first process must
    still see that it died (the thread is left waiting, a daemon)."""

    def __init__(self, results: multiprocessing.queues.Queue[Any]) -> None:
        self.results = results
        results.cancel_join_thread()  # what this process puts in (the last word) may wait
        self.received: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="crawler-results", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self.results.get()) is not None:
            self.received.put(item)

    def close(self) -> None:
        """The thread's last item: every shard has ended."""
        self.results.put(None)
        self._thread.join(STOP_GRACE)


def _take_in(
    received: queue.Queue[Any],
    ended: set[int],
    keep: Callable[[Record, Any], None],
    progress: Progress,
) -> str | None:
    """What the shards sent, for a moment at most: a failed shard's traceback, if one."""
    try:
        item = received.get(timeout=SHARD_POLL)
    except queue.Empty:
        return None
    failed = None
    while True:
        kind, index, *payload = item
        if kind == "ended":
            ended.add(index)
        elif kind == "failed":
            ended.add(index)
            failed = f"crawling process {index} failed:\n{payload[0]}"
        else:
            records, discovered, logs = payload
            for line in logs:
                logging.getLogger(line.name).handle(line)
            progress.discover(discovered)
            for record in records:
                # A full disk or a failed sink stops the crawl (full.error): what is
                # left is not written.
                with contextlib.suppress(DiskFull, ItemSinkError):
                    keep(record, None)
        try:
            item = received.get_nowait()
        except queue.Empty:
            return failed


def _gone(children: list[BaseProcess], ended: set[int]) -> str | None:
    """A shard's process that ended without saying so: what became of it."""
    for index, child in enumerate(children):
        if index not in ended and child.exitcode is not None:
            return f"crawling process {index} (pid {child.pid}) ended with status {child.exitcode}"
    return None


def _all_gone(children: list[BaseProcess], ended: set[int]) -> bool:
    """Whether every shard that did not say it ended is dead."""
    return all(child.exitcode is not None for i, child in enumerate(children) if i not in ended)


def _store_gone(store: shared_store.SharedStore | None) -> str | None:
    """The shared store's process ended: what became of it."""
    process = None if store is None else shared_store.process_of(store)
    if process is None or process.exitcode is None:
        return None
    return f"the shared store's process (pid {process.pid}) ended with status {process.exitcode}"


def _tell_stop(shards: Shards, children: list[BaseProcess], *, quick: bool) -> None:
    """Tell each shard's process that is still alive to stop."""
    for inbox, child in zip(shards.inboxes, children, strict=True):
        if child.exitcode is None:
            inbox.put(_Stop(quick))


def _shard(
    shards: Shards,
    index: int,
    crawl: dramatiq.Actor[Any, Any],
    parts_of: PartsOf,
    store: shared_store.SharedStore | None,
    threads: int,
    seeds: list[dramatiq.Message[Any]],
    earlier: tuple[str, list[tuple[str, recrawl.Earlier]]] | None,
    warc: Path | None,
    level: int,
    whole_records: bool,
) -> None:
    """One shard's process: ``--local`` for its URLs until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the first process's to handle
    die_with_parent()
    shards.let_inboxes_go()  # (a fork resets it)
    outbox = _Outbox(shards, index, whole_records)
    handler = logging.handlers.QueueHandler(outbox)  # type: ignore[arg-type]
    handler.setFormatter(logging.Formatter("%(message)s"))  # the first process's says the rest
    logging.basicConfig(level=level, handlers=[handler], force=True)
    try:
        if store is None:  # this shard's claims, counters and rate limits
            stores = Stores.in_memory(warc)
        else:  # and the keys all shards share
            remote = store.client()  # type: ignore[attr-defined]
            stores = Stores.in_memory(warc, shared_store.ShardClient(remote))
        here = parts_of(stores)
        lifetimes = here.lifetimes
        if earlier:  # the --recrawl-from pages of this shard, under the crawl's id
            with stores.memcache_pool.reserve() as client:
                recrawl.load(client, earlier[0], earlier[1], lifetimes.grace)
        broker = ShardBroker(shards, index)
        actor = local.serve(crawl, here, broker=broker).get_actor(crawl.actor_name)
        _, worker = one_process.workers(actor, None, threads)
        keep_books(broker, stores, lifetimes, also=outbox.keep, on_discover=outbox.discover)
        broker.emit_after("process_boot")
        worker.start()
        quick = True
        try:
            one_process.start_counting(stores, seeds, lifetimes)
            for message in seeds:
                broker.enqueue(message)
            quick = _serve(shards, index, broker, actor, stores, lifetimes, outbox)
        finally:
            worker.stop(timeout=one_process.STOP_TIMEOUT_MS if quick else 600_000)
        outbox.flush()
        shards.results.put(("ended", index))
    except BaseException:
        outbox.flush()
        shards.results.put(("failed", index, traceback.format_exc()))
    finally:
        shards.results.close()
        shards.results.join_thread()


def _serve(
    shards: Shards,
    index: int,
    broker: ShardBroker,
    actor: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    outbox: _Outbox,
) -> bool:
    """Take in the links other shards hand over until told to stop; idle, say so.
    Whether the stop is a quick one (interrupted, or this process orphaned)."""
    inbox, parent = shards.inboxes[index], os.getppid()
    while True:
        try:
            item = inbox.get(timeout=SHARD_POLL)
        except queue.Empty:
            outbox.flush()
            shards.idle[index] = int(broker.quiet())
            if os.getppid() != parent:
                return True
            continue
        if isinstance(item, _Stop):
            return item.quick
        shards.taken(index)
        _claim(item, actor, stores, lifetimes)
        shards.done_with()


def _claim(
    handover: Handover, actor: dramatiq.Actor[Any, Any], stores: Stores, lifetimes: Lifetimes
) -> None:
    """Claim and send the links another shard found, as if found here."""
    with stores.memcache_pool.reserve() as client:
        claims.send_claimed(
            client, actor, handover.parent_id, handover.urls, handover.kwargs,
            handover.crawl_id, lifetimes, first_delivery=handover.first_delivery,
            priority=handover.priority, sitemaps=handover.sitemaps, own=handover.own,
        )  # fmt: skip


class _Outbox:
    """What a shard sends the first process: records (``whole``, or without their
    links when it only counts them), log lines (a :class:`~logging.handlers.QueueHandler`'s
    queue) and how many URLs it discovered, in batches."""

    def __init__(self, shards: Shards, index: int, whole: bool) -> None:
        self.shards, self.index, self.whole = shards, index, whole
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._logs: list[logging.LogRecord] = []
        self._discovered = 0
        self._sent = time.monotonic()

    def keep(self, record: Record, message: Any) -> None:
        if not self.whole and "links" in record:  # the first process counts it only
            record = {key: value for key, value in record.items() if key != "links"}  # type: ignore[assignment]
        with self._lock:
            self._records.append(record)
            if len(self._records) >= BATCH or time.monotonic() - self._sent > SEND_EVERY:
                self._send()

    def discover(self) -> None:
        with self._lock:
            self._discovered += 1

    def put_nowait(self, line: logging.LogRecord) -> None:
        with self._lock:
            self._logs.append(line)

    def flush(self) -> None:
        with self._lock:
            if self._records or self._logs or self._discovered:
                self._send()

    def _send(self) -> None:
        batch = ("results", self.index, self._records, self._discovered, self._logs)
        self.shards.results.put(batch)
        self._records, self._logs, self._discovered = [], [], 0
        self._sent = time.monotonic()
