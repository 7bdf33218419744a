"""The two ways a crawl of one URL can fail, and how Dramatiq treats each.

A :class:`PermanentError` is in the actor's ``throws``: the message is not
retried and goes straight to the dead-letter queue.  A :class:`TransientError`
is a :class:`dramatiq.Retry`: the message is retried with backoff (or after the
delay the server asked for) until ``max_retries`` runs out, then dead-lettered.
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
    """Retrying cannot help: a 4xx answer, a bad URL, a redirect loop, a page too large.

    Parameters:
      reason(str): What went wrong, in words for the log.
      status(int): The HTTP status the server answered, where there was one.
    """

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


class TransientError(dramatiq.Retry):
    """Retrying may help: a connection error, a timeout, a 5xx or 429 answer, Memcached down.

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


class InvalidMessage(PermanentError):
    """A ``crawl`` message a worker will not act on: an argument of the wrong type or
    out of range, options that do not pass their check, a WARC directory outside the
    worker's root.  Raised before any claim or fetch; the message is dead-lettered.

    Parameters:
      reason(str): What is wrong, naming the argument or option.
    """
