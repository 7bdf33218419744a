"""The seeder's command line: ``python -m crawler.example URL [options]`` seeds a crawl
for the workers (or crawls right here with ``--local``), and follows, cancels or
replays crawls (``--wait``, ``--status``, ``--cancel``, ``--dead-letters``,
``--replay``).  The crawl options themselves are :mod:`.arguments`'."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import dramatiq
import redis

from crawler import local_mode
from crawler.archiving.warc import cut_partial_records
from crawler.brokers import BROKER_ERRORS
from crawler.cli import arguments as crawl_arguments
from crawler.environment import Lifetimes, broker_address, dedup_store_name, dedup_url, uses_redis
from crawler.frontier import politeness
from crawler.frontier.scope import priority
from crawler.handlers import Handlers
from crawler.options import CrawlOptions
from crawler.records import Record, RecordFile
from crawler.stores import STORE_ERRORS, Stores
from crawler.stores.memcached import MemcachedError
from crawler.stores.saved import SavedClient, SavedState
from crawler.tracking import seeder

#: What a service that does not answer raises in the seeder: pika lets a failed lookup
#: of the broker's host through bare.
UNREACHABLE: tuple[type[BaseException], ...] = (*BROKER_ERRORS, *STORE_ERRORS, socket.gaierror)


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``--max-d`` is no ``--max-depth``), whose usage
    errors are one line and a pointer to ``--help``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nSee '{self.prog} --help'.\n")


def parser() -> argparse.ArgumentParser:
    """The seeder's arguments, upstream's defaults: ``python -m crawler.example``."""
    parser = Parser(
        prog="python -m crawler.example",
        description="Seed a crawl: enqueue URLs for the workers, or crawl them right here.",
    )
    add_seeding(parser, upstream=True)
    watching = parser.add_argument_group("following a crawl of workers")
    watching.add_argument("--status", metavar="CRAWL_ID", help="print a crawl's figures")
    watching.add_argument(
        "--cancel",
        metavar="CRAWL_ID",
        help="end the crawl: its queued and retrying URLs end as cancelled, without a fetch",
    )
    watching.add_argument(
        "--pause",
        metavar="CRAWL_ID",
        help="pause the crawl: its URLs wait in the broker, unfetched, until --resume",
    )
    watching.add_argument("--resume", metavar="CRAWL_ID", help="carry on with a paused crawl")
    watching.add_argument(
        "--dead-letters",
        metavar="CRAWL_ID",
        help="list the URLs of the crawl given up for good ('all': of every crawl)",
    )
    watching.add_argument(
        "--replay",
        metavar="CRAWL_ID",
        help="send the crawl's dead-lettered URLs again, with fresh retries ('all': every crawl)",
    )
    return parser


def add_seeding(parser: argparse.ArgumentParser, *, upstream: bool) -> None:
    """The URLs, the crawl options, and how the crawl runs: workers or ``--local``."""
    parser.add_argument(
        "urls", metavar="url", nargs="*", type=crawl_arguments.http_url, help="an http(s) URL"
    )
    crawl_arguments.add_arguments(parser, upstream=upstream)
    running = parser.add_argument_group("how the crawl runs")
    running.add_argument(
        "--wait", action="store_true", help="workers' crawl: show its progress until it ends"
    )
    running.add_argument(
        "--crawl-id",
        type=crawl_arguments.crawl_id,
        metavar="CRAWL_ID",
        help="add the URLs to this crawl (its claims, counters and budget), not a new one",
    )
    running.add_argument(
        "--local", action="store_true", help="crawl in this process until nothing is left"
    )
    running.add_argument(
        "--threads", type=crawl_arguments.threads, help="--local's fetching threads (default 8)"
    )
    running.add_argument(
        "--state",
        type=Path,
        metavar="DIR",
        help="with --local: keep the crawl on disk in DIR; after an interruption, the same"
        " command carries on where it stopped",
    )
    running.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="with --local or --wait: a record per URL, JSON lines (CSV for FILE.csv; - for"
        " standard output)",
    )
    running.add_argument(
        "--dashboard",
        type=crawl_arguments.port,
        metavar="PORT",
        help="with --wait or --local: serve the crawl's live page on 127.0.0.1:PORT meanwhile",
    )
    running.add_argument("-v", "--verbose", action="store_true", help="log every page")


def main(
    args: list[str],
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    handlers: Handlers,
) -> int:
    """Run the command ``args`` ask for with the ``crawl`` actor, the process's ``stores``
    and ``handlers`` and the crawl entries' ``lifetimes``: the exit status."""
    command = parser()
    arguments = command.parse_args(args)
    for action in ACTIONS:
        crawl_id = getattr(arguments, action.replace("-", "_"))
        if crawl_id:
            return about_crawl(action, crawl_id, crawl, stores, lifetimes)
    return seed(command, arguments, crawl, stores, lifetimes, handlers)


#: What can be done to a crawl of workers, given its id: ``--status ID`` and the like
#: here, ``crawler status ID`` and the like in :mod:`crawler.command`.
ACTIONS = ("status", "cancel", "pause", "resume", "replay", "dead-letters")


def about_crawl(
    action: str,
    crawl_id: str,
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
) -> int:
    """Do one of ``ACTIONS`` to the crawl ``crawl_id`` (``all``: every crawl's dead
    letters); a service that does not answer is one line and exit 1."""
    if action == "status":
        return reach_services(lambda: seeder.status(stores, crawl_id))
    if action == "cancel":
        return reach_services(lambda: seeder.cancel(stores, crawl_id, lifetimes))
    if action in ("pause", "resume"):
        paused = action == "pause"
        return reach_services(lambda: seeder.pause(stores, crawl_id, lifetimes, paused=paused))
    return reach_services(
        lambda: seeder.dead_letters(
            crawl.broker,
            crawl.queue_name,
            stores,
            lifetimes,
            crawl_id,
            replay=action == "replay",
        )
    )


def seed(
    command: argparse.ArgumentParser,
    arguments: argparse.Namespace,
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    handlers: Handlers,
    *,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Seed the crawl ``arguments`` describe for workers, or run it here (``--local``,
    with its ``--handler`` loaded into ``handlers``; each final record handed to
    ``on_record``, and stopped when ``stop`` is set: :class:`crawler.api.Crawl`'s)."""
    if not arguments.urls:
        command.error("give at least one URL to crawl")
    for first, second in CONTRADICTIONS:
        if getattr(arguments, first) and getattr(arguments, second):
            command.error(
                f"--{first.replace('_', '-')} and --{second.replace('_', '-')}: choose one"
            )
    if arguments.threads is not None and not arguments.local:
        command.error("--threads works with --local only")
    if arguments.state is not None and not arguments.local:
        command.error("--state works with --local only")
    if arguments.output is not None and not (arguments.wait or arguments.local):
        command.error("--output works with --local or --wait")
    if arguments.dashboard is not None and not (arguments.wait or arguments.local):
        command.error("--dashboard works with --local or --wait")
    try:
        crawl_options = crawl_arguments.from_arguments(
            arguments,
            arguments.urls,
            local=arguments.local,
            collect_records=arguments.wait,
            records_without_links=arguments.wait and arguments.output is None,
        )
    except argparse.ArgumentTypeError as e:
        command.error(str(e))
    seeds = seed_messages(crawl, arguments.urls, crawl_options)
    if crawl_options.breadth_first and uses_redis() and not arguments.local:
        print(
            "note: --breadth-first orders messages on RabbitMQ and with --local; Redis keeps"
            " them in arrival order",
            file=sys.stderr,
        )
    if (
        arguments.local
        and arguments.handler is not None
        and arguments.handler not in handlers.names
    ):
        try:
            handlers.load(arguments.handler)
        except ValueError as e:
            command.error(f"--handler {arguments.handler}: {e}")
    saved = None
    if arguments.local and arguments.state is not None:
        saved, seeds = open_state(command, arguments, seeds, crawl_options)
    output = open_output(command, arguments.output, append=saved is not None)
    # With records on standard output (-o -), what the command says goes to stderr.
    said = (
        sys.stderr if arguments.output is not None and str(arguments.output) == "-" else sys.stdout
    )
    with contextlib.redirect_stdout(said), contextlib.ExitStack() as dashboard:
        if arguments.local:
            # --local: claims, counters and rate limits in this process, not in Memcached;
            # WARC files in the directory the command line named (the one its messages name).
            warc = None if crawl_options.warc is None else Path(crawl_options.warc)
            if saved is not None and warc is not None and warc.is_dir():
                cut_partial_records(warc)  # a record the interruption cut short
            stores.keep_in_memory(warc, None if saved is None else SavedClient(saved))
            if arguments.dashboard is not None:  # reads the stores just chosen
                dashboard.callback(
                    show_dashboard(stores, crawl, arguments.dashboard, crawl_options)
                )
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
            )
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
    command: argparse.ArgumentParser,
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
    except (OSError, sqlite3.Error) as e:
        command.error(f"cannot keep --state in {str(arguments.state)!r}: {e}")
    try:
        return saved, local_mode.seeds_to_send(saved, seeds, the_command)
    except local_mode.AnotherCrawl as e:
        saved.close()
        command.error(str(e))


def open_output(
    command: argparse.ArgumentParser, path: Path | None, *, append: bool = False
) -> RecordFile | None:
    """The ``--output`` file, opened before anything is enqueued (added to with
    ``append``), or a usage error."""
    if path is None:
        return None
    try:
        return RecordFile(path, append=append)
    except OSError as e:
        command.error(f"cannot write --output {str(path)!r}: {e.strerror or e}")
