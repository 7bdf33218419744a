"""The crawl on the command line: its parser (:class:`Parser`, :func:`add_seeding`),
argparse's arguments and types, each type the check of :mod:`crawler.crawl_spec` its
option's value meets (the very rule a message's option meets on a worker,
:data:`crawler.options.RULES`), said as a usage error; :func:`spec_of` makes the
:class:`~crawler.crawl_spec.CrawlSpec` the flags describe.  The ``crawler`` command and
the seeder parse with these; the Python API checks its keywords by the same checks."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from crawler import crawl_spec
from crawler.crawl_spec import OPTIONS, BadValue, CrawlSpec
from crawler.options import DEFAULT_USER_AGENT, MAX_RENDER_WAIT

T = TypeVar("T")


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
    _add_http(group)
    _add_rendering(group)


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
        "--handler-timeout",
        type=_flag_type(crawl_spec.handler_timeout),
        metavar="SECONDS",
        help="the page handler may take this long on a page (default: the workers'"
        " CRAWLER_HANDLER_TIMEOUT, 1.5; at most what the 10 s time limit leaves after"
        " the fetch's deadline)",
    )
    group.add_argument(
        "--warc",
        metavar="DIR",
        help="keep every response in WARC files in DIR (with workers: DIR under their"
        " CRAWLER_WARC_DIR)",
    )


def _add_http(group: argparse._ArgumentGroup) -> None:
    """The crawl's own HTTP settings: kept to its requests, never another crawl's."""
    group.add_argument(
        "--header",
        type=_flag_type(crawl_spec.header),
        action="append",
        metavar="'NAME: VALUE'",
        help="send this header with every request of the crawl (repeatable)",
    )
    group.add_argument(
        "--cookies",
        type=_flag_type(crawl_spec.cookies),
        metavar="on|off",
        help="keep the cookies the crawl's sites set, within this crawl (default on)",
    )
    group.add_argument(
        "--proxy",
        type=_flag_type(crawl_spec.proxy),
        metavar="URL",
        help="send every request of the crawl through this http(s) proxy",
    )
    group.add_argument(
        "--timeout",
        type=_flag_type(crawl_spec.timeout),
        metavar="SECONDS",
        help="a fetch may take this long at most (below the workers' own deadline)",
    )
    group.add_argument(
        "--retries",
        type=_flag_type(crawl_spec.retries),
        metavar="N",
        help="retry a failed fetch N times at most (0 to 3; default 3)",
    )
    group.add_argument(
        "--auth-env",
        type=_flag_type(crawl_spec.auth_env),
        action="append",
        metavar="HOST=CRAWLER_AUTH_NAME",
        help="HTTP Basic credentials for HOST, 'user:password' in the workers' variable"
        " CRAWLER_AUTH_NAME (repeatable; no secret is put in a message)",
    )


def _add_rendering(group: argparse._ArgumentGroup) -> None:
    """Pages loaded in headless Chromium, their links read from the rendered page."""
    group.add_argument(
        "--render",
        action="store_true",
        help="load each page in headless Chromium and read links from the rendered page"
        " (needs Chromium and 'pip install crawler[render]' where pages are fetched)",
    )
    group.add_argument(
        "--render-wait",
        type=_flag_type(crawl_spec.render_wait),
        metavar="idle|SECONDS",
        help="after the page loads, wait until the network is idle (default) or this many"
        f" seconds (at most {MAX_RENDER_WAIT:g}) before reading it",
    )
    group.add_argument(
        "--render-media",
        action="store_true",
        help="let the browser load images, fonts and media (refused by default)",
    )


def spec_of(arguments: argparse.Namespace) -> CrawlSpec:
    """The crawl the flags of :func:`add_seeding` describe (each value argparse parsed,
    None or its default for a flag not given), made as any crawl is made
    (:meth:`CrawlSpec.from_options`): raises :class:`~crawler.crawl_spec.CrawlError`."""
    given = {name: value for name, value in vars(arguments).items() if name in OPTIONS}
    return CrawlSpec.from_options(arguments.urls, given)


def _flag_type(check: Callable[[str], T]) -> Callable[[str], T]:
    """An ``argparse`` type: ``check`` (:mod:`crawler.crawl_spec`'s, which the Python
    API checks its keywords by), its :class:`BadValue` said as a usage error."""

    def flag_type(value: str) -> T:
        try:
            return check(value)
        except BadValue as e:
            raise argparse.ArgumentTypeError(str(e)) from e

    flag_type.__name__ = flag_type.__qualname__ = check.__name__
    return flag_type


crawl_id = _flag_type(crawl_spec.crawl_id)
whole_number = _flag_type(crawl_spec.whole_number)
positive_int = _flag_type(crawl_spec.positive_int)
threads = _flag_type(crawl_spec.threads)
processes = _flag_type(crawl_spec.processes)
rate = _flag_type(crawl_spec.rate)
per_host = _flag_type(crawl_spec.per_host)
domain_name = _flag_type(crawl_spec.domain_name)
pattern = _flag_type(crawl_spec.pattern)
port = _flag_type(crawl_spec.port)
handler_name_argument = _flag_type(crawl_spec.handler)
user_agent = _flag_type(crawl_spec.user_agent)
http_url = _flag_type(crawl_spec.http_url)


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``--max-d`` is no ``--max-depth``), whose usage
    errors are one line and a pointer to ``--help``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        message += _closest_option(self, message)
        self.exit(2, f"{self.prog}: error: {message}\nSee '{self.prog} --help'.\n")


def _closest_option(parser: argparse.ArgumentParser, message: str) -> str:
    """For an unknown option, `` (did you mean --max-pages?)``: the closest one known to
    ``parser`` or its subcommands."""
    if not message.startswith("unrecognized arguments: "):
        return ""
    known = list(_option_strings(parser))
    for token in message.removeprefix("unrecognized arguments: ").split():
        name = token.partition("=")[0]
        if not name.startswith("-"):
            continue
        close = [o for o in known if o.lower() == name.lower()]
        close = close or difflib.get_close_matches(name, known, 1)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def _option_strings(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:  # argparse has no public list of its actions
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for subcommand in action.choices.values():
                yield from _option_strings(subcommand)


def add_seeding(parser: argparse.ArgumentParser, *, upstream: bool) -> None:
    """The URLs, the crawl options, and how the crawl runs: workers or ``--local``."""
    parser.add_argument("urls", metavar="url", nargs="*", type=http_url, help="an http(s) URL")
    add_arguments(parser, upstream=upstream)
    running = parser.add_argument_group("how the crawl runs")
    running.add_argument(
        "-i",
        "--input-file",
        metavar="FILE",
        help="also crawl the URLs of FILE, one a line (# comments and blank lines skipped;"
        " - for standard input), all checked before anything is sent",
    )
    running.add_argument(
        "--recrawl-from",
        type=Path,
        metavar="FILE",
        help="FILE holds an earlier crawl's records (-o): ask each page whether it changed"
        " (If-None-Match, If-Modified-Since) and follow an unchanged one's earlier links",
    )
    running.add_argument(
        "--recrawl-warc",
        type=Path,
        metavar="DIR",
        help="with --recrawl-from and --warc: the earlier crawl's WARC files, which an"
        " unchanged page's revisit record points at",
    )
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
    running.add_argument(
        "--threads",
        type=threads,
        help="--local's fetching threads in all, at most (default 8; fewer at once while the "
        "crawl is CPU-bound)",
    )
    running.add_argument(
        "--processes",
        type=processes,
        metavar="N",
        help="--local's crawling processes, sharing one frontier and the threads (default:"
        " one a core; one with --state, --dashboard or --render)",
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
        "--items",
        type=_flag_type(crawl_spec.items),
        metavar="FILE|URL",
        help="with --local or --wait: the handler's items, JSON lines (CSV for FILE.csv) or"
        " a PostgreSQL table (postgresql://user@host:port/db?table=NAME)",
    )
    running.add_argument(
        "--dashboard",
        type=port,
        metavar="PORT",
        help="with --wait or --local: serve the crawl's live page on 127.0.0.1:PORT meanwhile",
    )
    running.add_argument("-v", "--verbose", action="store_true", help="log every page")
