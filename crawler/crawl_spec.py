"""A crawl as a typed value: :class:`CrawlSpec`, its seeds, its message options
(:class:`~crawler.options.CrawlOptions`) and how it runs (``--local``, ``--wait``,
``--threads``, ``--state``, ``--output``, ``--dashboard``, ``-v``).

:meth:`CrawlSpec.from_options` makes one from a plain mapping of option names (the
rows of :data:`crawler.option_table.TABLE`: ``max_pages`` for ``--max-pages``) to
values, each checked by its row's check, itself the rule the message option meets on a
worker: the command line (:func:`crawler.cli.crawl_flags.spec_of`, from the flags
argparse parsed) and the Python API (:mod:`crawler.api`, from keyword arguments) both
make theirs with it, and :func:`crawler.embedded.entry.run` runs one.  A value is the flag's
text or the value itself (``max_pages="5"`` or ``5``); one a flag refuses is a
:class:`BadValue` in the flag's words, which the command line's types say as usage
errors.  No argparse here.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from crawler.local_files import same_file
from crawler.option_checks import CONTRADICTIONS, CrawlError, crawl_options
from crawler.option_rules import DEFAULT_THREADS, BadValue, http_url
from crawler.option_rules import handler_timeout as handler_timeout
from crawler.option_table import TABLE
from crawler.options import CrawlOptions

if TYPE_CHECKING:
    from crawler.seed_file import SeedFile

T = TypeVar("T")

__all__ = ["OPTIONS", "REPEATED", "BadValue", "CrawlError", "CrawlSpec", "SeedUrls", "flag"]

#: What a crawl of several ``--local`` processes cannot share yet: each of these runs
#: the crawl in one process (refused with ``--processes`` above 1).
ONE_PROCESS_OPTIONS = ("state", "dashboard", "render")


def forks_shards() -> bool:
    """Whether ``--local`` may fork its shards (``--processes`` above 1): on Linux only.
    Windows has no fork, and on macOS a process forked after the system's frameworks
    were used (a proxy look-up uses them) may crash."""
    return sys.platform.startswith("linux")


def core_count() -> int:
    """The cores this process may run on: ``--processes``' default."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: Every option of a crawl, by name, and the check of its value (the table's).  A
#: repeatable one (:data:`REPEATED`) takes a list of such values, or one.
OPTIONS: dict[str, Callable[[Any], Any]] = {option.name: option.check for option in TABLE}
REPEATED = frozenset(option.name for option in TABLE if option.kind == "list")


def flag(name: str) -> str:
    """An option's flag: ``--max-pages`` for ``max_pages``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class SeedUrls:
    """A crawl's seeds: those given, then the seed file's (``-i``), read anew each time
    they are iterated; ``len()`` is how many, the file's counted when it was checked."""

    given: tuple[str, ...]
    file: SeedFile | None = None

    def __len__(self) -> int:
        return len(self.given) + (0 if self.file is None else self.file.count)

    def __iter__(self) -> Iterator[str]:
        yield from self.given
        if self.file is not None:
            yield from self.file


@dataclass(frozen=True)
class CrawlSpec:
    """A crawl, all said: what :func:`crawler.embedded.entry.run` runs.  Made by
    :meth:`from_options` (checked option by option); made directly, how it runs is
    checked all the same (:class:`CrawlError` for no seed or options at odds).

    Parameters:
      seeds(tuple): The seeds given, canonical http(s) URLs.
      seed_file(SeedFile): More seeds, a line each of a file checked already (``-i``).
      options(CrawlOptions): What every message of the crawl carries.
      local(bool): Crawl in this process (``--local``), else seed it for workers.
      wait(bool): Follow the workers' crawl to its end (``--wait``).
      adding(bool): Add the seeds to the crawl ``options.crawl_id`` names (``--crawl-id``).
      threads(int): ``--local``'s fetching threads in all; None: :data:`DEFAULT_THREADS`.
      processes(int): ``--local``'s crawling processes, sharing ``threads``; None: one a
        core (:func:`core_count`, at most ``threads``), or one when the crawl has an
        option of :data:`ONE_PROCESS_OPTIONS`.
      state(Path): ``--local``: keep the crawl on disk there (``--state``).
      output(str): The crawl's feed (``-o``): with a handler, its items as it made
        them; without, each URL's record.  A file (``FILE.json``: one JSON array;
        ``FILE.csv``: CSV; else JSON lines), ``-`` (standard output, JSON lines) or, with
        a handler, a ``postgresql://`` URL.
      records(Path): Write each URL's record there (``--records``; ``-``: standard output).
      items(str): Write the handler's items there, each in an envelope saying where it
        came from (``--items``: a file or a ``postgresql://`` URL).
      dashboard(int): Serve the crawl's live page on this port (``--dashboard``).
      verbose(bool): Log every page (``-v``).
      log_level(str): Log lines of this level and above (``-L``).
      quiet(bool): No progress line, errors only logged (``-q``).
      log_file(Path): Write the log lines there, added to (``--log-file``).
      stats(Path): Write the crawl's statistics there at its end (``--stats``).
      not_html_at_info(bool): Upstream's "not HTML" warning is a page's line, shown from
        INFO (``crawler crawl``'s); else a warning, as upstream's seeder and workers log it.
      recrawl_from(Path): An earlier crawl's records: ask only whether each page changed
        (``--recrawl-from``; the options' ``recrawl``).
      recrawl_warc(Path): That crawl's WARC files, for its captures (``--recrawl-warc``).
    """

    seeds: tuple[str, ...]
    options: CrawlOptions
    local: bool = False
    wait: bool = False
    adding: bool = False
    threads: int | None = None
    processes: int | None = None
    state: Path | None = None
    output: str | None = None
    records: Path | None = None
    items: str | None = None
    dashboard: int | None = None
    verbose: bool = False
    log_level: str | None = None
    quiet: bool = False
    log_file: Path | None = None
    stats: Path | None = None
    not_html_at_info: bool = field(default=False, compare=False)  # how it logs, not the crawl
    seed_file: SeedFile | None = None
    recrawl_from: Path | None = None
    recrawl_warc: Path | None = None

    def __post_init__(self) -> None:
        if not self.seeds and self.seed_file is None:
            raise CrawlError("give at least one URL to crawl")
        given = {
            "local": self.local, "wait": self.wait, "crawl_id": self.adding,
            "verbose": self.verbose, "log_level": self.log_level is not None,
            "quiet": self.quiet,
        }  # fmt: skip
        for first, second in CONTRADICTIONS:
            if given[first] and given[second]:
                raise CrawlError(f"{flag(first)} and {flag(second)}: choose one")
        if self.threads is not None and not self.local:
            raise CrawlError("--threads works with --local only")
        if self.processes is not None and not self.local:
            raise CrawlError("--processes works with --local only")
        if (self.processes or 0) > (self.threads or self.fetching_threads):
            raise CrawlError(
                f"--processes {self.processes} and --threads {self.threads}: each process"
                " needs one of the threads (--threads counts them all)"
            )
        if self.processes is not None and self.processes > 1 and not forks_shards():
            raise CrawlError(
                f"--processes {self.processes}: several crawling processes run on Linux only"
            )
        if self.processes is not None and self.processes > 1 and self._one_process_option:
            raise CrawlError(
                f"--processes {self.processes} and {flag(self._one_process_option)}: a crawl"
                f" with {flag(self._one_process_option)} runs in one process"
            )
        if self.state is not None and not self.local:
            raise CrawlError("--state works with --local only")
        if self.recrawl_warc is not None and self.recrawl_from is None:
            raise CrawlError("--recrawl-warc works with --recrawl-from only")
        if self.output is not None and not (self.wait or self.local):
            raise CrawlError("--output works with --local or --wait")
        if self.records is not None and not (self.wait or self.local):
            raise CrawlError("--records works with --local or --wait")
        if self.output is not None and "://" in self.output and not self.handled:
            raise CrawlError(
                f"-o {self.output}: a table holds a handler's items (--handler); the records"
                " of a crawl without one go to a file"
            )
        if self.items is not None and not (self.wait or self.local):
            raise CrawlError("--items works with --local or --wait")
        if self.stats is not None and not (self.wait or self.local):
            raise CrawlError("--stats works with --local or --wait")
        if self.dashboard is not None and not (self.wait or self.local):
            raise CrawlError("--dashboard works with --local or --wait")
        self._files_of_their_own()

    def _files_of_their_own(self) -> None:
        """``-o`` and ``--items`` in files of their own: lines of both in one file mix,
        and the ``-i`` file, read again once they are open, would be emptied first."""
        outputs = [
            (flag, os.fspath(name))
            for flag, name in (
                ("-o", self.output),
                ("--records", self.records),
                ("--items", self.items),
            )
            if name is not None and "://" not in os.fspath(name)  # not a database
        ]
        for index, (first, one) in enumerate(outputs):
            for second, other in outputs[index + 1 :]:
                if same_file(one, other):
                    raise CrawlError(
                        f"{first} {one} and {second} {other} are one file, where their"
                        " lines would mix: give each a file of its own"
                    )
        seeds = None if self.seed_file is None else self.seed_file.name
        for flag, name in outputs:
            if seeds not in (None, "-") and same_file(name, seeds):
                raise CrawlError(
                    f"{flag} {name} is the -i file: writing it would lose the seeds it holds;"
                    f" give {flag} a file of its own"
                )

    @property
    def log_threshold(self) -> int:
        """The level of the log lines this run shows: ``-q``'s ERROR, ``-L``'s level,
        ``-v``'s INFO, else WARNING."""
        if self.quiet:
            return logging.ERROR
        if self.log_level is not None:
            return int(logging.getLevelName(self.log_level))
        return logging.INFO if self.verbose else logging.WARNING

    @property
    def handled(self) -> bool:
        """Whether the crawl's pages go through a handler: then ``-o`` holds its items,
        else each page's record."""
        return self.options.handler is not None

    @property
    def seed_urls(self) -> SeedUrls:
        """Every seed: those given, then the seed file's; iterated, read again."""
        return SeedUrls(self.seeds, self.seed_file)

    @property
    def _one_process_option(self) -> str | None:
        """The first option given of those a crawl in several processes cannot share."""
        given = {
            "state": self.state,
            "dashboard": self.dashboard,
            "render": self.options.render or None,
        }
        return next((name for name in ONE_PROCESS_OPTIONS if given[name] is not None), None)

    @property
    def crawling_processes(self) -> int:
        """``--local``'s processes, given or by default: one a core (no more than its
        threads) on Linux, or one."""
        if self.processes is not None:
            return self.processes
        if self._one_process_option or not forks_shards():
            return 1
        return min(core_count(), self.fetching_threads)

    @property
    def fetching_threads(self) -> int:
        """``--local``'s threads in all (its processes share them), given or by default
        (at least one a process)."""
        return self.threads or max(DEFAULT_THREADS, self.processes or 1)

    @classmethod
    def from_options(cls, seeds: Sequence[str], values: Mapping[str, Any]) -> CrawlSpec:
        """The crawl of ``seeds`` that ``values`` describe: option names (:data:`OPTIONS`)
        to values, None for an option not given; the defaults are ``crawler crawl``'s.
        Each value is checked by its flag's check, the options together as workers
        check a message's, under a new crawl id or the one ``crawl_id`` names.  Raises
        :class:`CrawlError` in the command's words (``argument --max-pages: '0' is not a
        whole number above zero``), naming an option there is none of."""
        if isinstance(seeds, str):
            raise CrawlError("urls must be a list of URLs, not one string")
        given = {name: _value(name, value) for name, value in values.items() if value is not None}
        urls = tuple(_checked_value("url", http_url, url) for url in seeds)
        seed_file = _seed_file(given["input_file"]) if "input_file" in given else None
        local, wait = _runs_here(given), given.get("wait", False)
        given["local"] = local  # where it runs, as the options' checks read it (--warc's)
        output, records = given.get("output"), given.get("records")
        return cls(
            seeds=urls,
            seed_file=seed_file,
            options=crawl_options(
                SeedUrls(urls, seed_file),
                given,
                collect_records=wait,
                records_without_links=wait and output is None and records is None,
            ),
            local=local,
            wait=wait,
            adding="crawl_id" in given,
            threads=given.get("threads"),
            processes=given.get("processes"),
            state=given.get("state"),
            output=output,
            records=records,
            items=given.get("items"),
            dashboard=given.get("dashboard"),
            verbose=given.get("verbose", False),
            log_level=given.get("log_level"),
            quiet=given.get("quiet", False),
            log_file=given.get("log_file"),
            stats=given.get("stats"),
            not_html_at_info="workers" in given,  # crawler crawl's: its own flag is there
            recrawl_from=given.get("recrawl_from"),
            recrawl_warc=given.get("recrawl_warc"),
        )


#: The flags that mean a crawl of workers, which ``crawler crawl`` runs only with ``--workers``.
WORKERS_ONLY = ("wait", "crawl_id")


def _runs_here(given: Mapping[str, Any]) -> bool:
    """Whether the crawl runs in this process: ``crawler crawl``'s unless ``--workers``
    (its ``workers`` given, True or False); else as ``local`` says (upstream's seeder
    and the Python API, where a crawl of workers is the default, or ``seed()``'s).
    ``crawler crawl``'s flags of a workers' crawl without ``--workers`` are refused in
    one line that names it."""
    workers = given.get("workers")
    if workers is None:
        return bool(given.get("local", False))
    if workers and given.get("local"):
        raise CrawlError("--workers and --local: choose one")
    if not workers:
        for name in WORKERS_ONLY:
            if given.get(name):
                raise CrawlError(
                    f"{flag(name)} is for a crawl of workers: crawler crawl --workers URL"
                    f" {flag(name)} (without --workers, crawler crawl crawls here)"
                )
    return not workers


def _text(value: Any) -> str:
    """``value`` as its flag's text would be: what an error quotes."""
    return value if isinstance(value, str) else str(value)


def _value(name: str, value: Any) -> Any:
    """One option's value, checked: a list of them for a repeatable option."""
    check = OPTIONS.get(name)
    if check is None:
        raise CrawlError(
            f"unrecognized arguments: {flag(name)}={value} ({name} is no option of a crawl)"
        )
    if name not in REPEATED:
        return _checked_value(flag(name), check, value)
    items = [value] if isinstance(value, (str, os.PathLike)) else value
    if not isinstance(items, (list, tuple)):
        raise CrawlError(f"argument {flag(name)}: {_text(value)!r} is not a list")
    return [_checked_value(flag(name), check, item) for item in items]


def _seed_file(name: str) -> SeedFile:
    """``-i``'s seeds, every line checked (read whole, kept aside when standard input);
    a :class:`CrawlError` naming the bad lines' numbers."""
    from crawler.seed_file import SeedFile, SeedFileError

    try:
        return SeedFile(name, http_url)
    except SeedFileError as e:
        raise CrawlError(str(e)) from e


def _checked_value(where: str, check: Callable[[Any], T], value: Any) -> T:
    try:
        return check(value)
    except BadValue as e:
        raise CrawlError(f"argument {where}: {e}") from e
