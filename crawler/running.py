"""Running a crawl from parsed arguments: seeding it for the workers and following it
(``--wait``), or running it in this process (``--local``), with ``--output``,
``--state`` and ``--dashboard``.  The command line (:mod:`crawler.cli`, what
``crawler crawl`` and ``python -m crawler.example`` run) and the Python API
(:mod:`crawler.api`) both parse with :mod:`crawler.command_line` and call :func:`run`;
what the crawler refuses is a :class:`CrawlError`, which the command line says as a
usage error and the API raises."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TextIO

import dramatiq
import redis

from crawler import command_line, local_mode
from crawler.archiving.warc import cut_partial_records
from crawler.brokers import BROKER_ERRORS
from crawler.environment import Lifetimes, broker_address, dedup_store_name, dedup_url, uses_redis
from crawler.frontier import politeness
from crawler.frontier.scope import priority
from crawler.handlers import Handlers
from crawler.options import CrawlOptions
from crawler.records import Record, RecordFile
from crawler.stores import STORE_ERRORS, Stores
from crawler.stores.memcached import MemcachedError
from crawler.stores.saved import DiskFull, SavedClient, SavedState, StateInUse, no_room
from crawler.tracking import seeder


class CrawlError(ValueError):
    """Options, URLs or a handler the crawler refuses, in the command's words."""


class _Parser(command_line.Parser):
    def error(self, message: str) -> NoReturn:
        raise CrawlError(message)


def parser_of_crawls() -> argparse.ArgumentParser:
    """``crawler crawl``'s parser, whose errors are :class:`CrawlError`."""
    parser = _Parser(prog="crawler")
    command_line.add_seeding(parser, upstream=False)
    return parser


#: What a service that does not answer raises in the seeder: pika lets a failed lookup
#: of the broker's host through bare.
UNREACHABLE: tuple[type[BaseException], ...] = (*BROKER_ERRORS, *STORE_ERRORS, socket.gaierror)


def run(
    arguments: argparse.Namespace,
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    handlers: Handlers,
    *,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Seed the crawl ``arguments`` (as :func:`crawler.command_line.add_seeding`
    parses them) describe for workers, or run it here (``--local``, with its
    ``--handler`` loaded into ``handlers``; each final record handed to ``on_record``,
    and stopped when ``stop`` is set); the exit status.  Raises :class:`CrawlError`
    for arguments the crawler refuses, before anything is sent."""
    _check_arguments(arguments)
    try:
        crawl_options = command_line.from_arguments(
            arguments,
            arguments.urls,
            local=arguments.local,
            collect_records=arguments.wait,
            records_without_links=arguments.wait and arguments.output is None,
        )
    except argparse.ArgumentTypeError as e:
        raise CrawlError(str(e)) from e
    seeds = seed_messages(crawl, arguments.urls, crawl_options)
    if crawl_options.breadth_first and uses_redis() and not arguments.local:
        print(
            "note: --breadth-first orders messages on RabbitMQ and with --local; Redis keeps"
            " them in arrival order",
            file=sys.stderr,
        )
    if not arguments.local:
        return _seed_for_workers(arguments, crawl, stores, lifetimes, seeds, crawl_options)
    if arguments.handler is not None and arguments.handler not in handlers.names:
        try:
            handlers.load(arguments.handler)
        except ValueError as e:
            raise CrawlError(f"--handler {arguments.handler}: {e}") from e
    try:
        return _run_locally(
            arguments, crawl, stores, lifetimes, seeds, crawl_options, on_record, stop
        )
    except DiskFull as e:
        again = (
            "run the same command to carry on"
            if arguments.state is not None
            else "run the crawl again"
        )
        print(f"crawler: {e}: free some space, then {again}", file=sys.stderr, flush=True)
        return 1


def _check_arguments(arguments: argparse.Namespace) -> None:
    """Raise :class:`CrawlError` for no URL, or for options that do not go together."""
    if not arguments.urls:
        raise CrawlError("give at least one URL to crawl")
    for first, second in CONTRADICTIONS:
        if getattr(arguments, first) and getattr(arguments, second):
            raise CrawlError(
                f"--{first.replace('_', '-')} and --{second.replace('_', '-')}: choose one"
            )
    if arguments.threads is not None and not arguments.local:
        raise CrawlError("--threads works with --local only")
    if arguments.state is not None and not arguments.local:
        raise CrawlError("--state works with --local only")
    if arguments.output is not None and not (arguments.wait or arguments.local):
        raise CrawlError("--output works with --local or --wait")
    if arguments.dashboard is not None and not (arguments.wait or arguments.local):
        raise CrawlError("--dashboard works with --local or --wait")


def _said(arguments: argparse.Namespace) -> TextIO:
    """Where what the command says goes: with records on standard output (-o -), stderr."""
    return (
        sys.stderr if arguments.output is not None and str(arguments.output) == "-" else sys.stdout
    )


def _seed_for_workers(
    arguments: argparse.Namespace,
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    seeds: list[dramatiq.Message[Any]],
    crawl_options: CrawlOptions,
) -> int:
    """Seed the crawl for workers, and with ``--wait`` follow it to its end."""
    output = open_output(arguments.output)
    said = _said(arguments)
    with contextlib.redirect_stdout(said), contextlib.ExitStack() as dashboard:
        if arguments.dashboard is not None:
            dashboard.callback(show_dashboard(stores, crawl, arguments.dashboard, crawl_options))
        return reach_services(
            lambda: seeder.seed(
                crawl,
                stores,
                lifetimes,
                seeds,
                crawl_options,
                wait=arguments.wait,
                output=output,
                adding=arguments.crawl_id is not None,
            )
        )


def _run_locally(
    arguments: argparse.Namespace,
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    seeds: list[dramatiq.Message[Any]],
    crawl_options: CrawlOptions,
    on_record: Callable[[Record], None] | None,
    stop: threading.Event | None,
) -> int:
    """``--local``: the crawl in this process, its ``--state`` kept on disk.  Raises
    :class:`DiskFull` when a disk it writes to has no room left."""
    saved = None
    if arguments.state is not None:
        saved, seeds = open_state(arguments, seeds, crawl_options)
    try:
        output = open_output(arguments.output, append=saved is not None)
    except BaseException:
        if saved is not None:
            saved.close()
        raise
    said = _said(arguments)
    with contextlib.redirect_stdout(said), contextlib.ExitStack() as dashboard:
        # --local: claims, counters and rate limits in this process, not in Memcached;
        # WARC files in the directory the command line named (the one its messages name).
        warc = None if crawl_options.warc is None else Path(crawl_options.warc)
        if saved is not None and warc is not None and warc.is_dir():
            cut_partial_records(warc)  # a record the interruption cut short
        stores.keep_in_memory(warc, None if saved is None else SavedClient(saved))
        if arguments.dashboard is not None:  # reads the stores just chosen
            dashboard.callback(show_dashboard(stores, crawl, arguments.dashboard, crawl_options))
        return local_mode.run(
            crawl,
            stores,
            lifetimes,
            seeds,
            threads=arguments.threads or 8,
            output=output,
            verbose=arguments.verbose,
            saved=saved,
            on_record=on_record,
            stop=stop,
            warc_files=None if warc is None else stores.warc_files,
        )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


#: Options that make no sense together: refused, naming both.
CONTRADICTIONS = (("local", "wait"), ("local", "crawl_id"))


def seed_messages(
    crawl: dramatiq.Actor[Any, Any], urls: list[str], crawl_options: CrawlOptions
) -> list[dramatiq.Message[Any]]:
    """A crawl's first messages: one for each URL, and with ``--sitemaps`` one for each
    of their sites' robots.txt, to read the sitemaps it names."""
    kwargs: dict[str, Any] = {"options": crawl_options.to_message()}
    seed_priority = priority(0, crawl_options)
    extra = {} if seed_priority is None else {"broker_priority": seed_priority}
    messages = [crawl.message_with_options(args=(url,), kwargs=kwargs, **extra) for url in urls]
    if crawl_options.sitemaps:
        robots = dict.fromkeys(politeness.robots_url(url) for url in urls)
        messages += [
            crawl.message_with_options(args=(url,), kwargs={**kwargs, "sitemap": 1}, **extra)
            for url in robots
        ]
    return messages


def reach_services(command: Callable[[], int]) -> int:
    """Run ``command``; a broker or dedup store that does not answer is one line and exit 1."""
    try:
        return command()
    except UNREACHABLE as e:
        # A Redis error is the store's when the store is Redis and the broker is not;
        # a bare lookup failure is pika's (redis-py and the Memcached pool wrap theirs).
        store = isinstance(e, MemcachedError) or (
            isinstance(e, redis.RedisError) and dedup_url() is not None and not uses_redis()
        )
        where = dedup_store_name() if store else broker_address()
        print(f"error: cannot reach {where}: {e}", file=sys.stderr)
        return 1


def show_dashboard(
    stores: Stores, crawl: dramatiq.Actor[Any, Any], port: int, crawl_options: CrawlOptions
) -> Callable[[], None]:
    """``--dashboard PORT``: the crawl's live page served from a thread; what stops it."""
    from crawler.dashboard import Background
    from crawler.dashboard.reading import Reader

    served = Background(Reader(stores, crawl), port)
    if not served.wait_started():
        print(f"note: the dashboard could not listen on 127.0.0.1:{port}", file=sys.stderr)
    else:
        print(f"dashboard: {served.address}/crawl/{crawl_options.crawl_id}", flush=True)
    return served.close


def open_state(
    arguments: argparse.Namespace,
    seeds: list[dramatiq.Message[Any]],
    crawl_options: CrawlOptions,
) -> tuple[SavedState, list[dramatiq.Message[Any]]]:
    """``--state DIR``: its state file, and the seeds to send (none when carrying on),
    or a usage error."""
    options = dict(crawl_options.to_message() or {})
    options.pop("crawl_id", None)
    the_command = {"urls": arguments.urls, "options": options}
    try:
        saved = SavedState(arguments.state)
    except StateInUse as e:
        raise CrawlError(str(e)) from e
    except (OSError, sqlite3.Error) as e:
        raise CrawlError(f"cannot keep --state in {str(arguments.state)!r}: {e}") from e
    try:
        return saved, local_mode.seeds_to_send(saved, seeds, the_command)
    except local_mode.AnotherCrawl as e:
        saved.close()
        raise CrawlError(str(e)) from e
    except BaseException:  # no room to save the command, say
        saved.close()
        raise


def open_output(path: Path | None, *, append: bool = False) -> RecordFile | None:
    """The ``--output`` file, opened before anything is enqueued (added to with
    ``append``), or a usage error."""
    if path is None:
        return None
    try:
        return RecordFile(path, append=append)
    except OSError as e:
        if no_room(e):
            raise DiskFull(path) from e
        raise CrawlError(f"cannot write --output {str(path)!r}: {e.strerror or e}") from e
