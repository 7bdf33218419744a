"""What a ``crawl`` message may carry: one check, before a worker acts on it.

A queue is an interface: seeders of other versions, other programs and corrupted
messages all reach the workers.  :func:`checked` wraps the actor: a message whose
arguments do not bind to ``crawl(url, depth, options, via_public, sitemap, listed)``,
or do not pass the rules below (the options: :data:`crawler.options.RULES`, the very
checks the seeder's command line uses), ends at once as an
:class:`~crawler.errors.InvalidMessage`: one log line naming what is wrong, no retry,
no claim, no fetch, and the message dead-lettered.  Options no rule names (a newer
seeder's) are ignored.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from crawler.errors import InvalidMessage
from crawler.frontier.scope import KINDS, MAX_SITEMAP_LEVEL
from crawler.options import (
    FLAG,
    WHOLE,
    CrawlOptions,
    Rule,
    canonical_http_url,
    quoted,
    utf8_text,
    whole_between,
)

P = ParamSpec("P")
R = TypeVar("R")


def checked(crawl: Callable[P, R]) -> Callable[P, R]:
    """Wrap ``crawl``: its message's arguments checked (:func:`check_call`) before it
    runs."""
    signature = inspect.signature(crawl)

    @functools.wraps(crawl)
    def crawl_checked(*args: P.args, **kwargs: P.kwargs) -> R:
        check_call(signature, args, kwargs)
        return crawl(*args, **kwargs)

    return crawl_checked


def check_call(signature: inspect.Signature, args: Any, kwargs: Any) -> None:
    """Raise :class:`~crawler.errors.InvalidMessage` unless a message's ``args`` and
    ``kwargs`` bind to ``signature`` (``crawl``'s) and pass :func:`check_arguments`."""
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        raise InvalidMessage("message arguments: args must be a list and kwargs an object")
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:  # a missing URL, an argument this crawler does not know
        raise InvalidMessage(f"message arguments: {e}") from e
    check_arguments(bound.arguments)


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Raise :class:`~crawler.errors.InvalidMessage` for the first argument of a
    ``crawl`` message that breaks its rule; the options are
    :meth:`~crawler.options.CrawlOptions.from_message`'s to check."""
    for name, value in arguments.items():
        if name == "options":
            CrawlOptions.from_message(value)
            continue
        ARGUMENTS[name].apply("message arguments", name, value)


def _url(value: Any) -> str:
    """An absolute http(s) URL, as the seeder's command line takes one (a sitemap's
    part: with its ``#part-N``)."""
    canonical_http_url(utf8_text(value), sendable=False)
    return str(value)


def _listed(value: Any) -> dict[str, list[str]] | None:
    """A part of a long sitemap's URLs: ``{"pages": [...], "sitemaps": [...]}``."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(KINDS):
        raise ValueError
    if sum(len(urls) for urls in value.values() if isinstance(urls, list)) > MAX_LISTED:
        raise ValueError(f"more than {MAX_LISTED} URLs")
    for urls in value.values():
        if not isinstance(urls, list):
            raise ValueError
        for url in urls:
            try:
                _url(url)
            except ValueError as e:
                raise ValueError(f"{quoted(url)} is not an http(s) URL") from e
    return value


#: URLs a part of a long sitemap carries at most: as many as the sitemap protocol lets
#: one file list (a part holds ``CRAWLER_MAX_LINKS_PER_PAGE`` of its sender's, which
#: other workers need not share).
MAX_LISTED = 50_000
#: The rules of ``crawl``'s arguments besides its options.
ARGUMENTS: dict[str, Rule[Any]] = {
    "url": Rule("an http:// or https:// URL", _url),
    "depth": WHOLE,
    "via_public": FLAG,
    "sitemap": Rule(
        f"a whole number from 0 to {MAX_SITEMAP_LEVEL}", whole_between(0, MAX_SITEMAP_LEVEL)
    ),
    "listed": Rule("null or lists of 'pages' and 'sitemaps' URLs", _listed),
}
