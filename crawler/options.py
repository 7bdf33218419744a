"""Crawl options: chosen at seeding, carried in every message of that crawl.

``crawl(url)`` with no options is upstream's crawl.  Options travel as the
``options`` keyword argument of each message, so crawls with different options
can share the same workers.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from functools import cached_property, lru_cache
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import re2

from crawler.errors import InvalidMessage
from crawler.links.sites import site_of
from crawler.option_rules import DEFAULT_USER_AGENT, RE2_OPTIONS, quoted
from crawler.option_table import RULES

__all__ = ["DEFAULT_USER_AGENT", "RULES", "UPSTREAM", "CrawlOptions", "patterns", "quoted"]


@dataclass(frozen=True)
class CrawlOptions:
    """What one crawl may do.

    Each field is set by the option of :data:`crawler.option_table.TABLE` whose
    ``field`` it is, whose help says what it does, and checked by that row's rule; the
    seeder sets three more for what it reads of the workers
    (:data:`~crawler.option_table.SEEDER_FIELDS`):

    Parameters:
      collect_records(bool): Workers send a record of each URL to the waiting seeder.
      batched_records(bool): The seeder reads records sent together as one message.
      records_without_links(bool): Those records leave out the page's links (the
        seeder writes no ``--output``).  Both are asked for by the seeder, so that a
        seeder from before them still gets what it reads.

    Fields that differ from their option: ``allowed_domains`` (``--allow-domain``, and
    the seeds' hosts with ``--same-domain``), ``allowed_sites`` (the seeds' sites, with
    ``--same-site``), ``headers`` (``--header``), ``recrawl`` (``--recrawl-from`` given:
    the seeder kept the earlier crawl's records in the dedup store), ``warc`` (a worker's
    ``CRAWLER_WARC_DIR`` takes its place), ``cache`` and ``files`` (likewise, their
    ``CRAWLER_CACHE_DIR`` and ``CRAWLER_FILES_DIR``).
    """

    crawl_id: str | None = None
    follow_relative: bool = False
    allowed_domains: tuple[str, ...] = field(default_factory=tuple)
    max_depth: int | None = None
    max_pages: int | None = None
    obey_robots: bool = False
    auto_throttle: bool = False
    per_ip: bool = False
    max_rate: float | None = None
    user_agent: str = DEFAULT_USER_AGENT
    include: tuple[str, ...] = field(default_factory=tuple)
    exclude: tuple[str, ...] = field(default_factory=tuple)
    #: ``--accept``/``--reject``: comma-separated file-name suffixes or wildcard patterns.
    accept: tuple[str, ...] = field(default_factory=tuple)
    reject: tuple[str, ...] = field(default_factory=tuple)
    #: ``--no-parent``: the directories (``http://host/dir/``) links must be below.
    below: tuple[str, ...] = field(default_factory=tuple)
    allowed_sites: tuple[str, ...] = field(default_factory=tuple)
    max_per_host: int | None = None
    max_pages_per_host: int | None = None
    sitemaps: bool = False
    breadth_first: bool = False
    warc: str | None = None
    cache: str | None = None
    #: ``--files``: the directory the files of the crawl's items are downloaded to.
    files: str | None = None
    #: ``--markdown``: the directory of the pages' Markdown files.
    markdown: str | None = None
    #: ``--near-duplicates``: ``mark`` or ``skip`` the pages nearly like one seen before.
    near_duplicates: Literal["mark", "skip"] | None = None
    collect_records: bool = False
    batched_records: bool = False
    records_without_links: bool = False
    handler: str | None = None
    headers: tuple[str, ...] = field(default_factory=tuple)
    cookies: bool = True
    proxy: str | None = None
    timeout: float | None = None
    handler_timeout: float | None = None
    retries: int | None = None
    auth_env: tuple[str, ...] = field(default_factory=tuple)
    render: bool | str = False
    render_wait: float | None = None
    render_media: bool = False
    recrawl: bool = False
    follow: Literal["all", "handlers"] = "all"
    pipelines: tuple[str, ...] = field(default_factory=tuple)

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
    def from_message(cls, values: Any) -> CrawlOptions:
        """The options a message carries, each checked by its :data:`RULES` entry; an
        option no rule names (from a newer seeder) is ignored.  Raises
        :class:`~crawler.errors.InvalidMessage` naming the first option that fails."""
        if values is None:
            return UPSTREAM
        if not isinstance(values, dict):
            raise InvalidMessage(f"message options must be a JSON object, got {quoted(values)}")
        # A crawl's messages carry the same options: checked once, the value then reused.
        seen = repr(values)
        known = _CHECKED.get(seen)
        if known is not None:
            return known
        options = cls._checked(values)
        with _CHECKED_LOCK:
            if len(_CHECKED) >= CHECKED_CACHE:
                _CHECKED.pop(next(iter(_CHECKED)))
            _CHECKED[seen] = options
        return options

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> CrawlOptions:
        checked: dict[str, Any] = {}
        for name, value in values.items():
            rule = RULES.get(name)
            if rule is None:
                continue
            if value is None and getattr(UPSTREAM, name) is None:  # an option left unset
                checked[name] = None
                continue
            checked[name] = rule.apply("message options", name, value)
        return cls(**checked) if checked else UPSTREAM

    @classmethod
    def readable_from_message(cls, values: Any) -> CrawlOptions:
        """What can be read of a message's options that may not pass the check: each
        option that passes its rule, upstream's value for the others (the bookkeeping of
        a refused message still finds its crawl)."""
        if not isinstance(values, dict):
            return UPSTREAM
        with contextlib.suppress(InvalidMessage):
            return cls.from_message(values)  # most often they pass: checked once, kept
        checked: dict[str, Any] = {}
        for name, value in values.items():
            rule = RULES.get(name)
            if rule is not None and value is not None:
                with contextlib.suppress(ValueError):
                    checked[name] = rule.check(value)
        return cls(**checked)

    def allows_url(self, url: str) -> bool:
        """Whether ``url`` is in the crawl's scope: its host allowed (:meth:`allows_host`),
        the URL below one of the seeds' directories (``--no-parent``), matched by an
        ``--include`` pattern (when there are any) and by no ``--exclude`` pattern, its
        file name accepted (``--accept``, ``--reject``: :func:`file_name_allowed`)."""
        if not self.allows_host(url):
            return False
        if self.below and not url.startswith(self.below):
            return False
        if self.include and not any(p.search(url) for p in patterns(self.include)):
            return False
        if (self.accept or self.reject) and not file_name_allowed(url, self.accept, self.reject):
            return False
        return not any(p.search(url) for p in patterns(self.exclude))

    def allows_host(self, url: str) -> bool:
        """Whether ``url``'s host is in the crawl's domains or sites (any host when
        neither is set)."""
        if not (self.allowed_domains or self.allowed_sites):
            return True
        # Most links of a crawl are on a few hosts: each one's answer is kept.
        _, slashes, rest = url.partition("://")
        netloc = rest.partition("/")[0].partition("?")[0]
        if not slashes or any(c in netloc for c in "#\\ \t\r\n"):  # not as canonical URLs are
            return self._allows_netloc(url)
        allowed = self._hosts.get(netloc)
        if allowed is None:
            allowed = self._allows_netloc(url)
            if len(self._hosts) < HOSTS_CACHE:
                self._hosts[netloc] = allowed
        return allowed

    @cached_property
    def _hosts(self) -> dict[str, bool]:
        """:meth:`allows_host`'s answers, by the URLs' ``host:port`` (and user info)."""
        return {}

    def _allows_netloc(self, url: str) -> bool:
        host = (urlsplit(url).hostname or "").rstrip(".")
        if any(host == domain or host.endswith("." + domain) for domain in self.allowed_domains):
            return True
        return bool(self.allowed_sites) and site_of(host) in self.allowed_sites


UPSTREAM = CrawlOptions()
#: Checked options kept by their message's spelling (:meth:`CrawlOptions.from_message`).
CHECKED_CACHE = 64
_CHECKED: dict[str, CrawlOptions] = {}
_CHECKED_LOCK = threading.Lock()
#: Hosts whose answer each options value keeps (:meth:`CrawlOptions.allows_host`).
HOSTS_CACHE = 4096
#: The options that are lists in a message (JSON has no tuples).
_LISTS = frozenset(
    f.name for f in fields(CrawlOptions) if isinstance(getattr(UPSTREAM, f.name), tuple)
)


@lru_cache(maxsize=256)
def patterns(sources: tuple[str, ...]) -> list[Any]:
    """``--include``/``--exclude`` patterns, compiled once per process by RE2."""
    return [re2.compile(source, RE2_OPTIONS) for source in sources]


#: The suffixes of a page's file name, which ``--accept`` follows whatever it lists (wget
#: follows ``.html`` and ``.htm`` only; a site's ``.php`` pages hold links as well).
PAGE_SUFFIXES = frozenset(
    ["html", "htm", "xhtml", "shtml", "php", "asp", "aspx", "jsp", "cgi", "pl", "cfm"]
)


def file_name_allowed(url: str, accept: tuple[str, ...], reject: tuple[str, ...]) -> bool:
    """Whether ``url``'s file name (the last part of its path, percent-decoded, lower
    case) passes wget's ``-A``/``-R`` lists: none of ``reject``'s items matches it, and
    one of ``accept``'s does (when there are any) or it is a page's (no suffix, or one of
    :data:`PAGE_SUFFIXES`: the pages that lead to the files are crawled for their
    links).  An item with ``*``, ``?`` or ``[`` is a wildcard pattern of the whole
    name, any other a suffix of it, as wget reads them."""
    name = _file_name(url)
    if reject and _matches(name, reject):
        return False
    if not accept:
        return True
    suffix = name.rpartition(".")[2] if "." in name else ""
    return not suffix or suffix in PAGE_SUFFIXES or _matches(name, accept)


def _file_name(url: str) -> str:
    path = urlsplit(url).path
    return unquote(path.rpartition("/")[2]).lower()


def _matches(name: str, lists: tuple[str, ...]) -> bool:
    return any(
        fnmatchcase(name, item) if any(c in item for c in "*?[") else name.endswith(item)
        for items in lists
        for item in items.split(",")
    )
