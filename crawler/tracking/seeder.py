"""The seeder's side of a crawl of workers: seeding it, following it (``--wait`` until it is
finished, ``--status``), and its dead letters (``--dead-letters``, ``--replay``)."""

from __future__ import annotations

import copy
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, suppress
from pathlib import Path
from typing import Any, Protocol

import dramatiq
import pika

from crawler.brokers.returning import broker_errors
from crawler.environment import Lifetimes, dedup_store_kind, uses_redis
from crawler.frontier import counters
from crawler.frontier.keep_alive import KeepAlive
from crawler.items import counting as item_counts
from crawler.items.sinks import ItemSinkError, ItemSinks, JsonLinesSink
from crawler.options import CrawlOptions
from crawler.outcomes import (
    CANCELLED,
    DEFERRED,
    DUPLICATE,
    RETRYING,
    WRITTEN,
    eviction_warning,
    summary,
)
from crawler.records import Record, RecordSink, page_name, url_of
from crawler.stores import StorePool, store_errors
from crawler.tracking import dead_letters as dead_letter_queue
from crawler.tracking import figures, record_queue, statistics
from crawler.tracking.ledger import Ledger
from crawler.tracking.progress import Progress

#: What the progress line waits for while RabbitMQ blocks publishers.
BLOCKED = "RabbitMQ, which blocks publishers (a memory or disk alarm)"
#: Seconds each wait for records lasts before the counters are read again.
POLL = 0.5
#: Seconds between two looks at Memcached's evictions while waiting.
EVICTION_CHECK = 2.0
#: Once the sink failed and the crawl is paused, the records queue is read on until
#: nothing came for ``UNSENT_QUIET`` seconds, ``UNSENT_MOST`` seconds at most: the items
#: of the records read go to the file :func:`unsent_path` names.
UNSENT_QUIET, UNSENT_MOST = 2.0, 15.0


class Messages(Protocol):
    """A crawl's first messages: how many (``len()``), and each, iterated (a list, or
    :class:`Seeds`)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[dramatiq.Message[Any]]: ...


class Seeds:
    """A crawl's first messages, made one at a time as they are iterated, each time
    anew (from a seed file read again): a crawl of any number of seeds is sent without
    its messages all in memory.

    Parameters:
      count(int): How many messages ``make`` makes.
      make(Callable): The messages, made as they are iterated.
    """

    def __init__(self, count: int, make: Callable[[], Iterator[dramatiq.Message[Any]]]) -> None:
        self._count = count
        self._make = make

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dramatiq.Message[Any]]:
        return self._make()


def seed(
    actor: dramatiq.Actor[Any, Any],
    pool: StorePool,
    lifetimes: Lifetimes,
    messages: Messages,
    options: CrawlOptions,
    *,
    wait: bool,
    output: RecordSink | None,
    adding: bool = False,
    items: ItemSinks | None = None,
    progress: Progress | None = None,
) -> int:
    """Count and send the seeds as ``actor`` messages; with ``wait``, follow the crawl
    to its end, counted in ``progress`` (None: one of its own, on stderr).  ``pool`` is
    the dedup store's, where the crawl's counters live (``lifetimes`` long);
    ``adding``: the crawl exists already (``--crawl-id``), 2 when it is unknown.  The
    messages are sent as they are made; only their ids are kept,
    with ``wait``, to follow them, and each page's items written to ``items``."""
    crawl_id = options.crawl_id
    assert crawl_id is not None
    if adding and _figures(pool, crawl_id, required=False) is None:
        return _unknown(crawl_id)
    reader = record_queue.Reader(actor.broker, crawl_id) if wait else None
    try:
        seeds = send_seeds(actor, pool, lifetimes, messages, crawl_id, adding=adding, ids=wait)
    except BaseException:
        if reader is not None:
            reader.close()
        if items is not None:
            items.close()
        raise
    more = " more" if adding else ""
    print(f"crawl {crawl_id} seeded with {len(messages)}{more} URL(s)", flush=True)
    if reader is None:
        return 0
    alarm = PublishersBlocked(actor.broker)
    try:
        keep_alive = KeepAlive(lifetimes.grace)
        return follow(
            pool,
            crawl_id,
            seeds,
            reader,
            output,
            keep_alive,
            alarm,
            items=items,
            lifetimes=lifetimes,
            progress=progress,
        )
    finally:
        alarm.close()


def send_seeds(
    actor: dramatiq.Actor[Any, Any],
    pool: StorePool,
    lifetimes: Lifetimes,
    messages: Messages,
    crawl_id: str,
    *,
    adding: bool = False,
    ids: bool = True,
) -> list[str]:
    """Count the crawl's seeds (a new crawl: note Memcached's evictions so far and
    describe it for the dashboard), then send them as they are made: their message
    ids, when ``ids`` (to follow them), else none kept."""
    with pool.reserve() as client:
        counters.start(client, crawl_id, len(messages), lifetimes.grace)
        if not adding:
            counters.note_evictions_at_start(client, crawl_id, lifetimes.grace)
            figures.describe(client, crawl_id, about(messages, "workers"), lifetimes.grace)
    seeds: list[str] = []
    for message in messages:
        sent = actor.broker.enqueue(message)
        if ids:
            seeds.append(sent.message_id)
    return seeds


def about(messages: Messages, where: str) -> dict[str, Any]:
    """What the dashboard lists of a crawl: its first seeds, options, where it runs."""
    made = iter(messages)
    first = list(itertools.islice(made, 5))
    if hasattr(made, "close"):  # a generator, reading a seed file: closes it
        made.close()
    options = (first[0].kwargs.get("options") or {}) if first else {}
    return {
        "seeds": [message.args[0] for message in first],
        "seed_count": len(messages),
        "options": {name: value for name, value in options.items() if name != "crawl_id"},
        "where": where,
    }


class PublishersBlocked:
    """Whether RabbitMQ blocks publishers (a memory or disk alarm), so that the workers'
    links and records wait: RabbitMQ says so (``connection.blocked``) only to a
    connection that publishes, so a connection of this one's own publishes an empty
    message no queue takes, now and then, and listens.

    Parameters:
      broker(dramatiq.Broker): The crawl's broker; on Redis nothing is ever blocked.
    """

    #: Seconds between two probes while publishers are not blocked.
    PROBE_EVERY = 1.0
    #: The routing key of the probes: no queue is bound to it, so RabbitMQ drops them.
    PROBE = "crawler.seeder.probe"

    def __init__(self, broker: dramatiq.Broker) -> None:
        self.blocked = False
        self._parameters: Any = None
        if not uses_redis():
            self._parameters = copy.copy(broker.parameters)  # type: ignore[attr-defined]
            # One quick try a probe: an outage is the reader's to wait out.
            self._parameters.connection_attempts, self._parameters.socket_timeout = 1, 1.0
            # Blocked, it stays open however long the alarm lasts, to hear it end.
            self._parameters.blocked_connection_timeout = None
        self._connection: Any = None
        self._next_probe = 0.0

    def _say(self, blocked: bool) -> None:
        self.blocked = blocked

    def __call__(self) -> bool:
        """Probe when it is time, read what RabbitMQ said; whether publishers are blocked."""
        if self._parameters is None:
            return False
        try:
            if self._connection is None:
                if time.monotonic() < self._next_probe:
                    return self.blocked
                self._next_probe = time.monotonic() + self.PROBE_EVERY
                self._connection = pika.BlockingConnection(self._parameters)
                self._connection.add_on_connection_blocked_callback(lambda *_: self._say(True))
                self._connection.add_on_connection_unblocked_callback(lambda *_: self._say(False))
                self._channel = self._connection.channel()
            if not self.blocked and time.monotonic() >= self._next_probe:
                self._channel.basic_publish("", self.PROBE, b"")
                self._next_probe = time.monotonic() + self.PROBE_EVERY
            self._connection.process_data_events(time_limit=0)
        except broker_errors():  # RabbitMQ gone (an outage): a fresh connection asks again
            self.close()
        return self.blocked

    def close(self) -> None:
        # A fresh connection is told anew: it is blocked only once it has published.
        connection, self._connection, self.blocked = self._connection, None, False
        if connection is not None and connection.is_open:
            with suppress(*broker_errors()):
                connection.close()


class SinkFailed(ItemSinkError):
    """``--items``' sink did not take a record's items: its error's line, and the record
    (already counted as ended by the ledger, not yet written to ``--output``)."""

    def __init__(self, error: ItemSinkError, record: Record) -> None:
        super().__init__(str(error))
        self.__cause__ = error
        self.record = record


#: What :func:`arrivals` yields between records: a poll ended (time to look at the
#: counters), or the broker did not answer (the reader reconnects before the next).
POLLED, BROKER_DOWN = "polled", "broker-down"


def arrivals(
    reader: record_queue.Reader,
    ledger: Ledger,
    output: RecordSink | None = None,
    items: ItemSinks | None = None,
) -> Iterator[Record | str]:
    """Each final record of the crawl once, as it arrives, until the ledger has nothing
    pending: a record sent again by a worker that died before it acknowledged comes
    once; each record's ``sent`` ids are expected in turn; a page's record is written
    to ``output`` the first time its URL is, its items to ``items`` before that.
    Between polls :data:`POLLED`, and :data:`BROKER_DOWN` when the broker does not
    answer (the caller waits it out).  A sink that fails raises a :class:`SinkFailed`
    into the read, carrying the record whose items it did not take: the records in
    hand are not acknowledged (they come again once the reader reconnects)."""
    while ledger.pending:
        try:
            with closing(reader.read(timeout=POLL)) as arriving:
                for record in arriving:
                    if not ledger.end(record["message_id"]):
                        continue  # sent again by a worker that died before it acknowledged
                    ledger.expect(record.pop("sent", ()))
                    written = record["outcome"] in WRITTEN and ledger.first_write(page_name(record))
                    if items is not None:
                        try:
                            items.take(record, written=written)
                        except ItemSinkError as e:  # raised where it was read: no ack
                            arriving.throw(SinkFailed(e, record))
                    if written and output is not None:
                        output.write(record)
                    yield record
                    if not ledger.pending:
                        break  # that was the last one: no need to wait out the poll
            ledger.flush()
        except broker_errors():
            reader.reconnect()
            yield BROKER_DOWN
            continue
        yield POLLED


def follow(
    pool: StorePool,
    crawl_id: str,
    seeds: list[str],
    reader: record_queue.Reader,
    output: RecordSink | None,
    keep_alive: KeepAlive,
    publishers_blocked: Callable[[], bool] = lambda: False,
    *,
    items: ItemSinks | None = None,
    lifetimes: Lifetimes | None = None,
    progress: Progress | None = None,
) -> int:
    """Show ``progress`` (None: one of its own, on stderr) until nothing of the crawl is
    queued, in flight or waiting for a retry; close ``reader`` on the way out.

    "Finished" is read from the records themselves (:func:`arrivals`): each message's
    final record names the messages it sent, so the crawl is over once the seeds and
    every message named have ended, in whatever order their records came (kept in a
    :class:`Ledger` on disk, so that a crawl of any size waits in bounded memory).
    Outages of the broker or Memcached are waited out (the progress line says so);
    Ctrl-C stops the waiting, not the crawl.  Meanwhile ``keep_alive`` refreshes the
    crawl's journal and counters, as workers do.  Each page's items go to ``items``
    (closed on the way out); one that cannot be written pauses the crawl, and the items
    still coming go to a file (:func:`_pause_and_read_on`); one line, exit status 1.
    """
    progress = Progress() if progress is None else progress
    broker_name = "Redis" if uses_redis() else "RabbitMQ"
    store_name = dedup_store_kind()
    ledger = Ledger()  # every message id and URL written, on disk: memory stays bounded
    ledger.expect(seeds)
    seed_ids = set(seeds)
    seen_before: set[str] = set()  # seeds the crawl had crawled already (--crawl-id)
    interrupted = False
    unsent: Unsent | None = None
    next_eviction_check = 0.0
    try:
        for arrived in arrivals(reader, ledger, output, items):
            if arrived == BROKER_DOWN:
                progress.waiting_for.add(broker_name)
                progress.show()
                time.sleep(POLL)
                continue
            if not isinstance(arrived, str):
                if arrived["message_id"] in seed_ids and arrived["outcome"] == DUPLICATE:
                    seen_before.add(arrived["url"])
                progress.record(arrived)
                continue
            progress.waiting_for.discard(broker_name)
            next_eviction_check = _read_figures(
                progress, pool, crawl_id, ledger, keep_alive, store_name, next_eviction_check
            )
            _note_blocked(progress, publishers_blocked())
            progress.show()
    except KeyboardInterrupt:
        interrupted = True
    except ItemSinkError as e:
        unsent = _pause_and_read_on(e, pool, lifetimes, reader, ledger, output, progress)
    finally:
        _close(reader, ledger, output, items)
    if unsent is not None:
        return _sink_failed(progress, unsent)
    if not interrupted:  # the last figures (retries, deferrals: no record says them)
        _read_figures(progress, pool, crawl_id, ledger, keep_alive, store_name, math.inf)
    return _say_the_end(progress, crawl_id, seen_before, interrupted=interrupted)


def _note_blocked(progress: Progress, blocked: bool) -> None:
    """Whether RabbitMQ blocks publishers, on the progress line."""
    if blocked:
        progress.waiting_for.add(BLOCKED)
    else:
        progress.waiting_for.discard(BLOCKED)


def _close(
    reader: record_queue.Reader,
    ledger: Ledger,
    output: RecordSink | None,
    items: ItemSinks | None,
) -> None:
    """What following a crawl opened, closed on any exit: workers then stop publishing
    records."""
    reader.close()
    ledger.close()
    if output is not None:
        output.close()
    if items is not None:
        with suppress(ItemSinkError):  # a failed one said why already
            items.close()


class Unsent:
    """The items ``--items``' sink did not take, written to a file instead
    (:func:`unsent_path`) as a JSON lines sink writes them (:class:`JsonLinesSink`,
    added to when it exists), opened with the first; counted, and those that could not
    be written there either.

    Parameters:
      output(RecordSink|None): ``--output``, which the file goes next to.
      crawl_id(str): The crawl's id, on each line.
      error(ItemSinkError): Why the sink failed.
      paused(str): What the crawl became, as the line says it.
    """

    def __init__(
        self, output: RecordSink | None, crawl_id: str, error: ItemSinkError, paused: str
    ) -> None:
        self.path, self.crawl_id = unsent_path(output, crawl_id), crawl_id
        self.error, self.paused, self.recorded = error, paused, output is not None
        self.saved = self.lost = 0  # items
        self.failed: ItemSinkError | None = None  # the file's own error
        self._file: JsonLinesSink | None = None

    def write(self, url: str, items: list[dict[str, Any]]) -> None:
        if self.failed is None:
            try:
                if self._file is None:
                    self._file = JsonLinesSink(self.path, self.crawl_id, append=True)
                self._file.write(url, items)
                self.saved += len(items)
                return
            except ItemSinkError as e:
                self.failed = e
        self.lost += len(items)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except ItemSinkError as e:  # its lines were flushed as they were written
                self.failed = self.failed or e


def unsent_path(output: RecordSink | None, crawl_id: str) -> Path:
    """Where the items the sink did not take go: next to ``--output``'s file, else in
    the current directory."""
    name = f"items-{crawl_id}-unsent.jsonl"
    if output is not None and str(output.path) != "-":
        return output.path.parent / name
    return Path(name)


def _pause(pool: StorePool, crawl_id: str, lifetimes: Lifetimes | None) -> str:
    """The crawl paused (``lifetimes``' grace long), so that no more of its pages end
    with their items unwritten: what the line says of it."""
    try:
        with pool.reserve() as client:
            counters.pause(client, crawl_id, (lifetimes or Lifetimes()).grace)
    except store_errors():
        return f"crawl {crawl_id} goes on unfollowed (the dedup store did not answer to pause it)"
    return (
        f"crawl {crawl_id} paused: 'crawler resume {crawl_id}' carries it on unfollowed"
        f" (its items then unwritten), 'crawler cancel {crawl_id}' ends it"
    )


def _pause_and_read_on(
    error: ItemSinkError,
    pool: StorePool,
    lifetimes: Lifetimes | None,
    reader: record_queue.Reader,
    ledger: Ledger,
    output: RecordSink | None,
    progress: Progress,
) -> Unsent:
    """Once the sink failed (``error``): the crawl paused (:func:`_pause`); the record
    in hand, then those still coming (the records queue's, the pages in flight's)
    until none came for :data:`UNSENT_QUIET` seconds (:data:`UNSENT_MOST` at most, or
    until Ctrl-C), counted, written to ``output``, their items to the :class:`Unsent`
    returned; the records the sink took already come again, skipped."""
    crawl_id = reader.crawl_id
    unsent = Unsent(output, crawl_id, error, _pause(pool, crawl_id, lifetimes))
    if isinstance(error, SinkFailed):
        _set_aside(error.record, output, progress, unsent, written=True)
    reader.reconnect()  # what was read and not acknowledged comes again
    start = last = time.monotonic()
    try:
        while ledger.pending and time.monotonic() - last < UNSENT_QUIET:
            if time.monotonic() - start >= UNSENT_MOST:
                break
            try:
                with closing(reader.read(timeout=POLL)) as arriving:
                    for record in arriving:
                        last = time.monotonic()
                        if not ledger.end(record["message_id"]):
                            continue  # a copy, or a record the sink took
                        ledger.expect(record.pop("sent", ()))
                        written = record["outcome"] in WRITTEN and ledger.first_write(
                            page_name(record)
                        )
                        _set_aside(record, output, progress, unsent, written=written)
                ledger.flush()
            except broker_errors():
                reader.reconnect()
                time.sleep(POLL)
    except KeyboardInterrupt:
        pass
    finally:
        unsent.close()
    return unsent


def _set_aside(
    record: Record, output: RecordSink | None, progress: Progress, unsent: Unsent, *, written: bool
) -> None:
    """A record read once the sink failed: its items to ``unsent`` and itself to
    ``output`` when it is ``written`` (the first of its URL), counted."""
    if written and record.get("items"):
        unsent.write(page_name(record), record["items"])
    if written and output is not None:
        output.write(record)
    progress.record(record)


def _sink_failed(progress: Progress, unsent: Unsent) -> int:
    """``--items``' sink failed: the summary so far and one line saying so, where the
    items it did not take are, and what of the crawl; exit status 1."""
    print(progress.summary(interrupted=True), flush=True)
    where = repr(str(unsent.path))
    if unsent.failed is None:
        kept = (
            f"the {unsent.saved} item(s) not written are in {where} (JSON lines, as"
            " '--items FILE.jsonl' writes them: load them once the sink is fixed)"
        )
    else:
        kept = (
            f"{unsent.lost} item(s) could not be written to {where} either ({unsent.failed}"
            + (f"; {unsent.saved} are there, JSON lines" if unsent.saved else "")
            + "): "
            + ("the records file carries them" if unsent.recorded else "they are lost")
        )
    print(f"crawler: {unsent.error}; {kept}; {unsent.paused}", file=sys.stderr, flush=True)
    return 1


def _read_figures(
    progress: Progress,
    pool: StorePool,
    crawl_id: str,
    ledger: Ledger,
    keep_alive: KeepAlive,
    store_name: str,
    next_eviction_check: float,
) -> float:
    """The crawl's figures from the store into ``progress`` (or ``store_name`` waited
    for); past ``next_eviction_check``, its evictions read and ``keep_alive`` run too.
    When the next check is due."""
    try:
        figures = _figures(pool, crawl_id)
        if time.monotonic() >= next_eviction_check:
            with pool.reserve() as client:
                progress.evicted = counters.evicted_during(client, crawl_id)
                keep_alive(client, crawl_id)
            next_eviction_check = time.monotonic() + EVICTION_CHECK
    except store_errors():
        progress.waiting_for.add(store_name)
    else:
        progress.waiting_for.discard(store_name)
        progress.discovered = max(figures[counters.DISCOVERED], ledger.expected)
        progress.paused = bool(figures[counters.PAUSE_REQUESTED])
        progress.counts[RETRYING] = figures[RETRYING]
        progress.counts[DEFERRED] = figures[DEFERRED]  # no record of a deferral comes here
    return next_eviction_check


def _say_the_end(
    progress: Progress, crawl_id: str, seen_before: set[str], *, interrupted: bool
) -> int:
    """The summary of a crawl followed to its end (or until Ctrl-C); the exit status."""
    print(progress.summary(interrupted=interrupted), flush=True)
    for url in sorted(seen_before):
        print(f"{url} was crawled in crawl {crawl_id} already: not fetched again.", flush=True)
    if interrupted:
        print(f"The crawl goes on; see it with --status {crawl_id}", flush=True)
        return 130
    if progress.counts[CANCELLED]:
        return 3
    return 1 if progress.failures else 0


def status(pool: StorePool, crawl_id: str, *, as_json: bool = False) -> int:
    """Print a crawl's figures (``as_json``: its statistics document,
    :func:`crawler.tracking.statistics.read`); 2 when the crawl is unknown."""
    figures = _figures(pool, crawl_id, required=False)
    if figures is None:
        return _unknown(crawl_id)
    if as_json:
        with pool.reserve() as client:
            document = statistics.read(client, crawl_id)
        print(json.dumps(document, indent=2, ensure_ascii=False), flush=True)
        return 0
    with pool.reserve() as client:
        items = item_counts.read(client, crawl_id)
        dropped = item_counts.read_dropped(client, crawl_id)
    print(
        f"crawl {crawl_id}: {counters.state(figures)}: "
        f"{summary(figures, every_part=True, items=items, dropped=dropped)}; "
        f"{figures[counters.DISCOVERED]} discovered, "
        f"{figures[counters.OUTSTANDING]} outstanding, "
        f"{figures[RETRYING]} failed attempts retried, {figures[DEFERRED]} rate-limit deferrals."
    )
    with pool.reserve() as client:
        evicted = counters.evicted_during(client, crawl_id)
    if evicted:
        print(eviction_warning(evicted))
    return 0


def cancel(pool: StorePool, crawl_id: str, lifetimes: Lifetimes) -> int:
    """``--cancel``: the crawl's messages end without a fetch from now on; 2 when the
    crawl is unknown."""
    if _figures(pool, crawl_id, required=False) is None:
        return _unknown(crawl_id)
    with pool.reserve() as client:
        counters.cancel(client, crawl_id, lifetimes.grace)
    print(
        f"crawl {crawl_id} cancelled: its queued and retrying URLs end without a fetch; "
        "pages being fetched now finish",
        flush=True,
    )
    return 0


def pause(pool: StorePool, crawl_id: str, lifetimes: Lifetimes, *, paused: bool) -> int:
    """``pause``: the crawl's messages wait in the broker unfetched from now on, until
    ``resume``; 2 when the crawl is unknown."""
    if _figures(pool, crawl_id, required=False) is None:
        return _unknown(crawl_id)
    with pool.reserve() as client:
        if paused:
            counters.pause(client, crawl_id, lifetimes.grace)
        else:
            counters.resume(client, crawl_id)
    if paused:
        print(
            f"crawl {crawl_id} paused: its URLs wait in the broker, unfetched, until"
            f" 'crawler resume {crawl_id}'; pages being fetched now finish",
            flush=True,
        )
    else:
        print(f"crawl {crawl_id} resumed", flush=True)
    return 0


def dead_letters(
    broker: dramatiq.Broker,
    queue: str,
    pool: StorePool,
    lifetimes: Lifetimes,
    crawl_id: str,
    *,
    replay: bool,
) -> int:
    """List the crawl's dead-lettered URLs, or with ``replay`` send them again."""
    invalid: list[tuple[dramatiq.Message[Any], str]] = []
    if replay:
        messages, invalid = dead_letter_queue.replay(broker, queue, crawl_id, pool, lifetimes)
    else:
        messages = dead_letter_queue.listing(broker, queue, crawl_id)
    for message in messages:
        attempts = int(message.options.get("retries", 0)) + 1
        line = f"{url_of(message)} ({attempts} attempt{'s' if attempts > 1 else ''}"
        error = str(message.options.get("traceback") or "").strip().rpartition("\n")[2]
        print(line + (f"; last retried for: {error})" if error else ")"))
    whose = "every crawl" if crawl_id == dead_letter_queue.ALL else f"crawl {crawl_id}"
    for message, reason in invalid:
        print(f"{url_of(message)} not sent again: workers refuse it ({reason})")
    if replay:
        print(f"{len(messages)} dead-lettered URL(s) of {whose} sent again")
    else:
        print(f"{len(messages)} dead-lettered URL(s) of {whose}")
    return 0


def _unknown(crawl_id: str) -> int:
    """Say that no crawl ``crawl_id`` is known: exit code 2."""
    print(f"error: no crawl {crawl_id} is known to {dedup_store_kind()}", file=sys.stderr)
    return 2


def _figures(pool: StorePool, crawl_id: str, *, required: bool = True) -> Any:
    with pool.reserve() as client:
        figures = counters.read(client, crawl_id)
    if figures is None and required:
        return dict.fromkeys(counters.NAMES, 0) | {counters.OUTSTANDING: 1}
    return figures
