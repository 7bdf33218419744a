"""A crawl as a typed value: :class:`CrawlSpec`, its seeds, its message options
(:class:`~crawler.options.CrawlOptions`) and how it runs (``--local``, ``--wait``,
``--threads``, ``--state``, ``--output``, ``--dashboard``, ``-v``).

:meth:`CrawlSpec.from_options` makes one from a plain mapping of option names (the
flags of ``crawler crawl`` in Python's spelling: ``max_pages`` for ``--max-pages``) to
values, each checked by the function its flag's type is (:data:`OPTIONS`), itself the
rule the message option meets on a worker (:data:`crawler.options.RULES`): the command
line (:func:`crawler.command_line.spec_of`, from the flags argparse parsed) and the
Python API (:mod:`crawler.api`, from keyword arguments) both make theirs with it, and
:func:`crawler.running.run` runs one.  A value is the flag's text or the value itself
(``max_pages="5"`` or ``5``); one a flag refuses is a :class:`BadValue` in the flag's
words, which the command line's types say as usage errors.  No argparse here.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from crawler.errors import InvalidMessage
from crawler.links.sites import site_of
from crawler.local_files import same_file
from crawler.options import (
    ABOVE_ZERO,
    AUTH_PREFIX,
    DEFAULT_USER_AGENT,
    DIRECTORY,
    FLAG,
    HEADER_VALUE,
    PER_HOST,
    RATE,
    RULES,
    WHOLE,
    CrawlOptions,
    Rule,
    auth_pair,
    canonical_http_url,
    handler_name,
    header_line,
    host_name,
    proxy_url,
    regular_expression,
    whole_between,
)

if TYPE_CHECKING:
    from crawler.cli.seed_file import SeedFile

T = TypeVar("T")


class CrawlError(ValueError):
    """Options, URLs or a handler the crawler refuses, in the command's words."""


class BadValue(ValueError):
    """A value an option refuses, in the words its flag's usage error uses
    (``'0' is not a whole number above zero``)."""


def _text(value: Any) -> str:
    """``value`` as its flag's text would be: what an error quotes."""
    return value if isinstance(value, str) else str(value)


def _checked(value: Any, rule: Rule[T], parse: Callable[[str], Any] = str) -> T:
    """``value`` checked by ``rule``: the flag's text read by ``parse`` first, any other
    value as it is (a bool is no number, a number no string)."""
    try:
        return rule.check(parse(value) if isinstance(value, str) else value)
    except ValueError as e:
        detail = f": {e}" if str(e) else ""
        raise BadValue(f"{_text(value)!r} is not {rule.must_be}{detail}") from e


def _digits(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def whole_number(value: Any) -> int:
    """A whole number (``max_depth``'s rule)."""
    return _checked(value, WHOLE, _digits)


def positive_int(value: Any) -> int:
    """A whole number above zero (``max_pages``' rule)."""
    return _checked(value, ABOVE_ZERO, _digits)


#: ``--threads`` at most: a thread a fetch in flight, each with its connections.
MAX_THREADS = 512
#: ``--local``'s fetching threads when ``--threads`` is not given.
DEFAULT_THREADS = 8
THREADS = Rule(f"a whole number from 1 to {MAX_THREADS}", whole_between(1, MAX_THREADS))


def threads(value: Any) -> int:
    """``--local``'s threads, 1 to ``MAX_THREADS``."""
    return _checked(value, THREADS, _digits)


#: ``--processes`` at most.
MAX_PROCESSES = 64
PROCESSES = Rule(f"a whole number from 1 to {MAX_PROCESSES}", whole_between(1, MAX_PROCESSES))
#: What a crawl of several ``--local`` processes cannot share yet: each of these runs
#: the crawl in one process (refused with ``--processes`` above 1).
ONE_PROCESS_OPTIONS = ("state", "dashboard", "render")


def processes(value: Any) -> int:
    """``--local``'s crawling processes, 1 to ``MAX_PROCESSES``."""
    return _checked(value, PROCESSES, _digits)


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


def rate(value: Any) -> float:
    """``--max-rate``'s number (``nan``, ``inf`` and ``1e309``, which float() takes,
    would fail every page of the crawl)."""
    return _checked(value, RATE, _float)


def per_host(value: Any) -> int:
    """``--max-per-host``'s number."""
    return _checked(value, PER_HOST, _digits)


def domain_name(value: Any) -> str:
    """A host name or IP address (:func:`~crawler.options.host_name`)."""
    try:
        return host_name(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not a domain name") from e


def pattern(value: Any) -> str:
    """A regular expression RE2 compiles."""
    return _checked(value, Rule("a regular expression", regular_expression))


def port(value: Any) -> int:
    """A TCP port: a whole number from 1 to 65535."""
    number = _digits(value) if isinstance(value, str) else value
    if not (type(number) is int and 1 <= number <= 65535):
        raise BadValue(f"{_text(value)!r} is not a port (1 to 65535)")
    return number


def handler(value: Any) -> str:
    """``--handler``'s ``package.module:function``."""
    try:
        return handler_name(value)
    except ValueError:
        raise BadValue(
            f"{_text(value)!r} is not a handler's name: package.module:function"
        ) from None


def user_agent(value: Any) -> str:
    """A header value (:func:`~crawler.options.header_value`)."""
    return _checked(value, HEADER_VALUE)


def header(value: Any) -> str:
    """``--header``'s ``Name: value`` (:func:`~crawler.options.header_line`)."""
    try:
        return header_line(value)
    except ValueError as e:
        if isinstance(value, str) and ":" in value:
            raise BadValue(f"{value!r} cannot be sent: {e}") from e
        raise BadValue(f"{_text(value)!r} is not 'Name: value'") from e


def cookies(value: Any) -> bool:
    """``--cookies on|off`` (or True and False)."""
    if isinstance(value, bool):
        return value
    if value in ("on", "off"):
        return bool(value == "on")
    raise BadValue(f"{_text(value)!r} is not on or off")


def proxy(value: Any) -> str:
    """``--proxy``'s ``http://host:port`` (or https)."""
    try:
        return proxy_url(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not an http:// or https:// proxy URL") from e


def timeout(value: Any) -> float:
    """``--timeout``'s seconds."""
    checked: float = _checked(value, RULES["timeout"], _float)
    return checked


def handler_timeout(value: Any) -> float:
    """``--handler-timeout``'s seconds."""
    checked: float = _checked(value, RULES["handler_timeout"], _float)
    return checked


def retries(value: Any) -> int:
    """``--retries``' number, at most the actor's."""
    checked: int = _checked(value, RULES["retries"], _digits)
    return checked


def render_wait(value: Any) -> float | None:
    """``--render-wait``'s ``idle`` (None: until the network is idle, the default) or
    seconds, at most :data:`~crawler.options.MAX_RENDER_WAIT`."""
    if value == "idle":
        return None
    checked: float = _checked(value, RULES["render_wait"], _float)
    return checked


def auth_env(value: Any) -> str:
    """``--auth-env``'s ``host=CRAWLER_AUTH_NAME``."""
    try:
        return auth_pair(value)
    except ValueError as e:
        raise BadValue(
            f"{_text(value)!r} is not host={AUTH_PREFIX}NAME (a variable of the workers')"
        ) from e


def crawl_id(value: Any) -> str:
    """A crawl id as the seeder prints it (32 hex digits)."""
    if not (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value)):
        raise BadValue(f"{_text(value)!r} is not a crawl id (32 hex digits)")
    return value


def http_url(value: Any) -> str:
    """An absolute http(s) URL, in its canonical form (:func:`canonical_http_url`)."""
    if not isinstance(value, str):
        raise BadValue(f"{_text(value)!r} is not an http:// or https:// URL")
    try:
        return canonical_http_url(value)
    except ValueError as e:
        raise BadValue(f"{value!r} {e}") from e


def path(value: Any) -> Path:
    """A file or directory of this machine (``--state``, ``--output``; ``-``: stdout)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"{_text(value)!r} is not a path")
    return Path(value)


def seed_input(value: Any) -> str:
    """``-i``'s file of seeds, a URL a line (``-``: standard input)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"{_text(value)!r} is not a file name")
    return os.fspath(value)


def directory(value: Any) -> str:
    """``--warc``'s directory, as given (:meth:`CrawlSpec.from_options` reads it)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadValue(f"{_text(value)!r} is not a directory name")
    return os.fspath(value)


def items(value: Any) -> str:
    """``--items``' sink: a file (JSON lines; CSV for ``FILE.csv``) or a
    ``postgresql://`` URL (:mod:`crawler.items.sinks`)."""
    from crawler.items.sinks import checked_address

    try:
        return checked_address(value)
    except ValueError as e:
        raise BadValue(f"{_text(value)!r} is not an item sink: {e}") from e


def switch(value: Any) -> bool:
    """A switch's value: True or False."""
    return _checked(value, FLAG)


def warc_name(value: str) -> str:
    """``--warc``'s directory as a message may carry it (with workers, it lands under
    their ``CRAWLER_WARC_DIR``)."""
    return _checked(value, DIRECTORY)


def warc_directory(value: str) -> str:
    """``--local``'s ``--warc``: a directory of this machine, as an absolute path without
    ``..`` (:func:`crawler.running.run` makes it)."""
    return os.path.abspath(Path(value).expanduser())


#: Every option of a crawl, by name (its flag in Python's spelling), and the check of its
#: value; ``crawler crawl``'s flags are these, each with its check as its type.  A
#: repeatable one (:data:`REPEATED`) takes a list of such values, or one.
OPTIONS: dict[str, Callable[[Any], Any]] = {
    # which links the crawl follows
    "upstream": switch,
    "follow_relative": switch,
    "same_domain": switch,
    "same_site": switch,
    "allow_domain": domain_name,
    "include": pattern,
    "exclude": pattern,
    # its bounds and order
    "max_depth": whole_number,
    "max_pages": positive_int,
    "max_pages_per_host": positive_int,
    "sitemaps": switch,
    "breadth_first": switch,
    # how pages are fetched, and what is done with them
    "obey_robots": switch,
    "max_rate": rate,
    "max_per_host": per_host,
    "user_agent": user_agent,
    "handler": handler,
    "handler_timeout": handler_timeout,
    "warc": directory,
    "header": header,
    "cookies": cookies,
    "proxy": proxy,
    "timeout": timeout,
    "retries": retries,
    "auth_env": auth_env,
    "render": switch,
    "render_wait": render_wait,
    "render_media": switch,
    # how the crawl runs
    "input_file": seed_input,
    "recrawl_from": path,
    "recrawl_warc": path,
    "wait": switch,
    "crawl_id": crawl_id,
    "local": switch,
    "threads": threads,
    "processes": processes,
    "state": path,
    "output": path,
    "items": items,
    "dashboard": port,
    "verbose": switch,
}
REPEATED = frozenset({"allow_domain", "include", "exclude", "header", "auth_env"})
#: The switches ``crawler crawl`` turns on unless told otherwise (``upstream``: off).
CRAWLER_DEFAULTS = ("follow_relative", "same_site", "obey_robots")
#: Options that make no sense together: refused, naming both.
CONTRADICTIONS = (("local", "wait"), ("local", "crawl_id"))


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
    """A crawl, all said: what :func:`crawler.running.run` runs.  Made by
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
      output(Path): Write each URL's record there (``-o``; ``-``: standard output).
      items(str): Write the handler's items there (``--items``: a file or a
        ``postgresql://`` URL).
      dashboard(int): Serve the crawl's live page on this port (``--dashboard``).
      verbose(bool): Log every page (``-v``).
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
    output: Path | None = None
    items: str | None = None
    dashboard: int | None = None
    verbose: bool = False
    seed_file: SeedFile | None = None
    recrawl_from: Path | None = None
    recrawl_warc: Path | None = None

    def __post_init__(self) -> None:
        if not self.seeds and self.seed_file is None:
            raise CrawlError("give at least one URL to crawl")
        given = {"local": self.local, "wait": self.wait, "crawl_id": self.adding}
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
        if self.items is not None and not (self.wait or self.local):
            raise CrawlError("--items works with --local or --wait")
        if self.dashboard is not None and not (self.wait or self.local):
            raise CrawlError("--dashboard works with --local or --wait")
        self._files_of_their_own()

    def _files_of_their_own(self) -> None:
        """``-o`` and ``--items`` in files of their own: lines of both in one file mix,
        and the ``-i`` file, read again once they are open, would be emptied first."""
        outputs = [
            (flag, os.fspath(name))
            for flag, name in (("-o", self.output), ("--items", self.items))
            if name is not None and "://" not in os.fspath(name)  # not a database
        ]
        if len(outputs) == 2 and same_file(outputs[0][1], outputs[1][1]):
            raise CrawlError(
                f"-o {outputs[0][1]} and --items {outputs[1][1]} are one file, where their"
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
        local, wait = given.get("local", False), given.get("wait", False)
        output = given.get("output")
        return cls(
            seeds=urls,
            seed_file=seed_file,
            options=_crawl_options(
                SeedUrls(urls, seed_file),
                given,
                collect_records=wait,
                records_without_links=wait and output is None,
            ),
            local=local,
            wait=wait,
            adding="crawl_id" in given,
            threads=given.get("threads"),
            processes=given.get("processes"),
            state=given.get("state"),
            output=output,
            items=given.get("items"),
            dashboard=given.get("dashboard"),
            verbose=given.get("verbose", False),
            recrawl_from=given.get("recrawl_from"),
            recrawl_warc=given.get("recrawl_warc"),
        )


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
    from crawler.cli.seed_file import SeedFile, SeedFileError  # its package: argparse's

    try:
        return SeedFile(name, http_url)
    except SeedFileError as e:
        raise CrawlError(str(e)) from e


def _checked_value(where: str, check: Callable[[Any], T], value: Any) -> T:
    try:
        return check(value)
    except BadValue as e:
        raise CrawlError(f"argument {where}: {e}") from e


def _scope(
    seeds: SeedUrls, given: Mapping[str, Any]
) -> tuple[dict[str, bool], dict[str, None], dict[str, None]]:
    """``crawler crawl``'s switches (on unless given, or ``upstream``; ``same_site`` off
    with ``same_domain`` or ``allow_domain``), and the domains and the sites links may go
    to (each once, in order)."""
    same_domain, same_site = given.get("same_domain", False), given.get("same_site")
    allow_domain = given.get("allow_domain", [])
    if same_domain and same_site:
        raise CrawlError("--same-domain and --same-site: choose one")
    upstream = given.get("upstream", False)
    on = {name: given.get(name, not upstream) for name in CRAWLER_DEFAULTS}
    if same_site is None and (same_domain or allow_domain):
        on["same_site"] = False
    domains = dict.fromkeys(domain.lower().strip(".") for domain in allow_domain)
    sites: dict[str, None] = {}
    if same_domain or on["same_site"]:  # a seed file read once more: its hosts, not its URLs
        for url in seeds:
            host = (urlsplit(url).hostname or "").lower()
            if same_domain:
                domains[host] = None
            if on["same_site"]:
                sites[site_of(host)] = None
    return on, domains, sites


def _crawl_options(
    seeds: SeedUrls,
    given: Mapping[str, Any],
    *,
    collect_records: bool,
    records_without_links: bool,
) -> CrawlOptions:
    """The options the crawl's messages carry, checked as workers check a message's.

    ``crawler crawl``'s switches not given are on, unless ``upstream``; ``same_site``
    is off with ``same_domain`` or ``allow_domain``.  With ``local`` ``warc`` names a
    directory here, else one under the workers' ``CRAWLER_WARC_DIR``.  ``render_wait``
    (seconds: ``idle`` is the default) and ``render_media`` need ``render``."""
    on, domains, sites = _scope(seeds, given)
    warc = given.get("warc")
    if warc is not None:
        try:
            warc = warc_directory(warc) if given.get("local") else warc_name(warc)
        except BadValue as e:
            raise CrawlError(str(e)) from e
    render = given.get("render", False)
    for name in ("render_wait", "render_media"):
        if given.get(name) and not render:
            raise CrawlError(f"{flag(name)} works with --render only")
    options = CrawlOptions(
        follow_relative=on["follow_relative"],
        allowed_domains=tuple(domains),
        max_depth=given.get("max_depth"),
        max_pages=given.get("max_pages"),
        obey_robots=on["obey_robots"],
        max_rate=given.get("max_rate"),
        user_agent=given.get("user_agent", DEFAULT_USER_AGENT),
        include=tuple(given.get("include", ())),
        exclude=tuple(given.get("exclude", ())),
        allowed_sites=tuple(sites),
        max_per_host=given.get("max_per_host"),
        max_pages_per_host=given.get("max_pages_per_host"),
        sitemaps=given.get("sitemaps", False),
        breadth_first=given.get("breadth_first", False),
        warc=warc,
        collect_records=collect_records,
        batched_records=collect_records,
        records_without_links=records_without_links,
        handler=given.get("handler"),
        handler_timeout=given.get("handler_timeout"),
        headers=tuple(given.get("header", ())),
        cookies=given.get("cookies", True),
        proxy=given.get("proxy"),
        timeout=given.get("timeout"),
        retries=given.get("retries"),
        auth_env=tuple(given.get("auth_env", ())),
        render=render,
        render_wait=given.get("render_wait"),
        render_media=given.get("render_media", False),
        recrawl="recrawl_from" in given,
        crawl_id=given.get("crawl_id") or uuid.uuid4().hex,
    )
    try:  # what workers will check: the same code, so the seeder never sends what they refuse
        CrawlOptions.from_message(options.to_message())
    except InvalidMessage as e:
        raise CrawlError(str(e)) from e
    return options
