"""``crawler``: one command for everything, in the conventions of Celery, RQ and Scrapy.

::

    crawler crawl URL... [--workers [--wait]] [-o FILE] [options] crawl here, or by the workers
    crawler worker [-p N] [-t N] [--handler MODULE:FUNCTION]...
                   [--pipeline MODULE:FUNCTION]... [--render]     Dramatiq workers for it
    crawler parse URL --handler MODULE:ROUTER [--label L] [--data JSON]
                  [--pipeline MODULE:FUNCTION]... [--cache DIR] [--json]
                                                                  one page through a handler
    crawler status [--json] | cancel | pause | resume | dead-letters | replay CRAWL_ID
    crawler dashboard [--port PORT] [--host ADDRESS]              a live page of every crawl
    crawler --version

``crawler crawl`` crawls as a first-time user expects: it parses pages for links (relative
ones too), stays on the seeds' sites and obeys robots.txt; ``--upstream`` (or
``python -m crawler.example``) crawls as upstream's example does.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from crawler import cli, environment, handlers
from crawler.cli import settings
from crawler.cli.crawl_flags import flag_type
from crawler.cli.parse import add_parse, parse
from crawler.cli.parser import Parser, add_seeding
from crawler.option_rules import BadValue

#: ``crawler worker``'s defaults: Dramatiq's own (a process a core, 8 threads each).
WORKER_THREADS = 8


def parser() -> Parser:
    """The `crawler` command: its subcommands and their flags."""
    command = Parser(
        prog="crawler",
        description="A distributed web crawler on Dramatiq (RabbitMQ, or Redis with REDIS=1).",
    )
    command.add_argument("--version", action="version", version=f"crawler {_version()}")
    command.add_commands(dest="command", metavar="COMMAND", required=True)
    crawl = command.subcommand(
        "crawl",
        help="crawl here, in this process (--workers: hand the crawl to the workers)",
        description="Crawl in this process until nothing is left, as wget -r and scrapy"
        " crawl do; with --workers, hand the crawl to the workers ('crawler worker') instead"
        " (see its progress with --wait).",
    )
    add_seeding(crawl, upstream=False)
    settings.add_settings(crawl)
    crawl.set_defaults(usage=crawl)  # its usage errors name "crawler crawl"
    _add_worker(command)
    add_parse(command)
    dashboard = command.subcommand(
        "dashboard",
        help="serve a live page of every crawl (read-only), on 127.0.0.1 by default",
        description="Serve a live page of every crawl, read-only: recent crawls, and for"
        " each its figures, rates, outcomes, hosts, failures and queue.",
    )
    dashboard.add_argument(
        "--port", type=_bounded(1, 65535), default=8500, help="its port (default 8500)"
    )
    dashboard.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only)",
    )
    for name, text in cli.ACTIONS.items():
        description = text[0].upper() + text[1:] + "."
        one = command.subcommand(name, help=text, description=description)
        one.add_argument("crawl_id", metavar="CRAWL_ID")
        if name == "status":
            one.add_argument(
                "--json",
                action="store_true",
                help="the crawl's statistics as one JSON document (as --stats writes them)",
            )
    return command


def _add_worker(command: Parser) -> None:
    """``crawler worker``: Dramatiq's worker command, with its processes, threads and
    page handlers."""
    worker = command.subcommand(
        "worker",
        help="run Dramatiq workers for crawls (dramatiq crawler.example)",
        description="Run Dramatiq worker processes for crawls: dramatiq crawler.example.",
    )
    worker.set_defaults(usage=worker)
    worker.add_argument(
        "-p",
        "--processes",
        type=_bounded(1, 256),
        default=os.cpu_count() or 1,
        help="worker processes (default: one a CPU core)",
    )
    worker.add_argument(
        "-t",
        "--threads",
        type=_bounded(1, 512),
        default=WORKER_THREADS,
        help=f"threads in each process (default {WORKER_THREADS})",
    )
    worker.add_argument(
        "--handler",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="load this page handler, for the crawls that choose it (repeatable;"
        " CRAWLER_HANDLERS too)",
    )
    worker.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="load this item pipeline, for the crawls that name it (repeatable; loaded as"
        " handlers are, into CRAWLER_HANDLERS)",
    )
    worker.add_argument(
        "--render",
        action="store_true",
        help="refuse to start unless this machine can render pages for --render crawls"
        " (Chromium, and Playwright: pip install 'crawler[render]')",
    )


def main(args: list[str] | None = None) -> int:
    command = parser()
    args = sys.argv[1:] if args is None else args
    if args[:1] == ["crawl"]:  # --config and -s: the crawl's options from a file, or one by one
        settings.read_into(command.subcommands["crawl"], args[1:])
    arguments = command.parse_args(args)
    if not _variables_checked(getattr(arguments, "usage", command)):
        return 2
    if arguments.command == "worker":
        return worker(arguments)
    if arguments.command == "parse":  # one page, no services: the worker's module not loaded
        return parse(arguments)
    from crawler import example  # the actor, its broker and stores: for what follows only

    crawl, parts = example.crawl, example.parts
    if arguments.command == "dashboard":
        from crawler import dashboard
        from crawler.dashboard.reading import Reader

        return dashboard.serve(Reader(parts.stores, crawl), arguments.host, arguments.port)
    if arguments.command == "crawl":
        return cli.seed(arguments.usage, arguments, crawl, parts)
    as_json = getattr(arguments, "json", False)
    return cli.about_crawl(arguments.command, arguments.crawl_id, crawl, parts, as_json=as_json)


def worker(arguments: argparse.Namespace) -> int:
    """Become ``dramatiq crawler.example -p N -t N``: Dramatiq's own worker command, with
    ``--handler``s added to its ``CRAWLER_HANDLERS`` (each loaded here first: a handler
    that cannot be loaded is a usage error, not a worker that dies); with ``--render``,
    only on a machine that can render (one line and exit status 2 otherwise).  This
    process's environment is left as it is: the worker gets a copy."""
    names = [*filter(None, os.getenv("CRAWLER_HANDLERS", "").split(",")), *arguments.handler]
    names += arguments.pipeline
    for name in arguments.handler:
        try:
            handlers.load(name)
        except ValueError as e:
            arguments.usage.error(f"--handler {name}: {e}")
    try:
        handlers.Handlers().with_pipelines(arguments.pipeline)
    except ValueError as e:
        arguments.usage.error(f"--pipeline {e}")
    variables = dict(os.environ)
    if names:
        variables["CRAWLER_HANDLERS"] = ",".join(names)
    if arguments.render:
        from crawler import rendering

        try:
            rendering.check()
        except rendering.CannotRender as e:
            print(f"crawler worker: {e}", file=sys.stderr)
            return 2
    command = [sys.executable, "-m", "dramatiq", "crawler.example"]
    command += ["--processes", str(arguments.processes), "--threads", str(arguments.threads)]
    sys.stdout.flush()
    os.execve(sys.executable, command, variables)


def _variables_checked(usage: argparse.ArgumentParser) -> bool:
    """Whether every variable the crawler reads (``CRAWLER_*``, the services') holds a
    value it takes; a bad one is said in one line naming it, as ``usage``'s."""
    try:
        environment.check_variables()
    except ValueError as e:
        print(f"{usage.prog}: {e}", file=sys.stderr)
        return False
    return True


def _bounded(low: int, high: int) -> Any:
    """A flag's type: a whole number from ``low`` to ``high``."""
    return flag_type(lambda value: _checked_between(value, low, high))


def _checked_between(value: str, low: int, high: int) -> int:
    if not (value.isascii() and value.isdigit() and low <= int(value) <= high):
        raise BadValue(f"{value!r} is not a whole number from {low} to {high}")
    return int(value)


def _version() -> str:
    try:
        return version("crawler")
    except PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
