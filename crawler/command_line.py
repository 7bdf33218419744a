"""The crawl on the command line: its parser (:class:`Parser`, :func:`add_seeding`),
argparse's arguments and types, each type checking its value by the very rule a
message's option meets on a worker (:data:`crawler.options.RULES`), said as a usage
error; the ``crawler`` command, the seeder and the Python API all parse with these."""

from __future__ import annotations

import argparse
import errno
import os
import re
import uuid
from pathlib import Path
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

from crawler.errors import InvalidMessage
from crawler.links.sites import site_of
from crawler.options import (
    ABOVE_ZERO,
    DEFAULT_USER_AGENT,
    DIRECTORY,
    HEADER_VALUE,
    PER_HOST,
    RATE,
    WHOLE,
    CrawlOptions,
    Rule,
    canonical_http_url,
    handler_name,
    host_name,
    regular_expression,
    whole_between,
)

T = TypeVar("T")


#: The crawl options whose default ``crawler crawl`` turns on (``--upstream``: off).
CRAWLER_DEFAULTS = ("follow_relative", "same_site", "obey_robots")


def add_arguments(parser: argparse.ArgumentParser, *, upstream: bool = True) -> None:
    """The crawl options, the same for ``--local`` and for seeding workers: all off by
    default as upstream (``python -m crawler.example``), or, for ``crawler crawl``, with
    links parsed, the seeds' sites kept and robots.txt obeyed, each with a ``--no-``
    form, and ``--upstream`` to turn the three off at once."""
    if upstream:
        group = parser.add_argument_group("crawl options (all off by default: upstream behaviour)")
        switch: dict[str, Any] = {"action": "store_true"}
    else:
        group = parser.add_argument_group("crawl options")
        switch = {"action": argparse.BooleanOptionalAction, "default": None}
        group.add_argument(
            "--upstream",
            action="store_true",
            help="upstream's crawl: its regex for links, any site, robots.txt ignored"
            " (each can be turned on again)",
        )
    _add_scope(group, switch, upstream=upstream)
    _add_bounds(group)
    _add_fetching(group, switch, upstream=upstream)


def _default_note(upstream: bool) -> str:
    """What a switch's help adds when ``crawler crawl`` turns it on by default."""
    return "" if upstream else " (default; --upstream: off)"


def _add_scope(group: argparse._ArgumentGroup, switch: dict[str, Any], *, upstream: bool) -> None:
    """The options that say which links a crawl follows."""
    group.add_argument(
        "--follow-relative",
        **switch,
        help="find links with an HTML tokenizer, relative ones included" + _default_note(upstream),
    )
    group.add_argument(
        "--same-domain", action="store_true", help="stay on the hosts of the seed URLs"
    )
    group.add_argument(
        "--same-site",
        **switch,
        help="stay on the seeds' sites: their registrable domains (eTLD+1) and all their"
        f" hosts{'' if upstream else ' (default unless --same-domain or --allow-domain)'}",
    )
    group.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        type=domain_name,
        metavar="DOMAIN",
        help="also follow links to DOMAIN and its subdomains (repeatable)",
    )
    group.add_argument(
        "--include",
        action="append",
        default=[],
        type=pattern,
        metavar="REGEX",
        help="follow only links REGEX matches (anywhere in the URL; repeatable: any of them)",
    )
    group.add_argument(
        "--exclude",
        action="append",
        default=[],
        type=pattern,
        metavar="REGEX",
        help="never follow links REGEX matches (repeatable)",
    )


def _add_bounds(group: argparse._ArgumentGroup) -> None:
    """The options that bound a crawl, and the order of its pages."""
    group.add_argument("--max-depth", type=whole_number, metavar="N", help="seeds are depth 0")
    group.add_argument("--max-pages", type=positive_int, metavar="N", help="fetch N pages at most")
    group.add_argument(
        "--max-pages-per-host",
        type=positive_int,
        metavar="N",
        help="fetch N pages of each host at most",
    )
    group.add_argument(
        "--sitemaps",
        action="store_true",
        help="also seed from the seeds' sitemaps (robots.txt's Sitemap: lines, else /sitemap.xml)",
    )
    group.add_argument(
        "--breadth-first",
        action="store_true",
        help="fetch shallow pages before deeper ones (RabbitMQ message priorities)",
    )


def _add_fetching(
    group: argparse._ArgumentGroup, switch: dict[str, Any], *, upstream: bool
) -> None:
    """The options that say how pages are fetched, and what is done with them."""
    group.add_argument(
        "--obey-robots",
        **switch,
        help="honour robots.txt and its Crawl-delay" + _default_note(upstream),
    )
    group.add_argument(
        "--max-rate",
        type=rate,
        metavar="R",
        help="R requests per second per host at most, across all workers",
    )
    group.add_argument(
        "--max-per-host",
        type=per_host,
        metavar="N",
        help="N fetches in flight per host at most, across all workers",
    )
    group.add_argument(
        "--user-agent", type=user_agent, default=DEFAULT_USER_AGENT, help="the User-Agent header"
    )
    group.add_argument(
        "--handler",
        type=handler_name_argument,
        metavar="MODULE:FUNCTION",
        help="call this page handler on every HTML page (workers must load it:"
        " 'crawler worker --handler'); what it returns goes in the page's record",
    )
    group.add_argument(
        "--warc",
        metavar="DIR",
        help="keep every response in WARC files in DIR (with workers: DIR under their"
        " CRAWLER_WARC_DIR)",
    )


def from_arguments(
    arguments: argparse.Namespace,
    seeds: list[str],
    *,
    local: bool = False,
    collect_records: bool = False,
    records_without_links: bool = False,
) -> CrawlOptions:
    """The options a seeding chose, under a new crawl id or the one ``--crawl-id`` names,
    checked as workers check a message's (a usage error, ``ArgumentTypeError``, if not).

    ``local``: the crawl runs in this process (``--local``), so ``--warc`` names a
    directory here, made if missing; else one under the workers' ``CRAWLER_WARC_DIR``.
    """
    resolve_defaults(arguments)
    warc = arguments.warc
    if warc is not None:
        warc = warc_directory(warc) if local else warc_name(warc)
    domains = [domain.lower().strip(".") for domain in arguments.allow_domain]
    if arguments.same_domain:
        domains += [(urlsplit(url).hostname or "").lower() for url in seeds]
    sites = [site_of(urlsplit(url).hostname or "") for url in seeds] if arguments.same_site else []
    options = CrawlOptions(
        follow_relative=arguments.follow_relative,
        allowed_domains=tuple(dict.fromkeys(domains)),
        max_depth=arguments.max_depth,
        max_pages=arguments.max_pages,
        obey_robots=arguments.obey_robots,
        max_rate=arguments.max_rate,
        user_agent=arguments.user_agent,
        include=tuple(arguments.include),
        exclude=tuple(arguments.exclude),
        allowed_sites=tuple(dict.fromkeys(sites)),
        max_per_host=arguments.max_per_host,
        max_pages_per_host=arguments.max_pages_per_host,
        sitemaps=arguments.sitemaps,
        breadth_first=arguments.breadth_first,
        warc=warc,
        collect_records=collect_records,
        batched_records=collect_records,
        records_without_links=records_without_links,
        handler=arguments.handler,
        crawl_id=getattr(arguments, "crawl_id", None) or uuid.uuid4().hex,
    )
    try:  # what workers will check: the same code, so the seeder never sends what they refuse
        CrawlOptions.from_message(options.to_message())
    except InvalidMessage as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    return options


def resolve_defaults(arguments: argparse.Namespace) -> None:
    """``crawler crawl``'s switches left unset (None) take their default: on, unless
    ``--upstream``; ``--same-site`` is off with ``--same-domain`` or ``--allow-domain``.
    Raises ``ArgumentTypeError`` for ``--same-domain`` with ``--same-site``."""
    if arguments.same_domain and arguments.same_site:
        raise argparse.ArgumentTypeError("--same-domain and --same-site: choose one")
    if arguments.same_site is None and (arguments.same_domain or arguments.allow_domain):
        arguments.same_site = False
    upstream = getattr(arguments, "upstream", False)
    for name in CRAWLER_DEFAULTS:
        if getattr(arguments, name) is None:
            setattr(arguments, name, not upstream)


def crawl_id(value: str) -> str:
    """An ``argparse`` type: a crawl id as the seeder prints it (32 hex digits)."""
    if not re.fullmatch(r"[0-9a-f]{32}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a crawl id (32 hex digits)")
    return value


def whole_number(value: str) -> int:
    """An ``argparse`` type: a whole number (``max_depth``'s rule)."""
    return _parsed(value, _digits(value), WHOLE)


def positive_int(value: str) -> int:
    """An ``argparse`` type: a whole number above zero (``max_pages``' rule)."""
    return _parsed(value, _digits(value), ABOVE_ZERO)


#: ``--threads`` at most: a thread a fetch in flight, each with its connections.
MAX_THREADS = 512


def threads(value: str) -> int:
    """An ``argparse`` type: ``--local``'s threads, 1 to ``MAX_THREADS``."""
    return _parsed(
        value,
        _digits(value),
        Rule(f"a whole number from 1 to {MAX_THREADS}", whole_between(1, MAX_THREADS)),
    )


def rate(value: str) -> float:
    """An ``argparse`` type: ``--max-rate``'s number (``nan``, ``inf`` and ``1e309``,
    which float() takes, would fail every page of the crawl)."""
    try:
        number: float | None = float(value)
    except ValueError:
        number = None
    return _parsed(value, number, RATE)


def per_host(value: str) -> int:
    """An ``argparse`` type: ``--max-per-host``'s number."""
    return _parsed(value, _digits(value), PER_HOST)


def domain_name(value: str) -> str:
    """An ``argparse`` type: a host name or IP address (:func:`host_name`)."""
    try:
        return host_name(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a domain name") from e


def pattern(value: str) -> str:
    """An ``argparse`` type: a regular expression RE2 compiles."""
    return _parsed(value, value, Rule("a regular expression", regular_expression))


def port(value: str) -> int:
    """A TCP port: a whole number from 1 to 65535."""
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= 65535):
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (1 to 65535)")
    return int(value)


def handler_name_argument(value: str) -> str:
    """``--handler``'s type: ``package.module:function``."""
    try:
        return handler_name(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a handler's name: package.module:function"
        ) from None


def user_agent(value: str) -> str:
    """An ``argparse`` type: a header value (:func:`header_value`)."""
    return _parsed(value, value, HEADER_VALUE)


def warc_name(value: str) -> str:
    """An ``argparse`` type: ``--warc``'s directory, as a message may carry it (with
    workers, it lands under their ``CRAWLER_WARC_DIR``)."""
    return _parsed(value, value, DIRECTORY)


def _digits(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _parsed(text: str, value: Any, rule: Rule[T]) -> T:
    """``text`` from the command line, parsed as ``value``, checked by ``rule``: the
    check a message's option meets, said as a usage error."""
    try:
        return rule.check(value)
    except ValueError as e:
        detail = f": {e}" if str(e) else ""
        raise argparse.ArgumentTypeError(f"{text!r} is not {rule.must_be}{detail}") from e


def warc_directory(value: str) -> str:
    """``--local``'s ``--warc``: a directory of this machine to write WARC files in,
    made if missing, as an absolute path without ``..``; or ``ArgumentTypeError``."""
    directory = Path(os.path.abspath(Path(value).expanduser()))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "permission denied")
    except OSError as e:
        raise argparse.ArgumentTypeError(
            f"cannot write WARC files in {value!r}: {e.strerror or e}"
        ) from e
    return str(directory)


def http_url(value: str) -> str:
    """An ``argparse`` type: an absolute http(s) URL, in its canonical form
    (:func:`canonical_http_url`)."""
    try:
        return canonical_http_url(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} {e}") from e


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``--max-d`` is no ``--max-depth``), whose usage
    errors are one line and a pointer to ``--help``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nSee '{self.prog} --help'.\n")


def add_seeding(parser: argparse.ArgumentParser, *, upstream: bool) -> None:
    """The URLs, the crawl options, and how the crawl runs: workers or ``--local``."""
    parser.add_argument("urls", metavar="url", nargs="*", type=http_url, help="an http(s) URL")
    add_arguments(parser, upstream=upstream)
    running = parser.add_argument_group("how the crawl runs")
    running.add_argument(
        "--wait", action="store_true", help="workers' crawl: show its progress until it ends"
    )
    running.add_argument(
        "--crawl-id",
        type=crawl_id,
        metavar="CRAWL_ID",
        help="add the URLs to this crawl (its claims, counters and budget), not a new one",
    )
    running.add_argument(
        "--local", action="store_true", help="crawl in this process until nothing is left"
    )
    running.add_argument("--threads", type=threads, help="--local's fetching threads (default 8)")
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
        type=port,
        metavar="PORT",
        help="with --wait or --local: serve the crawl's live page on 127.0.0.1:PORT meanwhile",
    )
    running.add_argument("-v", "--verbose", action="store_true", help="log every page")
