"""Crawl options: chosen at seeding, carried in every message of that crawl.

``crawl(url)`` with no options is upstream's crawl.  Options travel as the
``options`` keyword argument of each message, so crawls with different options
can share the same workers.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import math
import os
import re
import uuid
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from crawler.links.canonical import canonical_url, check_host_name
from crawler.links.cleaning import clean_href
from crawler.links.sites import site_of

#: Sent with every request unless ``--user-agent`` says otherwise.
DEFAULT_USER_AGENT = (
    "dramatiq-crawler/0.1 (+https://github.com/Bogdanp/dramatiq/tree/master/examples/crawler)"
)


@dataclass(frozen=True)
class CrawlOptions:
    """What one crawl may do.

    Parameters:
      crawl_id(str): Names the crawl; budgets and counters are kept per crawl.
      follow_relative(bool): Find links with an HTML tokenizer and resolve relative ones.
      allowed_domains(tuple): Hosts (and their subdomains) links may go to; empty: any.
      max_depth(int): Links are followed this many hops from a seed at most.
      max_pages(int): Pages this crawl fetches at most, across all workers.
      obey_robots(bool): Honour each host's robots.txt, and its Crawl-delay.
      max_rate(float): Requests per second per host at most, across all workers.
      user_agent(str): The User-Agent header sent with each request.
      include(tuple): Regular expressions; a link is followed only when one of them
        matches it (searched anywhere in the URL), when any is given.
      exclude(tuple): Regular expressions; a link one of them matches is not followed.
      allowed_sites(tuple): Registrable domains (eTLD+1) whose hosts links may go to,
        besides ``allowed_domains`` (``--same-site``).
      max_per_host(int): Fetches in flight per host at most, across all workers.
      max_pages_per_host(int): Pages this crawl fetches per host at most.
      sitemaps(bool): The seeds' sites' sitemaps were read for more seeds.
      breadth_first(bool): Shallow pages go before deeper ones (RabbitMQ priorities).
      warc(str): The directory where every response is kept in WARC files; a
        worker's ``CRAWLER_WARC_DIR`` takes its place.
      collect_records(bool): Workers send a record of each URL to the waiting seeder.
      batched_records(bool): The seeder reads records sent together as one message.
      records_without_links(bool): Those records leave out the page's links (the
        seeder writes no ``--output``).  Both are asked for by the seeder, so that a
        seeder from before them still gets what it reads.
    """

    crawl_id: str | None = None
    follow_relative: bool = False
    allowed_domains: tuple[str, ...] = field(default_factory=tuple)
    max_depth: int | None = None
    max_pages: int | None = None
    obey_robots: bool = False
    max_rate: float | None = None
    user_agent: str = DEFAULT_USER_AGENT
    include: tuple[str, ...] = field(default_factory=tuple)
    exclude: tuple[str, ...] = field(default_factory=tuple)
    allowed_sites: tuple[str, ...] = field(default_factory=tuple)
    max_per_host: int | None = None
    max_pages_per_host: int | None = None
    sitemaps: bool = False
    breadth_first: bool = False
    warc: str | None = None
    collect_records: bool = False
    batched_records: bool = False
    records_without_links: bool = False

    def to_message(self) -> dict[str, Any] | None:
        """The options as a message keyword argument: only what differs from upstream."""
        defaults = CrawlOptions()
        values = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(defaults, f.name)
        }
        for name in _LISTS.intersection(values):
            values[name] = list(values[name])
        return values or None

    @classmethod
    def from_message(cls, values: dict[str, Any] | None) -> CrawlOptions:
        if not values:
            return UPSTREAM
        values = {key: value for key, value in values.items() if key in _FIELDS}
        for name in _LISTS.intersection(values):
            values[name] = tuple(values[name])
        return cls(**values)

    def allows_url(self, url: str) -> bool:
        """Whether ``url`` is in the crawl's scope: its host allowed (:meth:`allows_host`),
        the URL matched by an ``--include`` pattern (when there are any) and by no
        ``--exclude`` pattern."""
        if not self.allows_host(url):
            return False
        if self.include and not any(p.search(url) for p in patterns(self.include)):
            return False
        return not any(p.search(url) for p in patterns(self.exclude))

    def allows_host(self, url: str) -> bool:
        """Whether ``url``'s host is in the crawl's domains or sites (any host when
        neither is set)."""
        if not (self.allowed_domains or self.allowed_sites):
            return True
        host = (urlsplit(url).hostname or "").rstrip(".")
        if any(host == domain or host.endswith("." + domain) for domain in self.allowed_domains):
            return True
        return bool(self.allowed_sites) and site_of(host) in self.allowed_sites


UPSTREAM = CrawlOptions()
#: The options a message may carry; others (from a newer seeder) are ignored.
_FIELDS = frozenset(f.name for f in fields(CrawlOptions))
#: The options that are lists in a message (JSON has no tuples).
_LISTS = frozenset(("allowed_domains", "include", "exclude", "allowed_sites"))


@lru_cache(maxsize=256)
def patterns(sources: tuple[str, ...]) -> list[re.Pattern[str]]:
    """``--include``/``--exclude`` patterns, compiled once per process."""
    return [re.compile(source) for source in sources]


#: What ``--allow-domain`` takes once IDNA-encoded: host name characters only.
_DOMAIN = re.compile(r"[a-z0-9_.-]+", re.ASCII)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The crawl options, the same for ``--local`` and for seeding workers."""
    group = parser.add_argument_group("crawl options (all off by default: upstream behaviour)")
    group.add_argument(
        "--follow-relative",
        action="store_true",
        help="find links with an HTML tokenizer, relative ones included",
    )
    group.add_argument(
        "--same-domain", action="store_true", help="stay on the hosts of the seed URLs"
    )
    group.add_argument(
        "--same-site",
        action="store_true",
        help="stay on the seeds' sites: their registrable domains (eTLD+1) and all their hosts",
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
    group.add_argument(
        "--obey-robots", action="store_true", help="honour robots.txt and its Crawl-delay"
    )
    group.add_argument(
        "--max-rate",
        type=positive_float,
        metavar="R",
        help="R requests per second per host at most, across all workers",
    )
    group.add_argument(
        "--max-per-host",
        type=positive_int,
        metavar="N",
        help="N fetches in flight per host at most, across all workers",
    )
    group.add_argument(
        "--user-agent", type=user_agent, default=DEFAULT_USER_AGENT, help="the User-Agent header"
    )
    group.add_argument(
        "--warc",
        type=warc_directory,
        metavar="DIR",
        help="keep every response in WARC files in DIR (workers: or their CRAWLER_WARC_DIR)",
    )


def from_arguments(
    arguments: argparse.Namespace,
    seeds: list[str],
    *,
    collect_records: bool = False,
    records_without_links: bool = False,
) -> CrawlOptions:
    """The options a seeding chose, under a new crawl id or the one ``--crawl-id`` names."""
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
        warc=arguments.warc,
        collect_records=collect_records,
        batched_records=collect_records,
        records_without_links=records_without_links,
        crawl_id=getattr(arguments, "crawl_id", None) or uuid.uuid4().hex,
    )
    return options


def crawl_id(value: str) -> str:
    """An ``argparse`` type: a crawl id as the seeder prints it (32 hex digits)."""
    if not re.fullmatch(r"[0-9a-f]{32}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a crawl id (32 hex digits)")
    return value


def whole_number(value: str) -> int:
    if not (value.isascii() and value.isdigit()):
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number")
    return int(value)


def positive_int(value: str) -> int:
    """An ``argparse`` type: a whole number above zero."""
    if not (value.isascii() and value.isdigit()) or int(value) == 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number above zero")
    return int(value)


def positive_float(value: str) -> float:
    """An ``argparse`` type: a finite number above zero (``nan``, ``inf`` and ``1e309``,
    which float() takes, would fail every page of the crawl)."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number above zero")
    return number


def domain_name(value: str) -> str:
    """An ``argparse`` type: a host name or IP address, spelled as canonical URLs spell
    hosts (lower case, IDNA, no trailing dot), so that it can match them."""
    domain = value.strip().lower().rstrip(".")
    try:
        if ":" in domain:  # an IPv6 address, with or without its brackets
            return str(ipaddress.IPv6Address(domain.strip("[]")))
        domain = domain.encode("idna").decode("ascii")
        if not _DOMAIN.fullmatch(domain):
            raise ValueError(f"{domain!r} has a character no host name has")
        check_host_name(domain)
    except ValueError as e:  # UnicodeError included
        raise argparse.ArgumentTypeError(f"{value!r} is not a domain name") from e
    return domain


def pattern(value: str) -> str:
    """An ``argparse`` type: a regular expression Python's ``re`` compiles."""
    try:
        re.compile(value)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a regular expression: {e}") from e
    return value


def warc_directory(value: str) -> str:
    """An ``argparse`` type: a directory to write WARC files in, made if missing, as an
    absolute path (workers on this machine write there)."""
    directory = Path(value).expanduser().absolute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "permission denied")
    except OSError as e:
        raise argparse.ArgumentTypeError(
            f"cannot write WARC files in {value!r}: {e.strerror or e}"
        ) from e
    return str(directory)


def user_agent(value: str) -> str:
    """An ``argparse`` type: a header value requests will send, or every request of the
    crawl would fail.  Spaces around it are dropped (requests refuses a leading one)."""
    if any((ord(char) < 32 and char != "\t") or ord(char) == 127 for char in value):
        raise argparse.ArgumentTypeError(f"{value!r} has a line break or control character")
    return value.strip()


def http_url(value: str) -> str:
    """An ``argparse`` type: an absolute http(s) URL, in its canonical form.

    Refused: another scheme, no host, a port that is not a number from 1 to 65535,
    a host name no resolver accepts, anything requests cannot send.
    """
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"{value!r} is not an http:// or https:// URL")
    try:
        if not parts.hostname:
            raise argparse.ArgumentTypeError(f"{value!r} has no host name")
        parts.port  # noqa: B018  (raises ValueError on a bad port)
        requests.Request("GET", value).prepare()
        return canonical_url(clean_href(value))  # port 0, impossible host names
    except (ValueError, requests.RequestException) as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a valid URL: {e}") from e
