"""Crawls from Python: the ``crawler`` command's crawls and options, for code.

A crawl in this process, as ``crawler crawl --local`` runs it::

    from crawler import Crawl

    crawl = Crawl(["https://example.com/"], max_pages=50, handler=my_handler)
    for record in crawl:          # each URL's record as it ends; the crawl runs meanwhile
        print(record["url"], record.get("data"))
    crawl.exit_status             # 0: no URL failed for good

A crawl of workers, as ``crawler crawl`` seeds it (``crawler worker`` runs them)::

    from crawler import seed

    crawl = seed(["https://example.com/"], records=True)
    for record in crawl.records():  # until the crawl is finished
        ...
    crawl.status()                  # its figures; pause(), resume(), cancel()

Options are the command's, in Python's spelling: ``follow_relative=False`` for
``--no-follow-relative``, ``max_pages=50`` for ``--max-pages 50``, a list for a
repeatable one (``include=["/docs/"]``); they are checked as the command checks them,
and a wrong one raises :class:`CrawlError` with the command's words.  The defaults are
``crawler crawl``'s (relative links followed, on the seeds' sites, robots.txt obeyed).
They make a :class:`~crawler.crawl_spec.CrawlSpec` (:meth:`CrawlSpec.from_options
<crawler.crawl_spec.CrawlSpec.from_options>`), as the command's flags do: no command
line is parsed.
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dramatiq

from crawler.crawl_spec import CrawlError, CrawlSpec, flag
from crawler.embedded.entry import run, seed_messages
from crawler.environment import check_variables
from crawler.frontier import counters
from crawler.frontier.keep_alive import KeepAlive
from crawler.handlers import Handler
from crawler.option_table import Keywords
from crawler.records import Record
from crawler.stores import store_errors
from crawler.tracking import record_queue, seeder
from crawler.tracking.ledger import Ledger
from crawler.tracking.progress import Progress
from crawler.worker_parts import WorkerParts

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _parts() -> tuple[dramatiq.Actor[Any, Any], WorkerParts]:
    """The ``crawl`` actor and the parts :mod:`crawler.example` built (stores,
    lifetimes, handlers), imported when a crawl is first run (importing it makes the
    broker; ``import crawler`` does not)."""
    try:
        check_variables()  # a bad one a CrawlError here: importing the module would exit
    except ValueError as e:
        raise CrawlError(str(e)) from e
    from crawler import example

    return example.crawl, example.parts


#: Options the command line treats specially: they print and exit, which no crawl of
#: code's may do to its process.
SPECIAL_OPTIONS = ("help", "version")


def _spec(urls: Sequence[str], options: Mapping[str, Any]) -> CrawlSpec:
    """The crawl ``urls`` and the keyword ``options`` describe, checked as ``crawler
    crawl`` checks its flags (:meth:`CrawlSpec.from_options`); what the command line
    treats specially is refused."""
    for name in SPECIAL_OPTIONS:
        if name in options:
            raise CrawlError(
                f"{name}: {flag(name)} is the command line's; a Crawl has no use for it"
            )
    return CrawlSpec.from_options(urls, options)


_handler_names = itertools.count(1)


def _handler_name(handler: str | Handler | None) -> str | None:
    """A handler's name: a function's is a name of its own (the crawl's handlers take
    the function under it)."""
    if handler is None or isinstance(handler, str):
        return handler
    return f"crawler.api:handler{next(_handler_names)}"


class Crawl:
    """A crawl in this process (``crawler crawl --local``), run from code.

    Iterating it runs the crawl in a thread and yields each URL's record as it ends;
    :meth:`run` runs it to the end; :meth:`stop` stops it (as Ctrl-C does).  Each has
    its own claims, counters, rate limits, handler and browser, in memory: crawls run
    side by side in one process (from threads of their own) never mix their pages or
    records, nor those of the workers' crawls the program seeds (:func:`seed`).  Options
    the command line treats specially (``help``, ``version``) raise :class:`CrawlError`.

    It behaves as a library: it prints nothing, redirects no stream and leaves the root
    logger's handlers and level as the program configured them; what it has to say it
    logs (``crawler.*`` loggers; the actor's is upstream's ``example``).  Its figures are
    :attr:`progress` (counts as the crawl goes, :meth:`~crawler.tracking.progress.Progress.line`)
    and, once it ended, :attr:`summary` (the command line's closing lines) and
    :attr:`exit_status`.

    Parameters:
      urls(Sequence): The seeds.
      threads(int): Fetching threads (8).
      processes(int): Crawling processes, sharing the ``threads`` (1: this one; more
        are forked, as ``crawler crawl --local --processes N`` does).
      handler(str|Callable): A page handler, ``package.module:function`` or the
        function itself: what it returns is each page's record's ``data``.
      state(Path): Keep the crawl on disk there (``--state``): the same crawl made
        again carries on after an interruption.
      output(Path|str): The crawl's feed (``-o``): with a handler, its items as it
        made them (a file, ``FILE.json`` one JSON array, or a ``postgresql://`` table);
        without, the records.
      records(Path): Write the records there too (``--records``), with a handler too.
      options: Any other option of ``crawler crawl`` (see the module's text), typed by
        :class:`~crawler.option_table.Keywords`.

    Its :attr:`spec` is the crawl they describe, a :class:`~crawler.crawl_spec.CrawlSpec`
    made (and checked) with the ``Crawl``.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        threads: int = 8,
        processes: int = 1,
        handler: str | Handler | None = None,
        state: str | Path | None = None,
        output: str | Path | None = None,
        records: str | Path | None = None,
        **options: Unpack[Keywords],
    ) -> None:
        self._crawl, self._parts = _parts()
        handler_name = _handler_name(handler)
        self._handler = None if isinstance(handler, str) else handler
        extra = {
            "threads": threads, "processes": processes, "state": state, "output": output,
            "records": records, "handler": handler_name,
        }  # fmt: skip
        self.spec = _spec(urls, {**options, **extra, "local": True})
        self._records: queue.Queue[Record | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.exit_status: int | None = None
        self.error: BaseException | None = None
        #: The crawl's counts as it goes, shown nowhere.
        self.progress = Progress(stream=None)
        #: What ``crawler crawl --local`` prints at the end, once the crawl ended.
        self.summary: str | None = None

    def _run(self) -> None:
        try:
            self.exit_status = run(
                self.spec,
                self._crawl,
                self._parts,
                handler=self._handler,
                on_record=self._records.put,
                stop=self._stop,
                progress=self.progress,
            )
            self.summary = self.progress.summary(interrupted=self.exit_status == 130)
        except BaseException as e:  # handed to the caller's thread by __iter__
            self.error = e
        finally:
            self._records.put(None)

    def __iter__(self) -> Iterator[Record]:
        if self._thread is not None:
            raise RuntimeError("a Crawl runs once")
        self._thread = threading.Thread(target=self._run, name="crawl", daemon=True)
        self._thread.start()
        try:
            while (record := self._records.get()) is not None:
                yield record
        finally:
            self.stop()
            self._thread.join()
        if self.error is not None:
            raise self.error

    def run(self) -> int:
        """Run the crawl to its end: its exit status (0: no URL failed for good)."""
        for _ in self:
            pass
        assert self.exit_status is not None
        return self.exit_status

    def stop(self) -> None:
        """Stop the crawl: pages in hand finish within a few seconds."""
        self._stop.set()


class WorkersCrawl:
    """A crawl of workers seeded from code (:func:`seed`): its id, figures and records.

    Parameters:
      crawl_id(str): The crawl's id.
      seeds(list): Its seeds' message ids.
      reader(record_queue.Reader): Its records queue's reader (``records=True``).
    """

    def __init__(self, crawl_id: str, seeds: list[str], reader: record_queue.Reader | None) -> None:
        self.crawl_id = crawl_id
        self._seeds = seeds
        self._reader = reader

    def status(self) -> dict[str, int] | None:
        """The crawl's figures (``crawler status``): counts by outcome, ``discovered``,
        ``outstanding`` (0: finished), and its cancel and pause marks."""
        return status(self.crawl_id)

    def records(self) -> Iterator[Record]:
        """Each URL's final record, once, until the crawl is finished (seeded with
        ``records=True``); broker outages are waited out.  When it ends, :meth:`status`
        says the crawl is finished (``outstanding`` 0), unless the store lost some of
        its counters (see :func:`settled`)."""
        _, parts = _parts()
        if self._reader is None:
            raise CrawlError("seed the crawl with records=True to read its records")
        ledger = Ledger()
        ledger.expect(self._seeds)
        keep_alive = KeepAlive(parts.lifetimes.grace)
        try:
            for arrived in seeder.arrivals(self._reader, ledger):
                if not isinstance(arrived, str):
                    yield arrived
                elif arrived == seeder.POLLED:
                    with parts.stores.reserve() as client:
                        keep_alive(client, self.crawl_id)
        finally:
            ledger.close()
        settled(self.crawl_id)

    def close(self) -> None:
        """Stop reading records: workers stop sending them."""
        if self._reader is not None:
            self._reader.close()

    def cancel(self) -> None:
        _mark(self.crawl_id, counters.cancel)

    def pause(self) -> None:
        _mark(self.crawl_id, counters.pause)

    def resume(self) -> None:
        _, parts = _parts()
        with parts.stores.reserve() as client:
            counters.resume(client, self.crawl_id)


def seed(
    urls: Sequence[str],
    *,
    records: bool = False,
    handler: str | None = None,
    **options: Unpack[Keywords],
) -> WorkersCrawl:
    """Seed a crawl of ``urls`` for the workers (``crawler crawl``, without ``--wait``).

    Parameters:
      records(bool): Workers send each URL's record back, for :meth:`WorkersCrawl.records`.
      handler(str): The page handler its pages go through, one the workers loaded.
      options: Any option of ``crawler crawl`` (see the module's text), typed by
        :class:`~crawler.option_table.Keywords`.
    """
    crawl, parts = _parts()
    if options.get("local"):
        raise CrawlError("local: seed() sends a crawl to the workers; Crawl() runs one here")
    spec = _spec(urls, {**options, "handler": handler})
    crawl_options = dataclasses.replace(
        spec.options,
        collect_records=records,
        batched_records=records,
        records_without_links=False,
    )
    assert crawl_options.crawl_id is not None
    messages = seed_messages(crawl, spec.seed_urls, crawl_options)
    reader = record_queue.Reader(crawl.broker, crawl_options.crawl_id) if records else None
    try:
        sent = seeder.send_seeds(
            crawl, parts.stores, parts.lifetimes, messages, crawl_options.crawl_id
        )
    except BaseException:
        if reader is not None:
            reader.close()
        raise
    return WorkersCrawl(crawl_options.crawl_id, sent, reader)


def status(crawl_id: str) -> dict[str, int] | None:
    """A crawl's figures (``crawler status``); None for a crawl the store does not know."""
    _, parts = _parts()
    with parts.stores.reserve() as client:
        return counters.read(client, crawl_id)


#: Seconds :func:`settled` waits at most, and between two readings.
SETTLE_WAIT, SETTLE_POLL = 5.0, 0.05


def settled(crawl_id: str) -> bool:
    """Wait until the crawl's counters say it is finished: a worker sends a message's
    record before it counts the message's ending (so that a worker dying in between
    loses no record: :mod:`crawler.tracking.bookkeeping`), so the last records arrive
    a moment before ``outstanding`` is 0.  False after :data:`SETTLE_WAIT` seconds (a
    store that lost counters, or restarted, may never say so; nor does a crawl that
    another seeding of the same ``crawl_id`` keeps going)."""
    deadline = time.monotonic() + SETTLE_WAIT
    while True:
        try:
            figures = status(crawl_id)
            if figures is None or figures[counters.OUTSTANDING] <= 0:
                return True
        except store_errors():  # the records are all in: a store down now is not theirs
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(SETTLE_POLL)


def _mark(crawl_id: str, mark: Callable[[Any, str, int], None]) -> None:
    _, parts = _parts()
    with parts.stores.reserve() as client:
        mark(client, crawl_id, parts.lifetimes.grace)


__all__ = ["Crawl", "CrawlError", "Keywords", "WorkersCrawl", "seed", "status"]
