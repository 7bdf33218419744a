"""Patterns a page handler chooses URLs by: globs, as Crawlee's ``globs``, and regular
expressions, as Scrapy's ``LinkExtractor(allow=...)``.

A glob (a string) matches the whole absolute URL, as :func:`fnmatch.fnmatchcase` reads
it: ``*`` any run of characters (``/`` included), ``?`` one, ``[...]`` one of a set;
case counts.  ``https://shop.example/product/*`` matches every product page of the
shop, its query strings included.  A compiled regular expression is searched anywhere
in the URL, as ``--include`` is.  They run in the handler's process, on the user's own
patterns, so Python's ``re`` serves (``--include``, which comes in messages, runs in RE2).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeAlias

#: A pattern of URLs: a glob, or a compiled regular expression.
UrlPattern: TypeAlias = "str | re.Pattern[str]"
#: One pattern, or several (any of them matches).
UrlPatterns: TypeAlias = "UrlPattern | Iterable[UrlPattern]"


@lru_cache(maxsize=256)
def _glob(glob: str) -> Callable[[str], object]:
    return re.compile(fnmatch.translate(glob)).match  # translate()'s ends at the URL's end


def _matcher(pattern: UrlPattern) -> Callable[[str], object]:
    """What matches ``pattern``: a glob the whole URL, a regular expression anywhere in it."""
    if isinstance(pattern, re.Pattern):
        return pattern.search
    if isinstance(pattern, str):
        return _glob(pattern)
    raise TypeError(
        f"a URL pattern must be a glob (str) or a compiled regex, not {type(pattern).__name__}"
    )


def url_matcher(patterns: UrlPatterns) -> Callable[[str], bool]:
    """Whether a URL is matched by any of ``patterns`` (one glob or regex, or several);
    TypeError, at once, for a pattern that is neither."""
    if isinstance(patterns, (str, re.Pattern)):
        matchers = [_matcher(patterns)]
    else:
        matchers = [_matcher(pattern) for pattern in patterns]

    def matches(url: str) -> bool:
        return any(match(url) for match in matchers)

    return matches
