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
"""

from __future__ import annotations

import argparse
import itertools
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dramatiq

from crawler import command_line
from crawler.frontier import counters
from crawler.frontier.keep_alive import KeepAlive
from crawler.handlers import Handler
from crawler.records import Record
from crawler.running import CrawlError, parser_of_crawls, run, seed_messages
from crawler.tracking import figures, record_queue, seeder
from crawler.tracking.ledger import Ledger


def _example() -> Any:
    """``crawler.example``: its actor, stores, lifetimes and handlers, imported when a
    crawl is first run (importing it makes the broker; ``import crawler`` does not)."""
    from crawler import example

    return example


#: Options the command line treats specially: they print and exit, which no crawl of
#: code's may do to its process.
SPECIAL_OPTIONS = ("help", "version")


def _command_line(urls: Sequence[str], options: Mapping[str, Any]) -> list[str]:
    """``urls`` and ``options`` as ``crawler crawl``'s arguments: the options, then the
    URLs after ``--``, values joined to their flags: neither a URL nor a value
    such as ``-h`` is taken for an option."""
    if isinstance(urls, str):
        raise CrawlError("urls must be a list of URLs, not one string")
    line: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if name in SPECIAL_OPTIONS:
            raise CrawlError(f"{name}: {flag} is the command line's; a Crawl has no use for it")
        if value is None:
            continue
        if value is True:
            line.append(flag)
        elif value is False:
            line.append("--no-" + name.replace("_", "-"))
        elif isinstance(value, (list, tuple)):
            line += [f"{flag}={item}" for item in value]
        else:
            line.append(f"{flag}={value}")
    return [*line, "--", *urls]


def _parsed(line: list[str]) -> argparse.Namespace:
    """``line`` parsed as ``crawler crawl`` parses it; what the parser refuses, or would
    exit the process for, is a :class:`CrawlError` in its words."""
    try:
        return parser_of_crawls().parse_args(line)
    except SystemExit as e:  # argparse exits for what it treats specially
        raise CrawlError(f"the options would exit the process (status {e.code})") from None


_handler_names = itertools.count(1)


def _handler_option(handlers: Any, handler: str | Handler | None) -> str | None:
    """A handler given as a function is loaded under a name of its own."""
    if handler is None or isinstance(handler, str):
        return handler
    name = f"crawler.api:handler{next(_handler_names)}"
    handlers.add(name, handler)
    return name


#: Held while a :class:`Crawl` runs: ``--local`` takes the process's broker and stores
#: for its crawl, so a second one at the same time would mix their records.
_running = threading.Lock()

RUNNING = (
    "another Crawl is running in this process: run them one after another,"
    " or seed() crawls for workers"
)


class Crawl:
    """A crawl in this process (``crawler crawl --local``), run from code.

    Iterating it runs the crawl in a thread and yields each URL's record as it ends;
    :meth:`run` runs it to the end; :meth:`stop` stops it (as Ctrl-C does).  One crawl
    runs in a process at a time: starting one (the first record asked for) while
    another runs raises :class:`CrawlError`, as :func:`seed` does then.  Options the
    command line treats specially (``help``, ``version``) raise :class:`CrawlError`.

    Parameters:
      urls(Sequence): The seeds.
      threads(int): Fetching threads (8).
      handler(str|Callable): A page handler, ``package.module:function`` or the
        function itself: what it returns is each page's record's ``data``.
      state(Path): Keep the crawl on disk there (``--state``): the same crawl made
        again carries on after an interruption.
      output(Path): Write the records there too (``--output``).
      options: Any other option of ``crawler crawl`` (see the module's text).
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        threads: int = 8,
        handler: str | Handler | None = None,
        state: str | Path | None = None,
        output: str | Path | None = None,
        **options: Any,
    ) -> None:
        example = self._example = _example()
        handler_name = _handler_option(example.handlers, handler)
        extra = {"threads": threads, "state": state, "output": output, "handler": handler_name}
        self._arguments = _parsed(_command_line(urls, {**options, **extra, "local": True}))
        self._records: queue.Queue[Record | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.exit_status: int | None = None
        self.error: BaseException | None = None

    def _run(self) -> None:
        broker = self._example.crawl.broker
        try:
            self.exit_status = run(
                self._arguments,
                self._example.crawl,
                self._example.stores,
                self._example.lifetimes,
                self._example.handlers,
                on_record=self._records.put,
                stop=self._stop,
            )
        except BaseException as e:  # handed to the caller's thread by __iter__
            self.error = e
        finally:
            # The process's broker and stores as they were: --local's are this crawl's.
            self._example.crawl.broker = broker
            dramatiq.set_broker(broker)
            self._example.stores.leave_memory()
            _running.release()  # before the last record: the next Crawl may start
            self._records.put(None)

    def __iter__(self) -> Iterator[Record]:
        if self._thread is not None:
            raise RuntimeError("a Crawl runs once")
        if not _running.acquire(blocking=False):
            raise CrawlError(RUNNING)
        self._thread = threading.Thread(target=self._run, name="crawl", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            _running.release()
            raise
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
        ``records=True``); broker outages are waited out."""
        example = _example()
        if self._reader is None:
            raise CrawlError("seed the crawl with records=True to read its records")
        ledger = Ledger()
        ledger.expect(self._seeds)
        keep_alive = KeepAlive(example.lifetimes.grace)
        try:
            for arrived in seeder.arrivals(self._reader, ledger):
                if not isinstance(arrived, str):
                    yield arrived
                elif arrived == seeder.POLLED:
                    with example.stores.reserve() as client:
                        keep_alive(client, self.crawl_id)
        finally:
            ledger.close()

    def close(self) -> None:
        """Stop reading records: workers stop sending them."""
        if self._reader is not None:
            self._reader.close()

    def cancel(self) -> None:
        _mark(self.crawl_id, counters.cancel)

    def pause(self) -> None:
        _mark(self.crawl_id, counters.pause)

    def resume(self) -> None:
        example = _example()
        with example.stores.reserve() as client:
            counters.resume(client, self.crawl_id)


def seed(
    urls: Sequence[str],
    *,
    records: bool = False,
    handler: str | None = None,
    **options: Any,
) -> WorkersCrawl:
    """Seed a crawl of ``urls`` for the workers (``crawler crawl``, without ``--wait``).

    Parameters:
      records(bool): Workers send each URL's record back, for :meth:`WorkersCrawl.records`.
      handler(str): The page handler its pages go through, one the workers loaded.
      options: Any option of ``crawler crawl`` (see the module's text).
    """
    example = _example()
    arguments = _parsed(_command_line(urls, {**options, "handler": handler}))
    if _running.locked():  # the process's broker is the local crawl's
        raise CrawlError(RUNNING)
    try:
        crawl_options = command_line.from_arguments(
            arguments, arguments.urls, collect_records=records
        )
    except argparse.ArgumentTypeError as e:
        raise CrawlError(str(e)) from e
    assert crawl_options.crawl_id is not None
    messages = seed_messages(example.crawl, arguments.urls, crawl_options)
    reader = record_queue.Reader(example.crawl.broker, crawl_options.crawl_id) if records else None
    with example.stores.reserve() as client:
        counters.start(client, crawl_options.crawl_id, len(messages), example.lifetimes.grace)
        counters.note_evictions_at_start(client, crawl_options.crawl_id, example.lifetimes.grace)
        about = seeder.about(messages, "workers")
        figures.describe(client, crawl_options.crawl_id, about, example.lifetimes.grace)
    sent = [example.crawl.broker.enqueue(message).message_id for message in messages]
    return WorkersCrawl(crawl_options.crawl_id, sent, reader)


def status(crawl_id: str) -> dict[str, int] | None:
    """A crawl's figures (``crawler status``); None for a crawl the store does not know."""
    example = _example()
    with example.stores.reserve() as client:
        return counters.read(client, crawl_id)


def _mark(crawl_id: str, mark: Callable[[Any, str, int], None]) -> None:
    example = _example()
    with example.stores.reserve() as client:
        mark(client, crawl_id, example.lifetimes.grace)


__all__ = ["Crawl", "CrawlError", "WorkersCrawl", "seed", "status"]
