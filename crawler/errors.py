"""The two ways a crawl of one URL can fail, and how Dramatiq treats each.

A :class:`PermanentError` is in the actor's ``throws``: the message is not
retried and goes straight to the dead-letter queue.  A :class:`TransientError`
is a :class:`dramatiq.Retry`: the message is retried with backoff (or after the
delay the server asked for) until ``max_retries`` runs out, then dead-lettered.
An :class:`Answered` 4xx is neither: the URL's record says its status.
"""

from __future__ import annotations

import dramatiq

#: Characters of a URL quoted in an error or log message.
SHOWN_URL = 100


def shown(url: str, limit: int = SHOWN_URL) -> str:
    """``url`` as messages quote it: cut to ``limit`` characters, as a page may hold
    links (or a server redirect to URLs) of any length."""
    return url if len(url) <= limit else url[: limit - 3] + "..."


class PermanentError(Exception):
    """Retrying cannot help: a bad URL, a redirect loop, a page too large (or a 4xx
    answer: :class:`Answered`).

    Parameters:
      reason(str): What went wrong, in words for the log.
      status(int): The HTTP status the server answered, where there was one.
    """

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


class TransientError(dramatiq.Retry):
    """Retrying may help: a connection error, a timeout, a 5xx, 408 or 429 answer,
    Memcached down.

    Parameters:
      reason(str): What went wrong, in words for the log.
      delay(int): Milliseconds to wait before the retry, or None for Dramatiq's backoff.
      status(int): The HTTP status the server answered, where there was one.
    """

    def __init__(self, reason: str, delay: int | None = None, status: int | None = None) -> None:
        super().__init__(reason, delay=delay)
        self.reason = reason
        self.status = status

    def __str__(self) -> str:
        return self.reason


class ServerBusy(TransientError):
    """The server asked the crawl to slow down: a 429 (Too Many Requests), or a 503 with
    ``Retry-After``.  It is the server's pace, not the page's failure: its host waits
    ``delay`` for the whole crawl, and the page comes back after it without spending a
    retry (:class:`crawler.frontier.claims.Turn`), up to ``Limits.max_paced`` times.

    Parameters:
      reason(str): ``HTTP 429 Too Many Requests``.
      delay(int): Milliseconds the server asked for (bounded), or a second when it did not say.
      status(int): The HTTP status.
    """

    delay: int

    def __init__(self, reason: str, delay: int, status: int | None = None) -> None:
        super().__init__(reason, delay=delay, status=status)


class Deferred(Exception):
    """The message was sent again for later (its server asked the crawl to slow down):
    no failure; the actor's wrapper makes it the ``deferred`` record."""


class Answered(PermanentError):
    """The server answered with a 4xx status other than 408 and 429 (404 Not Found, 410
    Gone, 403 Forbidden...): the URL's answer, not a failure.  No retry can change it, and
    the actor's wrapper (:func:`crawler.failure_reports.reports_failures`) makes it the URL's
    record (outcome ``answered``, with its status) instead of a dead letter.  A robots.txt
    or sitemap fetch reads it as the :class:`PermanentError` with a status it is.

    Parameters:
      reason(str): ``HTTP 404 Not Found``.
      status(int): The HTTP status.
      content_type(str): The answer's ``Content-Type``, when it had one.
      kept(object): What ``--warc`` made of the response (its ``Stored``), or None.
    """

    def __init__(
        self, reason: str, status: int, content_type: str | None = None, kept: object = None
    ) -> None:
        super().__init__(reason, status=status)
        self.content_type = content_type
        self.kept = kept


class InvalidMessage(PermanentError):
    """A ``crawl`` message a worker will not act on: an argument of the wrong type or
    out of range, options that do not pass their check, a WARC directory outside the
    worker's root.  Raised before any claim or fetch; the message is dead-lettered.

    Parameters:
      reason(str): What is wrong, naming the argument or option.
    """


def why(error: BaseException) -> str:
    """What went wrong, never empty: pika's connection errors often say nothing
    themselves, their cause does (the first of the chain with words, else its type)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if str(cause).strip():
            return f"{type(cause).__name__}: {cause}"
        inner = [cause.__cause__, cause.__context__, getattr(cause, "exception", None)]
        inner += [a for a in cause.args if isinstance(a, BaseException)]
        cause = next((e for e in inner if isinstance(e, BaseException)), None)
    return f"{type(error).__name__} (no reason given: is anything listening there?)"
