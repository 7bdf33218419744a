"""One clear log line for every failed attempt, and for the last one above all; and a
4xx answer made the URL's record, not a failure, as is a server's "slow down"."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

import dramatiq
from dramatiq.middleware import CurrentMessage, Interrupt

from crawler import outcomes
from crawler.brokers.returning import broker_errors
from crawler.errors import Answered, Deferred, PermanentError, TransientError, shown
from crawler.records import answered_record, skipped_record
from crawler.stores import redis_errors
from crawler.stores.memcached import MemcachedError

# The name it had before the module was renamed: users filter the log on it.
logger = logging.getLogger("crawler.failures")
#: Characters of a URL a failure's log line shows at most (a real URL rarely has 2,000).
SHOWN_IN_LOG = 4096
P = ParamSpec("P")
R = TypeVar("R")


def reports_failures(crawl: Callable[P, R]) -> Callable[P, R]:
    """Wrap ``crawl(url)``: log each failure, say when a URL is given up, and
    turn a Memcached or broker failure into a retry.  A 4xx answer (:class:`Answered`)
    is no failure: it is returned as the URL's record (outcome ``answered``); nor is a
    server's "slow down" (:class:`Deferred`: the message comes back later)."""

    @functools.wraps(crawl)
    def crawl_reporting_failures(*args: P.args, **kwargs: P.kwargs) -> R:
        # Whatever a bad message holds, in one line however long.
        given = str(args[0] if args else kwargs.get("url"))
        url = shown(given, SHOWN_IN_LOG)
        try:
            return crawl(*args, **kwargs)
        except Answered as e:  # fetched: the server's answer is the URL's record
            logger.warning("URL %r answered %s.", url, e)
            return cast(R, answered_record(given, e))
        except Deferred as e:  # its server asked the crawl to wait: sent again for later
            logger.warning("URL %r: %s.", url, e)
            return cast(R, skipped_record(given, outcomes.DEFERRED))
        except MemcachedError as e:
            error = TransientError(f"Memcached is unavailable: {type(e).__name__}: {e}")
            report(url, error)
            raise error from e
        except redis_errors() as e:  # broker or store
            error = TransientError(f"Redis is unavailable: {type(e).__name__}: {e}")
            report(url, error)
            raise error from e
        except broker_errors() as e:
            error = TransientError(f"the broker is unavailable: {type(e).__name__}: {e}")
            report(url, error)
            raise error from e
        except (Exception, Interrupt) as e:
            report(url, e)
            raise

    return crawl_reporting_failures


def report(url: str, error: BaseException) -> None:
    retries, max_retries = 0, 0
    message = CurrentMessage.get_current_message()
    if message is not None:
        actor = dramatiq.get_broker().get_actor(message.actor_name)
        retries = message.options.get("retries", 0)
        max_retries = message.options.get("max_retries", actor.options.get("max_retries", 0))
    reason = str(error) or type(error).__name__
    if isinstance(error, PermanentError):
        logger.error("Giving up on URL %r: %s.", url, reason)
    elif retries >= max_retries:
        logger.error("Giving up on URL %r after %d attempts: %s.", url, retries + 1, reason)
    else:
        logger.warning(
            "Attempt %d of %d at URL %r failed: %s. It will be retried.",
            retries + 1,
            max_retries + 1,
            url,
            reason,
        )
