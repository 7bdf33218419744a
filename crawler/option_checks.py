"""What a crawl's options mean together: the message options (:func:`crawl_options`)
made from the options given, one by one checked already, and the pairs refused.

Most options set their message field as they are (the rows of
:data:`crawler.option_table.TABLE` with ``as_is``); the few here are made from
several: the scope (``--same-domain``, ``--same-site``, ``--allow-domain`` and the
seeds), the switches ``crawler crawl`` turns on, ``--warc`` (here or the workers'),
``--recrawl-from`` and the crawl id.  No argparse here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from crawler.errors import InvalidMessage
from crawler.links.sites import site_of
from crawler.option_rules import (
    FOLLOW_HANDLERS,
    MAX_PARENTS,
    BadValue,
    warc_directory,
    warc_name,
)
from crawler.option_table import TABLE
from crawler.options import CrawlOptions


class CrawlError(ValueError):
    """Options, URLs or a handler the crawler refuses, in the command's words."""


#: The switches ``crawler crawl`` turns on unless told otherwise (``upstream``: off).
CRAWLER_DEFAULTS = tuple(option.name for option in TABLE if option.kind == "on")
#: A host's requests in flight at most when the crawl is paced by its servers
#: (``--auto-throttle``, ``crawler crawl``'s default) and ``--max-per-host`` is not
#: given: 2, HTTP/1.1's first advice to a client (RFC 2616, 8.1.4: "SHOULD NOT maintain
#: more than 2 connections with any server"), between Heritrix's 1 a host and Scrapy's
#: 8 a domain; counted across every worker, as ``--max-per-host`` is.
POLITE_PER_HOST = 2
#: Options that make no sense together: refused, naming both.
CONTRADICTIONS = (
    ("local", "wait"), ("local", "crawl_id"), ("verbose", "log_level"), ("quiet", "verbose"),
    ("quiet", "log_level"),
)  # fmt: skip
#: Options that work with ``--render`` only.
NEED_RENDER = ("render_wait", "render_media")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def scope(
    seeds: Iterable[str], given: Mapping[str, Any]
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


def parents(seeds: Iterable[str]) -> tuple[str, ...]:
    """``--no-parent``'s directories: each seed's URL up to the last ``/`` of its path
    (``https://example.com/docs/`` for ``https://example.com/docs/intro.html``), each
    once; a :class:`CrawlError` past :data:`~crawler.option_rules.MAX_PARENTS` of them
    (every message of the crawl carries them)."""
    found: dict[str, None] = {}
    for url in seeds:
        split = urlsplit(url)
        directory = split.path[: split.path.rfind("/") + 1] or "/"
        found[f"{split.scheme}://{split.netloc}{directory}"] = None
        if len(found) > MAX_PARENTS:
            raise CrawlError(
                f"--no-parent: the seeds are in more than {MAX_PARENTS} directories; give"
                " --include patterns instead"
            )
    return tuple(found)


def crawl_options(
    seeds: Iterable[str],
    given: Mapping[str, Any],
    *,
    collect_records: bool,
    records_without_links: bool,
) -> CrawlOptions:
    """The options the crawl's messages carry, checked as workers check a message's.

    ``crawler crawl``'s switches not given are on, unless ``upstream``; ``same_site``
    is off with ``same_domain`` or ``allow_domain``.  With ``local`` ``warc`` (and
    ``cache``, ``files``) names a directory here, else one under the workers'
    ``CRAWLER_WARC_DIR`` (``CRAWLER_CACHE_DIR``, ``CRAWLER_FILES_DIR``).  ``render_wait``
    (seconds: ``idle`` is the default) and ``render_media`` need ``render``; ``follow``
    ``handlers`` needs ``handler``."""
    on, domains, sites = scope(seeds, given)
    warc, cache = _directory(given, "warc"), _directory(given, "cache")
    files, markdown = _directory(given, "files"), _directory(given, "markdown")
    for name in NEED_RENDER:
        if given.get(name) and not given.get("render", False):
            raise CrawlError(f"{_flag(name)} works with --render only")
    if given.get("pipeline") and given.get("handler") is None:
        raise CrawlError("--pipeline works with --handler only: the items are its")
    if given.get("files") is not None and given.get("handler") is None:
        raise CrawlError("--files works with --handler only: the files are those its items name")
    if given.get("follow") == FOLLOW_HANDLERS and given.get("handler") is None:
        raise CrawlError(
            f"--follow {FOLLOW_HANDLERS} works with --handler only: it follows what the"
            " handler asks"
        )
    fields: dict[str, Any] = {
        option.field: _as_message(given.get(option.name, option.default))
        for option in TABLE
        if option.field is not None and option.as_is
    }
    if on["auto_throttle"] and given.get("max_per_host") is None:
        fields["max_per_host"] = POLITE_PER_HOST
    options = CrawlOptions(
        **fields,
        follow_relative=on["follow_relative"],
        obey_robots=on["obey_robots"],
        auto_throttle=on["auto_throttle"],
        allowed_domains=tuple(domains),
        allowed_sites=tuple(sites),
        below=parents(seeds) if given.get("no_parent") else (),
        warc=warc,
        cache=cache,
        files=files,
        markdown=markdown,
        recrawl="recrawl_from" in given,
        crawl_id=given.get("crawl_id") or uuid.uuid4().hex,
        collect_records=collect_records,
        batched_records=collect_records,
        records_without_links=records_without_links,
    )
    try:  # what workers will check: the same code, so the seeder never sends what they refuse
        CrawlOptions.from_message(options.to_message())
    except InvalidMessage as e:
        raise CrawlError(str(e)) from e
    return options


def _as_message(value: Any) -> Any:
    """A value as :class:`CrawlOptions` keeps it: a list as a tuple."""
    return tuple(value) if isinstance(value, list) else value


def _directory(given: Mapping[str, Any], name: str) -> str | None:
    """``--warc`` or ``--cache`` (``name``): with ``local`` a directory of this machine,
    else a name under the workers' ``CRAWLER_WARC_DIR`` (``CRAWLER_CACHE_DIR``)."""
    directory = given.get(name)
    if directory is None:
        return None
    try:
        return warc_directory(directory) if given.get("local") else warc_name(directory)
    except BadValue as e:
        raise CrawlError(str(e)) from e
