"""Every option of a crawl, declared once: :data:`TABLE`, a row an option.

A row says an option's name (its keyword in Python, ``max_pages``), its flags
(``--max-pages``), the check its value meets (:mod:`crawler.option_rules`), its
default, its help and, when its value travels in the crawl's messages, the
:class:`~crawler.options.CrawlOptions` field it sets and the rule a worker checks that
field by.  From the table are made:

- the flags of ``crawler crawl`` and of ``python -m crawler.example``
  (:mod:`crawler.cli.parser`), and the keys of a ``--config`` file and of ``-s``
  (:mod:`crawler.cli.settings`): a long flag without its dashes;
- the keyword arguments of ``Crawl(urls, ...)`` and ``seed(urls, ...)`` (:mod:`crawler.api`),
  checked by :meth:`crawler.crawl_spec.CrawlSpec.from_options`, and typed for a user's
  mypy by :class:`Keywords`, which ``python -m crawler.option_table`` writes from the table
  (a test checks that the two agree);
- the workers' check of a message's options (:data:`RULES`).

No argparse here: a worker imports this module to check its messages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Literal, TypedDict

from crawler import option_rules as rules
from crawler.option_rules import DEFAULT_USER_AGENT, MAX_RENDER_WAIT, Rule

#: What kind of flag an option is.  ``value``: one value; ``list``: repeatable, a list
#: of values; ``switch``: on when given; ``on``: a switch ``crawler crawl`` turns on by
#: default (``--x``/``--no-x``, all four off with ``--upstream``), off for upstream's
#: seeder; ``optional``: on when given alone, or one of a few words (``--render auto``),
#: never the URL after it.
Kind = Literal["value", "list", "switch", "on", "optional"]


@dataclass(frozen=True)
class Option:
    """One option of a crawl.

    Parameters:
      name(str): Its keyword in Python (``max_pages``), and its flag's ``dest``.
      flags(tuple): Its flags, short ones first (``-o``, ``--output``); the last one,
        without its dashes, is its settings key (``output``).
      check(Callable): Reads the flag's text or a keyword's value and returns the value
        (:mod:`crawler.option_rules`), or raises :class:`~crawler.option_rules.BadValue`.
      typed(str): The keyword's type, as :class:`Keywords` spells it.
      help(str): What it does, as ``--help`` says it.
      kind(str): :data:`Kind`.
      default(Any): Its value when not given (None: none), for ``crawler crawl``.
      field(str): The :class:`~crawler.options.CrawlOptions` field it sets in messages
        (None: it says how the crawl runs, on this machine).
      rule(Rule): The rule a worker checks that field by.
      as_is(bool): The field is the value as checked (a list made a tuple); else the
        crawl makes the field from it and other options (:mod:`crawler.option_checks`).
      metavar(str): The flag's value in ``--help``.
      group(str): ``crawl`` (what the crawl does) or ``run`` (how the crawl runs).
      crawl_note(str): What ``crawler crawl``'s help adds (its defaults differ from
        upstream's seeder's).
      crawl_only(bool): Only ``crawler crawl`` has it, not upstream's seeder.
      words(tuple): The values an ``optional`` flag takes after it (``--render auto``).
    """

    name: str
    flags: tuple[str, ...]
    check: Callable[[Any], Any]
    typed: str
    help: str
    kind: Kind = "value"
    default: Any = None
    field: str | None = None
    rule: Rule[Any] | None = None
    as_is: bool = True
    metavar: str | None = None
    group: Literal["crawl", "run"] = "crawl"
    crawl_note: str = ""
    crawl_only: bool = False
    words: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        """Its long flag: ``--max-pages``."""
        return self.flags[-1]

    @property
    def setting(self) -> str:
        """Its key in a ``--config`` file and in ``-s``: ``max-pages``."""
        return self.flag.removeprefix("--")

    @property
    def switch(self) -> bool:
        """Whether it is a switch: given alone, without a value."""
        return self.kind in ("switch", "on")


_DEFAULT_ON = " (default; --upstream: off)"

#: Every option of a crawl, in the order of ``--help``.
TABLE: tuple[Option, ...] = (
    # which links the crawl follows
    Option("upstream", ("--upstream",), rules.switch, "bool", "upstream's crawl: its regex for"
           " links, any site, robots.txt ignored, no auto-throttle (each can be turned on"
           " again)",
           kind="switch", crawl_only=True),
    Option("follow_relative", ("--follow-relative",), rules.switch, "bool", "find links with an"
           " HTML parser (Lexbor's, which builds the tree a browser does), relative ones"
           " included", kind="on", default=True, field="follow_relative", rule=rules.FLAG,
           as_is=False, crawl_note=_DEFAULT_ON),
    Option("same_domain", ("--same-domain",), rules.switch, "bool",
           "stay on the hosts of the seed URLs", kind="switch", default=False),
    Option("same_site", ("--same-site",), rules.switch, "bool", "stay on the seeds' sites:"
           " their registrable domains (eTLD+1) and all their hosts", kind="on", default=True,
           field="allowed_sites", rule=rules.DOMAINS, as_is=False,
           crawl_note=" (default unless --same-domain or --allow-domain)"),
    Option("allow_domain", ("--allow-domain",), rules.domain_name, "str | Sequence[str]",
           "also follow links to DOMAIN and its subdomains (repeatable)", kind="list",
           default=(), field="allowed_domains", rule=rules.DOMAINS, as_is=False,
           metavar="DOMAIN"),
    Option("no_parent", ("--no-parent",), rules.switch, "bool", "never go up: follow only links"
           " below a seed's directory (its host, its path up to the last /), as wget's -np",
           kind="switch", default=False, field="below", rule=rules.PARENTS, as_is=False),
    Option("include", ("--include",), rules.pattern, "str | Sequence[str]", "follow only links"
           " REGEX matches (anywhere in the URL; repeatable: any of them)", kind="list",
           default=(), field="include", rule=rules.PATTERNS, metavar="REGEX"),
    Option("exclude", ("--exclude",), rules.pattern, "str | Sequence[str]",
           "never follow links REGEX matches (repeatable)", kind="list", default=(),
           field="exclude", rule=rules.PATTERNS, metavar="REGEX"),
    Option("accept", ("-A", "--accept"), rules.suffixes, "str | Sequence[str]", "follow only"
           " links to file names ending in one of these suffixes (pdf,zip) or matching these"
           " wildcard patterns, and pages (file names without a suffix or ending in .html,"
           " .php and the like), as wget's -A (repeatable)", kind="list", default=(),
           field="accept", rule=rules.SUFFIXES, metavar="LIST"),
    Option("reject", ("-R", "--reject"), rules.suffixes, "str | Sequence[str]", "never follow"
           " links to file names ending in one of these suffixes (jpg,png) or matching these"
           " wildcard patterns, as wget's -R (repeatable)", kind="list", default=(),
           field="reject", rule=rules.SUFFIXES, metavar="LIST"),
    Option("follow", ("--follow",), rules.follow, 'Literal["all", "handlers"]', "all: follow"
           " every link of every page (default); handlers: only the links the page handler"
           " asks for (its requests, page.enqueue_links()), and the seeds (needs --handler)",
           default=rules.FOLLOW_ALL, field="follow", rule=rules.FOLLOW, metavar="all|handlers"),
    # its bounds and order
    Option("max_depth", ("--max-depth",), rules.whole_number, "int", "seeds are depth 0",
           field="max_depth", rule=rules.WHOLE, metavar="N"),
    Option("max_pages", ("--max-pages",), rules.positive_int, "int", "fetch N pages at most",
           field="max_pages", rule=rules.ABOVE_ZERO, metavar="N"),
    Option("max_pages_per_host", ("--max-pages-per-host",), rules.positive_int, "int",
           "fetch N pages of each host at most", field="max_pages_per_host",
           rule=rules.ABOVE_ZERO, metavar="N"),
    Option("sitemaps", ("--sitemaps",), rules.switch, "bool", "also seed from the seeds'"
           " sitemaps (robots.txt's Sitemap: lines, else /sitemap.xml)", kind="switch",
           default=False, field="sitemaps", rule=rules.FLAG),
    Option("breadth_first", ("--breadth-first",), rules.switch, "bool", "fetch shallow pages"
           " before deeper ones (RabbitMQ message priorities)", kind="switch", default=False,
           field="breadth_first", rule=rules.FLAG),
    # how pages are fetched, and what is done with them
    Option("obey_robots", ("--obey-robots",), rules.switch, "bool",
           "honour robots.txt and its Crawl-delay", kind="on", default=True,
           field="obey_robots", rule=rules.FLAG, as_is=False, crawl_note=_DEFAULT_ON),
    Option("auto_throttle", ("--auto-throttle",), rules.switch, "bool", "pace each host by"
           " its server, for every worker: by its latency (one request in flight on average),"
           " slower at once on a 429, a 503 or a failed connection, faster again slowly;"
           " and 2 requests in flight a host at most unless --max-per-host says otherwise",
           kind="on", default=True, field="auto_throttle", rule=rules.FLAG, as_is=False,
           crawl_note=_DEFAULT_ON),
    Option("per_ip", ("--per-ip",), rules.switch, "bool", "pace the hosts on one IP address"
           " together: their turns, delay, places in flight and waits are the address's",
           kind="switch", default=False, field="per_ip", rule=rules.FLAG),
    Option("max_rate", ("--max-rate",), rules.rate, "float", "R requests per second per host"
           " at most, across all workers", field="max_rate", rule=rules.RATE, metavar="R"),
    Option("max_per_host", ("--max-per-host",), rules.per_host, "int", "N fetches in flight"
           " per host at most, across all workers", field="max_per_host", rule=rules.PER_HOST,
           metavar="N"),
    Option("user_agent", ("--user-agent",), rules.user_agent, "str", "the User-Agent header",
           default=DEFAULT_USER_AGENT, field="user_agent", rule=rules.HEADER_VALUE),
    Option("handler", ("--handler",), rules.handler, "str", "call this page handler on every"
           " HTML page (workers must load it: 'crawler worker --handler'); what it returns goes"
           " in the page's record", field="handler", rule=rules.HANDLER,
           metavar="MODULE:FUNCTION"),
    Option("pipeline", ("--pipeline",), rules.pipeline, "str | Sequence[str]", "pass each item"
           " through this item pipeline, after the handler's own (repeatable, in order;"
           " workers must load it: 'crawler worker --pipeline')", kind="list", default=(),
           field="pipelines", rule=rules.PIPELINES, metavar="MODULE:FUNCTION"),
    Option("handler_timeout", ("--handler-timeout",), rules.handler_timeout, "float",
           "the page handler may take this long on a page (default: the workers'"
           " CRAWLER_HANDLER_TIMEOUT, 1.5; at most what the 10 s time limit leaves after the"
           " fetch's deadline)", field="handler_timeout", rule=rules.HANDLER_TIMEOUT,
           metavar="SECONDS"),
    Option("warc", ("--warc",), rules.directory, "str | PathLike[str]", "keep every response"
           " in WARC files in DIR (with workers: DIR under their CRAWLER_WARC_DIR)",
           field="warc", rule=rules.DIRECTORY, as_is=False, metavar="DIR"),
    Option("cache", ("--cache",), rules.directory, "str | PathLike[str]", "keep every response"
           " in DIR and take it from there, with no request, when this or a later crawl asks"
           " again (robots.txt is always fetched; with workers: DIR under their"
           " CRAWLER_CACHE_DIR)", field="cache", rule=rules.DIRECTORY, as_is=False,
           metavar="DIR"),
    Option("files", ("--files",), rules.directory, "str | PathLike[str]", "download the files"
           " the handler's items name (file_urls, crawler.File) into DIR, each once a crawl,"
           " named by its content's SHA-256, and write each item with its files' paths,"
           " digests and types (with workers: DIR under their CRAWLER_FILES_DIR)",
           field="files", rule=rules.DIRECTORY, as_is=False, metavar="DIR"),
    Option("markdown", ("--markdown",), rules.directory, "str | PathLike[str]", "write each"
           " HTML page's main content as Markdown, a file a page in DIR named by its URL,"
           " under front matter that says where it came from (with workers: DIR under their"
           " CRAWLER_MARKDOWN_DIR)", field="markdown", rule=rules.DIRECTORY, as_is=False,
           metavar="DIR"),
    Option("near_duplicates", ("--near-duplicates",), rules.near_duplicates,
           'Literal["mark", "skip"]', "find the pages whose main text is nearly that of a page"
           " seen before in the crawl (SimHash, 4 bits of 64): mark says which in the record"
           " (near_duplicate_of); skip also leaves it out of --markdown and the items and"
           " follows none of its links", field="near_duplicates", rule=rules.NEAR_DUPLICATES,
           metavar="mark|skip"),
    # the crawl's own HTTP settings: kept to its requests, never another crawl's
    Option("header", ("--header",), rules.header, "str | Sequence[str]",
           "send this header with every request of the crawl (repeatable)", kind="list",
           default=(), field="headers", rule=rules.HEADERS, metavar="'NAME: VALUE'"),
    Option("cookies", ("--cookies",), rules.cookies, 'bool | Literal["on", "off"]',
           "keep the cookies the crawl's sites set, within this crawl (default on)",
           default=True, field="cookies", rule=rules.FLAG, metavar="on|off"),
    Option("proxy", ("--proxy",), rules.proxy, "str", "send every request of the crawl through"
           " this http(s) proxy", field="proxy", rule=rules.PROXY, metavar="URL"),
    Option("timeout", ("--timeout",), rules.timeout, "float", "a fetch may take this long at"
           " most (below the workers' own deadline)", field="timeout", rule=rules.TIMEOUT,
           metavar="SECONDS"),
    Option("retries", ("--retries",), rules.retries, "int", "retry a failed fetch N times at"
           " most (0 to 3; default 3)", field="retries", rule=rules.RETRIES, metavar="N"),
    Option("auth_env", ("--auth-env",), rules.auth_env, "str | Sequence[str]",
           "HTTP Basic credentials for HOST, 'user:password' in the workers' variable"
           " CRAWLER_AUTH_NAME (repeatable; no secret is put in a message)", kind="list",
           default=(), field="auth_env", rule=rules.AUTH_ENV, metavar="HOST=CRAWLER_AUTH_NAME"),
    # pages loaded in headless Chromium, their links read from the rendered page
    Option("render", ("--render",), rules.render, 'bool | Literal["all", "auto"]', "load each"
           " page in headless Chromium and read links from the rendered page (needs Chromium"
           " and 'pip install crawler[render]' where pages are fetched); --render auto: only"
           " the pages that need it, learned from samples of each kind of page",
           kind="optional", default=False, field="render", rule=rules.RENDER,
           metavar="auto", words=(rules.RENDER_ALL, rules.RENDER_AUTO)),
    Option("render_wait", ("--render-wait",), rules.render_wait, 'float | Literal["idle"]',
           "after the page loads, wait until the network is idle (default) or this many"
           f" seconds (at most {MAX_RENDER_WAIT:g}) before reading it", field="render_wait",
           rule=rules.RENDER_WAIT, metavar="idle|SECONDS"),
    Option("render_media", ("--render-media",), rules.switch, "bool", "let the browser load"
           " images, fonts and media (refused by default)", kind="switch", default=False,
           field="render_media", rule=rules.FLAG),
    # how the crawl runs
    Option("input_file", ("-i", "--input-file"), rules.seed_input, "str | PathLike[str]",
           "also crawl the URLs of FILE, one a line (# comments and blank lines skipped;"
           " - for standard input), all checked before anything is sent", metavar="FILE",
           group="run"),
    Option("recrawl_from", ("--recrawl-from",), rules.path, "str | PathLike[str]",
           "FILE holds an earlier crawl's records (--records): ask each page whether it changed"
           " (If-None-Match, If-Modified-Since) and follow an unchanged one's earlier links",
           field="recrawl", rule=rules.FLAG, as_is=False, metavar="FILE", group="run"),
    Option("recrawl_warc", ("--recrawl-warc",), rules.path, "str | PathLike[str]",
           "with --recrawl-from and --warc: the earlier crawl's WARC files, which an"
           " unchanged page's revisit record points at", metavar="DIR", group="run"),
    Option("wait", ("--wait",), rules.switch, "bool", "workers' crawl: show its progress"
           " until it ends", kind="switch", default=False, group="run"),
    Option("crawl_id", ("--crawl-id",), rules.crawl_id, "str", "add the URLs to this crawl"
           " (its claims, counters and budget), not a new one", field="crawl_id",
           rule=rules.CRAWL_ID, as_is=False, metavar="CRAWL_ID", group="run"),
    Option("workers", ("--workers",), rules.switch, "bool", "hand the crawl to the workers"
           " ('crawler worker', on any machines) and return its id; with --wait, follow it to"
           " its end. Without it, crawler crawl crawls in this process", kind="switch",
           default=False, group="run", crawl_only=True),
    Option("local", ("--local",), rules.switch, "bool", "crawl in this process until nothing"
           " is left (crawler crawl's default)", kind="switch", default=False, group="run"),
    Option("threads", ("--threads",), rules.threads, "int", "--local's fetching threads in"
           " all, at most (default 8; fewer at once while the crawl is CPU-bound)",
           metavar="THREADS", group="run"),
    Option("processes", ("--processes",), rules.processes, "int", "--local's crawling"
           " processes, sharing one frontier and the threads (default: one a core; one with"
           " --state, --dashboard or --render)", metavar="N", group="run"),
    Option("state", ("--state",), rules.path, "str | PathLike[str]", "with --local: keep the"
           " crawl on disk in DIR; after an interruption, the same command carries on where it"
           " stopped", metavar="DIR", group="run"),
    Option("output", ("-o", "--output"), rules.feed, "str | PathLike[str]", "with --local or"
           " --wait: the crawl's feed: the handler's items as it made them (without"
           " --handler: a record per URL); JSON lines, one JSON array for FILE.json, CSV for"
           " FILE.csv, - for standard output, or (items) a PostgreSQL table"
           " (postgresql://user@host:port/db?table=NAME)", metavar="FILE|URL", group="run"),
    Option("records", ("--records",), rules.path, "str | PathLike[str]", "with --local or"
           " --wait: a record per URL, also with --handler; JSON lines (one JSON array for"
           " FILE.json, CSV for FILE.csv; - for standard output)", metavar="FILE",
           group="run"),
    Option("items", ("--items",), rules.items, "str", "with --local or --wait: the handler's"
           " items, each in an envelope saying where it came from (crawl_id, url, index):"
           " JSON lines (CSV for FILE.csv) or a PostgreSQL table", metavar="FILE|URL",
           group="run"),
    Option("dashboard", ("--dashboard",), rules.port, "int", "with --wait or --local: serve"
           " the crawl's live page on 127.0.0.1:PORT meanwhile", metavar="PORT", group="run"),
    Option("stats", ("--stats",), rules.path, "str | PathLike[str]", "with --local or --wait:"
           " the crawl's statistics at its end, one JSON document (pages by outcome and status,"
           " bytes, retries, items, the busiest hosts, fetch-time percentiles; - for standard"
           " output)", metavar="FILE", group="run"),
    Option("verbose", ("-v", "--verbose"), rules.switch, "bool", "log every page (--log-level"
           " INFO)", kind="switch", default=False, group="run"),
    Option("log_level", ("-L", "--log-level"), rules.log_level, "str", "log lines"
           " of LEVEL and above: DEBUG, INFO (every page), WARNING (the default: what"
           " needs a person: failures, refusals, a host that throttles) or ERROR",
           metavar="LEVEL", group="run"),
    Option("quiet", ("-q", "--quiet"), rules.switch, "bool", "no progress line, and only"
           " errors logged (--log-level ERROR); the summary is still said", kind="switch",
           default=False, group="run"),
    Option("log_file", ("--log-file",), rules.path, "str | PathLike[str]", "write the log"
           " lines to FILE (added to) instead of standard error", metavar="FILE",
           group="run"),
)  # fmt: skip

#: Each option by its name.
BY_NAME: dict[str, Option] = {option.name: option for option in TABLE}

#: The message fields the seeder sets itself, for what it will read of the workers
#: (``--wait``, ``seed(records=True)``): no flag, no keyword, each with its rule.
SEEDER_FIELDS: dict[str, Rule[Any]] = {
    "collect_records": rules.FLAG,
    "batched_records": rules.FLAG,
    "records_without_links": rules.FLAG,
}

#: Each message option's rule, by its :class:`~crawler.options.CrawlOptions` field: a
#: message's options are checked by these and nothing else
#: (:meth:`~crawler.options.CrawlOptions.from_message`).
RULES: dict[str, Rule[Any]] = {
    **{option.field: option.rule for option in TABLE if option.field and option.rule},
    **SEEDER_FIELDS,
}

#: The keywords :func:`crawler.api.seed` and :class:`crawler.api.Crawl` name themselves
#: (typed there), left out of :class:`Keywords`.
API_OWN = ("handler", "threads", "processes", "state", "output", "records")


# Written by `python -m crawler.option_table` from TABLE; tests/test_option_table.py
# checks that the two agree.
class Keywords(TypedDict, total=False):
    """The options ``Crawl(urls, **keywords)`` and ``seed(urls, **keywords)`` take, typed:
    a user's mypy refuses ``max_pages="x"``.  None is an option not given."""

    upstream: bool | None
    follow_relative: bool | None
    same_domain: bool | None
    same_site: bool | None
    allow_domain: str | Sequence[str] | None
    no_parent: bool | None
    include: str | Sequence[str] | None
    exclude: str | Sequence[str] | None
    accept: str | Sequence[str] | None
    reject: str | Sequence[str] | None
    follow: Literal["all", "handlers"] | None
    max_depth: int | None
    max_pages: int | None
    max_pages_per_host: int | None
    sitemaps: bool | None
    breadth_first: bool | None
    obey_robots: bool | None
    auto_throttle: bool | None
    per_ip: bool | None
    max_rate: float | None
    max_per_host: int | None
    user_agent: str | None
    pipeline: str | Sequence[str] | None
    handler_timeout: float | None
    warc: str | PathLike[str] | None
    cache: str | PathLike[str] | None
    files: str | PathLike[str] | None
    markdown: str | PathLike[str] | None
    near_duplicates: Literal["mark", "skip"] | None
    header: str | Sequence[str] | None
    cookies: bool | Literal["on", "off"] | None
    proxy: str | None
    timeout: float | None
    retries: int | None
    auth_env: str | Sequence[str] | None
    render: bool | Literal["all", "auto"] | None
    render_wait: float | Literal["idle"] | None
    render_media: bool | None
    input_file: str | PathLike[str] | None
    recrawl_from: str | PathLike[str] | None
    recrawl_warc: str | PathLike[str] | None
    wait: bool | None
    crawl_id: str | None
    workers: bool | None
    local: bool | None
    items: str | None
    dashboard: int | None
    stats: str | PathLike[str] | None
    verbose: bool | None
    log_level: str | None
    quiet: bool | None
    log_file: str | PathLike[str] | None


def keywords_source() -> str:
    """The body of :class:`Keywords`, as the table says it."""
    return "".join(
        f"    {option.name}: {option.typed} | None\n"
        for option in TABLE
        if option.name not in API_OWN
    )


if __name__ == "__main__":
    sys.stdout.write(keywords_source())
