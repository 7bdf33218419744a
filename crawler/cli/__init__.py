"""The seeder's command line: ``python -m crawler.example URL [options]`` seeds a crawl
for the workers (or crawls right here with ``--local``), and follows, cancels or
replays crawls (``--wait``, ``--status``, ``--cancel``, ``--pause``, ``--resume``,
``--dead-letters``, ``--replay``): a thin user of :func:`crawler.embedded.entry.run`, which
seeds or runs the crawl, as the Python API (:mod:`crawler.api`) does.  The crawl's flags are
:mod:`crawler.cli.parser`'s, made from the option table; the ``crawler`` command is
:mod:`crawler.cli.command`."""

from __future__ import annotations

import argparse
from typing import Any

import dramatiq

from crawler.cli import settings
from crawler.cli.crawl_flags import spec_of
from crawler.cli.parser import Parser, add_seeding
from crawler.embedded import entry
from crawler.tracking import seeder
from crawler.worker_parts import WorkerParts


def seeder_parser() -> Parser:
    """The seeder's arguments, upstream's defaults: ``python -m crawler.example``."""
    parser = Parser(
        prog="python -m crawler.example",
        description="Seed a crawl: enqueue URLs for the workers, or crawl them right here.",
    )
    add_seeding(parser, upstream=True)
    settings.add_settings(parser)
    watching = parser.group("following a crawl of workers")
    for action, text in ACTIONS.items():
        watching.add_argument(f"--{action}", metavar="CRAWL_ID", help=text)
    return parser


def main(args: list[str], crawl: dramatiq.Actor[Any, Any], parts: WorkerParts) -> int:
    """Run the command ``args`` ask for with the process's ``crawl`` actor and ``parts``
    (stores, lifetimes, handlers): the exit status."""
    command = seeder_parser()
    arguments = settings.parse_args(command, args)
    for action in ACTIONS:
        crawl_id = getattr(arguments, action.replace("-", "_"))
        if crawl_id:
            return about_crawl(action, crawl_id, crawl, parts)
    return seed(command, arguments, crawl, parts)


def seed(
    command: argparse.ArgumentParser,
    arguments: argparse.Namespace,
    crawl: dramatiq.Actor[Any, Any],
    parts: WorkerParts,
) -> int:
    """Seed the crawl ``arguments`` describe (:func:`crawler.cli.crawl_flags.spec_of`), or
    run it here (:func:`crawler.embedded.entry.run`); what the crawler refuses is
    ``command``'s usage error."""
    try:
        return entry.run(spec_of(arguments), crawl, parts)
    except entry.CrawlError as e:
        command.error(str(e))


#: What can be done to a crawl of workers, given its id, and what each does: the one
#: definition of ``--status ID`` and the like here, and of ``crawler status ID`` and the
#: like in :mod:`crawler.cli.command`.
ACTIONS = {
    "status": "print a crawl's figures",
    "cancel": "end a crawl: its queued and retrying URLs end as cancelled, unfetched",
    "pause": "pause a crawl: its URLs wait in the broker, unfetched, until resumed",
    "resume": "carry on with a paused crawl",
    "dead-letters": "list the URLs a crawl gave up for good ('all': of every crawl)",
    "replay": "send a crawl's dead-lettered URLs again, with fresh retries ('all': every crawl)",
}


def about_crawl(
    action: str,
    crawl_id: str,
    crawl: dramatiq.Actor[Any, Any],
    parts: WorkerParts,
    *,
    as_json: bool = False,
) -> int:
    """Do one of ``ACTIONS`` to the crawl ``crawl_id`` (``all``: every crawl's dead
    letters; ``status`` ``as_json``: its statistics document); a service that does not
    answer is one line and exit 1."""
    stores, lifetimes = parts.stores, parts.lifetimes
    if action == "status":
        return entry.reach_services(lambda: seeder.status(stores, crawl_id, as_json=as_json))
    if action == "cancel":
        return entry.reach_services(lambda: seeder.cancel(stores, crawl_id, lifetimes))
    if action in ("pause", "resume"):
        paused = action == "pause"
        return entry.reach_services(
            lambda: seeder.pause(stores, crawl_id, lifetimes, paused=paused)
        )
    return entry.reach_services(
        lambda: seeder.dead_letters(
            crawl.broker,
            crawl.queue_name,
            stores,
            lifetimes,
            crawl_id,
            replay=action == "replay",
        )
    )
