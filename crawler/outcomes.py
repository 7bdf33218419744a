"""What can become of one ``crawl`` message, and the sentence that sums up a crawl's outcomes.

Records, counters, the progress line, ``--status`` and metrics all speak this
vocabulary; this module is its one home.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Fetched: an HTML page (its links followed), or a body of another type.
CRAWLED, NOT_HTML = "crawled", "not-html"
#: Fetched, with ``--warc``: a payload the crawl had stored before (its links followed
#: if HTML); the WARC files hold a ``revisit`` record for it.
DUPLICATE_CONTENT = "duplicate-content"
#: Asked again, with ``--recrawl-from``: the server answered ``304 Not Modified``; the
#: earlier crawl's links of the page were followed, the page not downloaded again.
UNCHANGED = "unchanged"
#: Read, with ``--sitemaps``: a sitemap (or robots.txt naming sitemaps), whose URLs
#: were sent as messages of their own.
SITEMAP = "sitemap"
#: Fetched, and the server answered with a 4xx status other than 408 and 429 (404
#: Not Found, 410 Gone, 403 Forbidden...): the record says which; the body is not
#: parsed for links.  An answer, not a failure: not retried, not dead-lettered.
ANSWERED = "answered"
#: Given up for good (could not be fetched): its message is dead-lettered.
FAILED = "failed"
#: Skipped without a fetch: claimed by another message, over ``--max-pages`` (or
#: ``--max-pages-per-host``), or disallowed by robots.txt.
DUPLICATE, OVER_BUDGET, DISALLOWED = "duplicate", "over-budget", "disallowed"
#: Ended without a fetch because the crawl was cancelled (``--cancel``).
CANCELLED = "cancelled"
#: An attempt that did not end its URL: failed but will be retried, or rate-limited.
RETRYING, DEFERRED = "retrying", "deferred"
#: An attempt put back unfetched because its crawl is paused (``crawler pause``).
PAUSED = "paused"

#: The outcomes that end a message, each counted once per message.
ENDINGS = (
    CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED, SITEMAP, DUPLICATE, OVER_BUDGET, DISALLOWED,
    CANCELLED, ANSWERED, FAILED,
)  # fmt: skip
#: Outcomes of an attempt that leave its message to come again.
NOT_FINAL = (RETRYING, DEFERRED, PAUSED)
#: Outcomes that go into an output file: the URLs a crawl fetched, was answered or gave up.
WRITTEN = (CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED, SITEMAP, ANSWERED, FAILED)
#: Outcomes after which the URL's claim is finished: its own message ended it.
OWN_ENDINGS = (
    CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED, SITEMAP, ANSWERED, OVER_BUDGET, DISALLOWED,
)  # fmt: skip


def fetched(counts: Mapping[str, int]) -> int:
    """Pages asked for and answered: downloaded, or unchanged since the earlier crawl."""
    return sum(counts.get(name, 0) for name in (CRAWLED, NOT_HTML, DUPLICATE_CONTENT, UNCHANGED))


def summary(
    counts: Mapping[str, int],
    *,
    rate: float | None = None,
    every_part: bool = False,
    answers: Mapping[int, int] | None = None,
    items: int = 0,
    dropped: int = 0,
    cached: int = 0,
) -> str:
    """``120 pages fetched (94.4 pages/s), 0 skipped as not HTML, ..., 0 failed``.

    Parameters:
      counts(Mapping): Messages ended, by outcome.
      rate(float): Pages fetched per second, shown when given.
      every_part(bool): Name robots.txt and budget skips even when there were none.
      answers(Mapping): The ``answered`` ones by HTTP status, when known: ``2 answered
        404, 1 answered 410`` rather than ``3 answered 4xx``.
      items(int): Items the handler yielded (``12 items``), said when there are any.
      dropped(int): Items the item pipelines dropped (``3 items dropped``), said when
        there are any.
      cached(int): Pages whose response came from ``--cache`` (``12 from the cache``),
        said when there are any.
    """
    pages = f"{plural(fetched(counts), 'page')} fetched"
    if rate is not None:
        pages += f" ({rate:.1f} pages/s)"
    if cached:
        pages += f", {cached} from the cache"
    parts = [pages, *([plural(items, "item")] if items else [])]
    parts += [f"{plural(dropped, 'item')} dropped"] if dropped else []
    parts += [
        f"{counts.get(NOT_HTML, 0)} skipped as not HTML",
        f"{counts.get(DUPLICATE, 0)} skipped as duplicates",
    ]
    if counts.get(SITEMAP, 0):
        parts.append(f"{plural(counts[SITEMAP], 'sitemap')} read")
    if counts.get(DUPLICATE_CONTENT, 0):
        parts.append(f"{counts[DUPLICATE_CONTENT]} with content stored before")
    if counts.get(UNCHANGED, 0):
        parts.append(f"{counts[UNCHANGED]} unchanged since the earlier crawl")
    if every_part or counts.get(DISALLOWED, 0):
        parts.append(f"{counts.get(DISALLOWED, 0)} disallowed by robots.txt")
    if every_part or counts.get(OVER_BUDGET, 0):
        parts.append(f"{counts.get(OVER_BUDGET, 0)} over the page budget")
    if counts.get(CANCELLED, 0):
        parts.append(f"{counts[CANCELLED]} cancelled")
    parts += answered(counts.get(ANSWERED, 0), answers)
    parts.append(f"{counts.get(FAILED, 0)} failed")
    return ", ".join(parts)


def answered(total: int, answers: Mapping[int, int] | None = None) -> list[str]:
    """The summary's parts for ``total`` URLs answered with a 4xx: one a status when
    ``answers`` (by status) accounts for them all, else ``3 answered 4xx``; none for 0."""
    if not total:
        return []
    if answers and sum(answers.values()) == total:
        return [f"{n} answered {status}" for status, n in sorted(answers.items()) if n]
    return [f"{total} answered 4xx"]


def plural(count: int, noun: str) -> str:
    """``1 page``, ``2 pages``, ``0 pages``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def eviction_warning(evicted: int) -> str:
    return (
        f"Memcached evicted {evicted} items during this crawl: some pages may be fetched"
        " twice; give it more memory (memcached -m)"
    )
