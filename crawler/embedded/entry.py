"""Running a crawl, a :class:`~crawler.crawl_spec.CrawlSpec`: seeding it for the workers
and following it (``--wait``), or running it in this process (``--local``), with
``--output``, ``--state`` and ``--dashboard``.  The command line (:mod:`crawler.cli`,
what ``crawler crawl`` and ``python -m crawler.example`` run, from its flags) and the
Python API (:mod:`crawler.api`, from keyword arguments) both make a ``CrawlSpec`` and
call :func:`run`; what the crawler refuses is a :class:`CrawlError`, which the command
line says as a usage error and the API raises."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import dramatiq

from crawler import rendering, worker_parts
from crawler.archiving.warc import cut_partial_records
from crawler.brokers import broker_errors, local
from crawler.crawl_spec import CrawlError as CrawlError
from crawler.crawl_spec import CrawlSpec, SeedUrls
from crawler.embedded import one_process, processes
from crawler.environment import (
    DIRECTORY_ROOTS,
    Lifetimes,
    broker_address,
    dedup_store_name,
    dedup_url,
    uses_redis,
)
from crawler.errors import why
from crawler.frontier import politeness, recrawl
from crawler.frontier.scope import message_of, priority
from crawler.handlers import Handler
from crawler.items.sinks import ItemSink, ItemSinkError, ItemSinks, open_sink
from crawler.options import CrawlOptions
from crawler.records import Record, RecordFile, RecordFiles, RecordSink
from crawler.rendering import Renderer
from crawler.stores import Stores, store_errors
from crawler.stores.memcached import MemcachedError
from crawler.stores.saved import DiskFull, SavedClient, SavedState, StateInUse, no_room
from crawler.tracking import seeder
from crawler.tracking.progress import Progress
from crawler.worker_parts import PartsOf, WorkerParts

if TYPE_CHECKING:
    from crawler.dashboard import Background

# the module's name before embedded/, kept: users filter the log on it
logger = logging.getLogger("crawler.running")


def unreachable() -> tuple[type[BaseException], ...]:
    """What a service that does not answer raises in the seeder: pika lets a failed
    lookup of the broker's host through bare."""
    return (*broker_errors(), *store_errors(), socket.gaierror)


def run(
    spec: CrawlSpec,
    crawl: dramatiq.Actor[Any, Any],
    parts: WorkerParts,
    *,
    handler: Handler | None = None,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
) -> int:
    """Seed the crawl ``spec`` describes for workers (messages of ``crawl``, with the
    process's ``parts``), or run it here (``--local``, with parts of its own: its stores
    in memory, its own browser, and its ``--handler`` beside the process's handlers,
    ``handler`` when given, the API's function; each final record handed to
    ``on_record``, and stopped when ``stop`` is set); the exit status.  With
    ``progress`` (the Python API's, ``--local`` only), the crawl is counted there and
    nothing is printed nor standard output redirected: what the command line would say
    is logged (``crawler.running``), the root logger left as its host configured it.
    Raises :class:`CrawlError` for what the crawler refuses (a ``--warc`` directory it cannot
    write, a handler it cannot load, ``--output`` or ``--state`` it cannot open),
    before anything is sent."""
    try:
        earlier = _earlier_records(spec)  # --recrawl-from, checked whole before anything is sent
        seeds = seed_messages(crawl, spec.seed_urls, spec.options)
        if not spec.local:
            return _seed(spec, crawl, parts, seeds, earlier, progress)
        _make_warc_directory(spec.options.warc)
        renderer = Renderer(parts.renderer.pages, parts.renderer.restart_after)  # its own
        try:
            parts_of = _local_parts(spec, parts, handler, renderer)
            return _run_locally(spec, crawl, parts_of, seeds, on_record, stop, progress, earlier)
        finally:
            renderer.close()  # its browser, if a page started one: none outlives the crawl
    finally:
        if spec.seed_file is not None:
            spec.seed_file.close()  # standard input's copy: deleted


def _seed(
    spec: CrawlSpec,
    crawl: dramatiq.Actor[Any, Any],
    parts: WorkerParts,
    seeds: seeder.Messages,
    earlier: list[tuple[str, recrawl.Earlier]] | None,
    progress: Progress | None,
) -> int:
    """The crawl seeded for workers (and with ``--wait`` followed): its ``--recrawl-from``
    pages kept in their store first."""
    if spec.options.breadth_first and uses_redis():
        print(
            "note: --breadth-first orders messages on RabbitMQ and with --local; Redis keeps"
            " them in arrival order",
            file=sys.stderr,
        )
    stores, lifetimes = parts.stores, parts.lifetimes
    try:
        status = reach_services(lambda: _keep_earlier(stores, spec.options, earlier, lifetimes))
        return status or _seed_for_workers(spec, crawl, stores, lifetimes, seeds)
    except ItemSinkError as e:  # opening it
        return _stopped(f"{e}; the crawl stopped", progress)


def _local_parts(
    spec: CrawlSpec, parts: WorkerParts, handler: Handler | None, renderer: Renderer
) -> PartsOf:
    """A ``--local`` crawl's parts but its stores (made where its broker is: a shard's
    process makes its own): the process's bounds, the process's handlers and the
    crawl's own, its ``renderer``.  A :class:`CrawlError` for a handler that cannot
    be loaded, or ``--render`` where no browser can run."""
    name = spec.options.handler
    try:
        handlers = parts.handlers.with_handler(name, handler)
    except ValueError as e:
        raise CrawlError(f"--handler {name}: {e}") from e
    try:
        handlers = handlers.with_pipelines(spec.options.pipelines)
    except ValueError as e:
        raise CrawlError(f"--pipeline {e}") from e
    if spec.options.render:
        try:
            rendering.check()  # no Chromium or no Playwright: refused before anything is sent
        except rendering.CannotRender as e:
            raise CrawlError(str(e)) from e
    return functools.partial(
        worker_parts.build,
        limits=parts.limits,
        lifetimes=parts.lifetimes,
        handlers=handlers,
        renderer=renderer,
        roots={
            option: None if (named := getattr(spec.options, option)) is None else Path(named)
            for option in DIRECTORY_ROOTS
        },
    )


def _earlier_records(spec: CrawlSpec) -> list[tuple[str, recrawl.Earlier]] | None:
    """``--recrawl-from``: what a recrawl needs of each page of the earlier crawl's
    records (:func:`crawler.frontier.recrawl.read_records`); a :class:`CrawlError`
    naming the line of a file that is not such records."""
    if spec.recrawl_from is None:
        return None
    try:
        return list(recrawl.read_records(spec.recrawl_from, spec.seed_urls, spec.recrawl_warc))
    except recrawl.RecrawlFileError as e:
        raise CrawlError(str(e)) from e


def _keep_earlier(
    stores: Stores,
    crawl_options: CrawlOptions,
    earlier: list[tuple[str, recrawl.Earlier]] | None,
    lifetimes: Lifetimes,
) -> int:
    """Keep ``earlier`` in the crawl's dedup store, for its workers (or ``--local``): 0."""
    if earlier:
        with stores.memcache_pool.reserve() as client:
            recrawl.load(client, str(crawl_options.crawl_id), earlier, lifetimes.grace)
    return 0


def _stopped(why: str, progress: Progress | None) -> int:
    """What stopped the crawl (or never let it start), one line: logged for the API's
    (``progress``), else on standard error; exit status 1."""
    if progress is not None:
        logger.error("crawler: %s", why)
    else:
        print(f"crawler: {why}", file=sys.stderr, flush=True)
    return 1


def open_items(spec: CrawlSpec, saved: SavedState | None = None) -> ItemSinks | None:
    """Where the handler's items go, opened before anything is sent (added to when
    ``saved`` carries a crawl on: its items under its crawl id): the feed (``-o``, each
    item as the handler made it) when the crawl has a handler, and ``--items`` (each
    in its envelope); :class:`ItemSinkError` when one cannot be opened (those opened
    closed again)."""
    addresses = [(spec.output, False)] if spec.output is not None and spec.handled else []
    if spec.items is not None:
        addresses.append((spec.items, True))
    if not addresses:
        return None
    crawl_id = (saved.fact("crawl_id") if saved is not None else None) or spec.options.crawl_id
    assert crawl_id is not None
    sinks: list[ItemSink] = []
    try:
        for address, envelope in addresses:
            sinks.append(open_sink(address, crawl_id, append=saved is not None, envelope=envelope))
    except BaseException:
        for sink in sinks:
            with contextlib.suppress(ItemSinkError):
                sink.close()
        raise
    return ItemSinks(sinks, saved)


def say_if_the_feed_is_empty(
    spec: CrawlSpec, items: ItemSinks | None, status: int, progress: Progress | None
) -> None:
    """A crawl whose handler made no item, ended: one line saying that its feed (``-o``)
    is then empty, and where the handler's ``data`` is (logged for the API's)."""
    if not (spec.handled and spec.output is not None and isinstance(items, ItemSinks)):
        return
    if items.written or items.failed or status not in (0, 1):
        return
    said = (
        f"note: -o {spec.output} holds the handler's items (Handled(items=[...]), or yielded),"
        " and it made none; what it returned for each page (data) is in the records:"
        " --records FILE"
    )
    if progress is not None:
        logger.warning("%s", said)
    else:
        print(said, file=sys.stderr, flush=True)


def _make_warc_directory(warc: str | None) -> None:
    """``--local``'s ``--warc`` directory made if missing, and writable; or a
    :class:`CrawlError`."""
    if warc is None:
        return
    directory = Path(warc)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "permission denied")
    except OSError as e:
        raise CrawlError(f"cannot write WARC files in {warc!r}: {e.strerror or e}") from e


def _said(spec: CrawlSpec) -> TextIO:
    """Where what the command says goes: with records or items on standard output
    (``-o -``, ``--records -``, ``--items -``), stderr."""
    outputs = (spec.output, spec.records, spec.items)
    return sys.stderr if any(str(name) == "-" for name in outputs if name) else sys.stdout


def _seed_for_workers(
    spec: CrawlSpec,
    crawl: dramatiq.Actor[Any, Any],
    stores: Stores,
    lifetimes: Lifetimes,
    seeds: seeder.Messages,
) -> int:
    """Seed the crawl for workers, and with ``--wait`` follow it to its end."""
    crawl_options = spec.options
    output = open_records(spec)
    try:
        items = open_items(spec)
    except BaseException:
        if output is not None:
            output.close()
        raise
    said = _said(spec)
    following = _following(spec)
    with contextlib.redirect_stdout(said), contextlib.ExitStack() as dashboard:
        if spec.dashboard is not None:
            dashboard.callback(show_dashboard(stores, crawl, spec.dashboard, crawl_options).close)
        status = reach_services(
            lambda: seeder.seed(
                crawl,
                stores,
                lifetimes,
                seeds,
                crawl_options,
                wait=spec.wait,
                output=output,
                adding=spec.adding,
                items=items,
                progress=following,
            )
        )
    if spec.wait and not spec.adding:
        say_if_the_feed_is_empty(spec, items, status, None)
    return status if following is None else one_process.write_stats(spec, following, status)


def _following(spec: CrawlSpec) -> Progress | None:
    """``--wait``'s progress (none shown with ``-q``), the log lines through it, or to
    ``--log-file``, at the ``spec``'s level; None without ``--wait``."""
    if not spec.wait:
        return None
    progress = Progress(stream=None if spec.quiet else sys.stderr)
    one_process.log_through(
        progress, spec.log_threshold, threading.Event(), spec.log_file,
        not_html_at_info=spec.not_html_at_info,
    )  # fmt: skip
    return progress


def _run_locally(
    spec: CrawlSpec,
    crawl: dramatiq.Actor[Any, Any],
    parts_of: PartsOf,
    seeds: seeder.Messages,
    on_record: Callable[[Record], None] | None,
    stop: threading.Event | None,
    progress: Progress | None = None,
    earlier: list[tuple[str, recrawl.Earlier]] | None = None,
) -> int:
    """``--local``: the crawl in this process (or in ``--processes``), on the exit
    status; a broker that cannot keep its state, or a disk full, said in one line."""
    try:
        return _crawl_here(spec, crawl, parts_of, seeds, on_record, stop, progress, earlier)
    except DiskFull as e:
        again = (
            "run the same command to carry on" if spec.state is not None else "run the crawl again"
        )
        return _stopped(f"{e}: free some space, then {again}", progress)
    except (ItemSinkError, processes.ProcessLost) as e:  # a process killed, or failed
        return _stopped(f"{e}; the crawl stopped", progress)


def _crawl_here(
    spec: CrawlSpec,
    crawl: dramatiq.Actor[Any, Any],
    parts_of: PartsOf,
    seeds: seeder.Messages,
    on_record: Callable[[Record], None] | None,
    stop: threading.Event | None,
    progress: Progress | None,
    earlier: list[tuple[str, recrawl.Earlier]] | None,
) -> int:
    """The crawl, its ``--state`` kept on disk, by actors of its own on a broker of its
    own (:func:`crawler.brokers.local.serve`: ``crawl`` is not rebound) that crawl with
    its own parts: claims, counters and rate limits in this process, not in Memcached;
    WARC files in the directory the command line named (the one its messages name).
    Raises :class:`DiskFull` when a disk it writes to has no room left; with
    ``progress`` (the API's), nothing printed."""
    crawl_options = spec.options
    saved = None
    if spec.state is not None:
        saved, seeds = open_state(spec, seeds)
    output, items = _open_files(spec, saved)
    quiet = progress is not None  # the API's: sys.stdout is its host's
    warc = None if crawl_options.warc is None else Path(crawl_options.warc)
    with (
        contextlib.nullcontext() if quiet else contextlib.redirect_stdout(_said(spec)),
        contextlib.ExitStack() as dashboard,
    ):
        if spec.crawling_processes > 1:  # one shard of the crawl a process
            status = processes.run(
                crawl, parts_of, seeds, spec, output=output,
                earlier=None if not earlier else (str(crawl_options.crawl_id), earlier),
                on_record=on_record, stop=stop, progress=progress, items=items,
            )  # fmt: skip
            say_if_the_feed_is_empty(spec, items, status, progress)
            return status
        if saved is not None and warc is not None and warc.is_dir():
            cut_partial_records(warc)  # a record the interruption cut short
        here = parts_of(Stores.in_memory(warc, None if saved is None else SavedClient(saved)))
        _keep_earlier(here.stores, crawl_options, earlier, here.lifetimes)
        local_crawl = local.serve(crawl, here, saved).get_actor(crawl.actor_name)
        served = None
        if spec.dashboard is not None:  # reads the crawl's own stores
            served = show_dashboard(
                here.stores, local_crawl, spec.dashboard, crawl_options, quiet=quiet
            )
            dashboard.callback(served.close)
        status = one_process.run(
            local_crawl, here.stores, here.lifetimes, seeds, spec, output=output, saved=saved,
            on_record=on_record, stop=stop, progress=progress, items=items,
            warc_files=None if warc is None else here.stores.warc_files,
        )  # fmt: skip
        if saved is None or len(seeds):  # not a crawl carried on: it began here
            say_if_the_feed_is_empty(spec, items, status, progress)
        if served is not None and status != 130:  # 130: interrupted, the command stops
            _dashboard_stays(served, crawl_options, quiet=quiet)
        return status


def _open_files(
    spec: CrawlSpec, saved: SavedState | None
) -> tuple[RecordSink | None, ItemSinks | None]:
    """The records and items files of a local crawl (:func:`open_records`,
    :func:`open_items`), appended to when it carries on;
    on a failure, what was opened (``saved`` too) closed again."""
    output = None
    try:
        output = open_records(spec, append=saved is not None)
        return output, open_items(spec, saved)
    except BaseException:
        if saved is not None:
            saved.close()
        if output is not None:
            output.close()
        raise


def seed_messages(
    crawl: dramatiq.Actor[Any, Any], urls: Collection[str] | SeedUrls, crawl_options: CrawlOptions
) -> seeder.Seeds:
    """A crawl's first messages: one for each URL, and with ``--sitemaps`` one for each
    of their sites' robots.txt, to read the sitemaps it names.  They are made as they
    are iterated, ``urls`` read again each time (a seed file, :class:`SeedUrls`): never
    all in memory at once; only the robots.txt URLs, one a host, are."""
    kwargs: dict[str, Any] = {"options": crawl_options.to_message()}
    seed_priority = priority(0, crawl_options)
    robots: tuple[str, ...] = ()
    if crawl_options.sitemaps:  # robots.txt's, for the sitemaps' actor (level 1)
        robots = tuple(dict.fromkeys(politeness.robots_url(url) for url in urls))
    sitemap = {**kwargs, "sitemap": 1}

    def made() -> Iterator[dramatiq.Message[Any]]:
        for url in urls:
            yield message_of(crawl, url, kwargs, seed_priority)
        for url in robots:
            yield message_of(crawl, url, sitemap, seed_priority, sitemap=True)

    return seeder.Seeds(len(urls) + len(robots), made)


def reach_services(command: Callable[[], int]) -> int:
    """Run ``command``; a broker or dedup store that does not answer is one line and exit 1."""
    try:
        return command()
    except unreachable() as e:
        import redis

        # A Redis error is the store's when the store is Redis and the broker is not;
        # a bare lookup failure is pika's (redis-py and the Memcached pool wrap theirs).
        store = isinstance(e, MemcachedError) or (
            isinstance(e, redis.RedisError) and dedup_url() is not None and not uses_redis()
        )
        where = dedup_store_name() if store else broker_address()
        print(f"error: cannot reach {where}: {why(e)} ({_service_hint(store)})", file=sys.stderr)
        return 1


def _service_hint(store: bool) -> str:
    """How to reach the service that did not answer, or do without it."""
    if store:
        setting = (
            "set MEMCACHED_SERVERS (or DEDUP_URL for Redis)"
            if dedup_url() is None
            else ("set DEDUP_URL")
        )
        return f"start it or {setting}; a crawl in this process needs no service: --local"
    setting = "REDIS_URL" if uses_redis() else "RABBITMQ_URL (REDIS=1: Redis)"
    return f"start it or set {setting}; a crawl in this process needs no service: --local"


def show_dashboard(
    stores: Stores,
    crawl: dramatiq.Actor[Any, Any],
    port: int,
    crawl_options: CrawlOptions,
    *,
    quiet: bool = False,
) -> Background:
    """``--dashboard PORT``: the crawl's live page served from a thread (its ``close``
    stops it).  Its address printed, or logged when ``quiet`` (the API's)."""
    from crawler.dashboard import Background
    from crawler.dashboard.reading import Reader

    served = Background(Reader(stores, crawl), port)
    if not served.wait_started():
        if quiet:
            logger.warning("the dashboard could not listen on 127.0.0.1:%d", port)
        else:
            print(f"note: the dashboard could not listen on 127.0.0.1:{port}", file=sys.stderr)
    elif quiet:
        logger.info("dashboard: %s/crawl/%s", served.address, crawl_options.crawl_id)
    else:
        print(f"dashboard: {served.address}/crawl/{crawl_options.crawl_id}", flush=True)
    return served


def _dashboard_stays(served: Background, crawl_options: CrawlOptions, *, quiet: bool) -> None:
    """``--local --dashboard``, the crawl ended (not interrupted): the command line's page
    stays served, and says so, until Ctrl-C or SIGTERM; the API's (``quiet``) stops with
    the crawl, as its caller goes on (so does a crawl run off the main thread)."""
    from crawler.dashboard import until_stopped

    assert crawl_options.crawl_id is not None
    stays = not quiet and served.serving and threading.current_thread() is threading.main_thread()
    served.reader.ended(crawl_options.crawl_id, stays=stays)
    if not stays:
        return
    until_stopped(
        lambda: print(
            f"dashboard still at {served.address}/ — Ctrl-C to stop", file=sys.stderr, flush=True
        )
    )


def open_state(spec: CrawlSpec, seeds: seeder.Messages) -> tuple[SavedState, seeder.Messages]:
    """``--state DIR``: its state file, and the seeds to send (none when carrying on),
    or a usage error."""
    assert spec.state is not None
    options = dict(spec.options.to_message() or {})
    options.pop("crawl_id", None)
    the_command: dict[str, Any] = {"urls": list(spec.seeds), "options": options}
    if spec.seed_file is not None:  # its name and size: not its every URL
        the_command["input_file"] = [spec.seed_file.name, spec.seed_file.count]
    try:
        saved = SavedState(spec.state)
    except StateInUse as e:
        raise CrawlError(str(e)) from e
    except (OSError, sqlite3.Error) as e:
        raise CrawlError(f"cannot keep --state in {str(spec.state)!r}: {e}") from e
    try:
        return saved, one_process.seeds_to_send(saved, seeds, the_command)
    except one_process.AnotherCrawl as e:
        saved.close()
        raise CrawlError(str(e)) from e
    except BaseException:  # no room to save the command, say
        saved.close()
        raise


def open_records(spec: CrawlSpec, *, append: bool = False) -> RecordSink | None:
    """Where the crawl's records go, opened before anything is enqueued (added to with
    ``append``): ``--records``, and ``-o`` when the crawl has no handler (its records
    are its feed); a usage error when one cannot be opened."""
    paths = [("--output", Path(spec.output))] if spec.output and not spec.handled else []
    if spec.records is not None:
        paths.append(("--records", spec.records))
    files: list[RecordFile] = []
    try:
        for flag, path in paths:
            files.append(open_output(path, append=append, flag=flag))
    except BaseException:
        for file in files:
            file.close()
        raise
    if not files:
        return None
    return files[0] if len(files) == 1 else RecordFiles(files)


def open_output(path: Path, *, append: bool = False, flag: str = "--output") -> RecordFile:
    """A records file (``flag``'s), opened before anything is enqueued (added to with
    ``append``), or a usage error."""
    try:
        return RecordFile(path, append=append)
    except OSError as e:
        if no_room(e):
            raise DiskFull(path) from e
        raise CrawlError(f"cannot write {flag} {str(path)!r}: {e.strerror or e}") from e
