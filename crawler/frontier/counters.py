"""Per-crawl counters that every worker updates and the seeder reads, kept in Memcached.

``outstanding`` is the heart of "finished": ``discovered`` grows by each new URL
before its message is sent and each message counts its final outcome once, so
``discovered`` minus the endings is 0 only when nothing is queued, in flight or
waiting for a retry.  It is worked out when read, not stored: one round trip less
for every URL found and every message ended.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from crawler.environment import Lifetimes
from crawler.frontier.digests import short_id
from crawler.outcomes import DEFERRED, ENDINGS, FAILED, NOT_FINAL, PAUSED, RETRYING
from crawler.stores.client import StoreClient

OUTSTANDING, DISCOVERED = "outstanding", "discovered"
#: 1 once ``--cancel`` asked for the crawl to end.
CANCEL_REQUESTED = "cancel-requested"
#: 1 while ``crawler pause`` holds the crawl (until ``crawler resume``).
PAUSE_REQUESTED = "pause-requested"
#: Memcached's ``evictions`` when the crawl was seeded.
EVICTIONS_AT_START = "evictions-at-start"
#: The counters kept in Memcached.
STORED = (DISCOVERED, *ENDINGS, RETRYING, DEFERRED, PAUSED)
#: The marks that ``crawler cancel`` and ``crawler pause`` set.
MARKS = (CANCEL_REQUESTED, PAUSE_REQUESTED)
#: Every figure of a crawl.
NAMES = (OUTSTANDING, *STORED, *MARKS)


def crawl_key(crawl_id: str, name: str) -> str:
    """The key of one of the crawl's own figures or marks.

    The crawl id is a Redis Cluster hash tag (``{...}``): a crawl's counters, cancel
    mark, page budget and keep-alive lease share one slot, so reading its figures is one
    ``MGET`` on one node.  The per-URL keys (claims, journal buckets, delivery counts)
    carry no tag and spread over every node.
    """
    return f"crawl:{{{crawl_id}}}:{name}"


def cancel_key(crawl_id: str) -> str:
    """The key that says a crawl was cancelled; :func:`crawler.frontier.claims.claim`
    reads it with the URL's claim, in the same round trip."""
    return crawl_key(crawl_id, CANCEL_REQUESTED)


def pause_key(crawl_id: str) -> str:
    """The key that says a crawl is paused, read with :func:`cancel_key`."""
    return crawl_key(crawl_id, PAUSE_REQUESTED)


def keys(crawl_id: str) -> list[str]:
    """Every counter and mark of the crawl, for refreshing them while it goes on."""
    return [crawl_key(crawl_id, name) for name in (*STORED, *MARKS, EVICTIONS_AT_START)]


def cancel(client: StoreClient, crawl_id: str, ttl: int) -> None:
    """Ask every worker to end the crawl's messages without a fetch."""
    client.set(cancel_key(crawl_id), 1, time=ttl)


def pause(client: StoreClient, crawl_id: str, ttl: int) -> None:
    """Ask every worker to put the crawl's messages back unfetched until :func:`resume`."""
    client.set(pause_key(crawl_id), 1, time=ttl)


def resume(client: StoreClient, crawl_id: str) -> None:
    client.delete(pause_key(crawl_id))


def add_to(client: StoreClient, key: str, amount: int, ttl: int) -> int:
    """Add ``amount`` to a counter, created when not there: its new value, in one round
    trip once the counter exists."""
    try:
        return int(client.incr(key, amount))
    except KeyError:  # not there yet (every store's incr says so with a KeyError)
        return start_counter(client, key, amount, ttl)


def _add(client: StoreClient, key: str, amount: int, ttl: int) -> None:
    if amount:
        add_to(client, key, amount, ttl)


def start_counter(client: StoreClient, key: str, amount: int, ttl: int) -> int:
    """Create the counter ``key`` at ``amount``; of two workers creating it, the loser's
    ``add`` fails and it adds to the winner's.  Its value then."""
    if client.add(key, amount, time=ttl):
        return amount
    return int(client.incr(key, amount))


def start(client: StoreClient, crawl_id: str, seeds: int, ttl: int) -> None:
    """Count the seeds as discovered, before they are sent."""
    _add(client, crawl_key(crawl_id, DISCOVERED), seeds, ttl)


def discovered(client: StoreClient, crawl_id: str, new_urls: int, ttl: int) -> None:
    """Count newly claimed links, before their messages are sent."""
    start(client, crawl_id, new_urls, ttl)


def _ended_key(crawl_id: str, message_id: str) -> str:
    """A message's ``ended`` mark: under the crawl's hash tag, so that a Redis Cluster
    can set it in the very script that counts the ending (:func:`ended`)."""
    return crawl_key(crawl_id, f"e:{short_id(message_id)}")


def _former_ended_key(message_id: str) -> str:
    """The mark's name before it carried the crawl's tag (a failure's lives a grace)."""
    return f"e:{short_id(message_id)}"


#: Seconds the mark of one count (:func:`ended`) outlives the bookkeeping's patience.
COUNT_MARK_MARGIN = 60


#: Runs one store operation of :func:`ended` (bookkeeping's tries it again when it fails).
Step = Callable[[Callable[[], Any]], Any]


def _at_once(operation: Callable[[], Any]) -> Any:
    return operation()


def ended(
    client: StoreClient,
    crawl_id: str,
    message_id: str,
    outcome: str,
    lifetimes: Lifetimes,
    first: bool | None = None,
    step: Step = _at_once,
    also: Mapping[str, int] | None = None,
    patience: float = 0.0,
) -> dict[str, int]:
    """Count a message's outcome; a final one once per message, even if redelivered.

    ``first`` is what the URL's claim said of this ending (see
    :func:`crawler.frontier.claims.finish`): most endings are known from it; the rest
    (failures, cancellations, duplicates, a claim gone) leave an ``ended`` mark of
    their own for ``CRAWLER_CLAIM_TTL`` (a failure's for the grace, as long as its dead
    letter may be replayed).  ``step`` runs each store operation, and may run one again
    when the store failed (for up to ``patience`` seconds).  The counters ``also``
    names (the host's figures) are added in the same round trip; the counters' new
    values are returned (none for an ending counted before).

    A store whose client :class:`~crawler.stores.client.CountsOnce` (Redis) sets the
    mark and adds to the counters in one atomic step, the mark being the message's
    ``ended`` mark or, for an ending known otherwise (from its claim, or an attempt's,
    counted each time), a mark of this count alone, kept for ``patience`` and a minute:
    a try whose reply was lost, the store having done it, then counts nothing more when
    tried again.  Elsewhere (Memcached, this process's
    memory) the mark, then the count, each tried again on its own.
    """
    final = outcome not in NOT_FINAL
    if final and first is False:
        return {}
    amounts = amounts_of(crawl_id, outcome, also)
    mark_time = lifetimes.grace if outcome == FAILED else lifetimes.claim
    count_once = getattr(client, "count_once", None)  # CountsOnce (a protocol's
    if count_once is not None:  # isinstance looks at each method: tens of microseconds)
        if final and first is None:
            mark = _ended_key(crawl_id, message_id)
        else:  # known otherwise: this count's own mark, kept while it may be tried again
            mark = crawl_key(crawl_id, f"c:{uuid.uuid4().hex}")
            mark_time = int(patience) + COUNT_MARK_MARGIN
        values = step(lambda: count_once(mark, mark_time, amounts, lifetimes.grace))
        return {} if values is None else dict(values)
    if final and first is None:
        key = _ended_key(crawl_id, message_id)
        if not step(lambda: client.add(key, 1, time=mark_time)):
            return {}
    return dict(step(lambda: add_all(client, amounts, lifetimes.grace)))


def amounts_of(crawl_id: str, outcome: str, also: Mapping[str, int] | None) -> dict[str, int]:
    """What one ending of ``outcome`` adds: its counter, and the counters ``also`` names."""
    return {crawl_key(crawl_id, outcome): 1, **(also or {})}


def add_all(client: StoreClient, amounts: Mapping[str, int], ttl: int) -> dict[str, int]:
    """Add to each counter of ``amounts`` in one round trip a server, creating those not
    there: their new values."""
    answers, _ = client.incr_and_append(amounts, {}, ttl)
    return started(client, answers, amounts, ttl)


def started(
    client: StoreClient, answers: Mapping[str, int | None], amounts: Mapping[str, int], ttl: int
) -> dict[str, int]:
    """The counters' new values from ``incr_and_append``'s ``answers``, each counter
    that was not there (None) created at its amount."""
    return {
        key: start_counter(client, key, amounts[key], ttl) if value is None else value
        for key, value in answers.items()
    }


def reopened(client: StoreClient, crawl_id: str, message_id: str) -> None:
    """Undo the final outcome of a message that failed and is sent again (``--replay``)."""
    marks = (_ended_key(crawl_id, message_id), _former_ended_key(message_id))
    if client.delete(marks[0]) or client.delete(marks[1]):
        with contextlib.suppress(KeyError):
            client.decr(crawl_key(crawl_id, FAILED), 1)


def read(client: StoreClient, crawl_id: str) -> dict[str, int] | None:
    """Every counter of the crawl, or None when the crawl is unknown."""
    found = client.get_multi([crawl_key(crawl_id, name) for name in (*STORED, *MARKS)])
    if not found:
        return None
    figures = {name: int(found.get(crawl_key(crawl_id, name), 0)) for name in NAMES[1:]}
    figures[OUTSTANDING] = figures[DISCOVERED] - sum(figures[name] for name in ENDINGS)
    return figures


def state(figures: Mapping[str, int]) -> str:
    """A crawl's state, as ``--status`` and the dashboard say it: ``running``,
    ``finished``, ``paused``, or ``cancelled (running)`` / ``cancelled (finished)``."""
    state = "finished" if figures[OUTSTANDING] <= 0 else "running"
    if figures[CANCEL_REQUESTED]:
        return f"cancelled ({state})"
    if figures[PAUSE_REQUESTED] and state == "running":
        return "paused"
    return state


def memcached_evictions(client: StoreClient) -> int | None:
    """Items Memcached has evicted since it started, over all its servers that answer;
    None for a store that evicts nothing (the in-memory one of ``--local``)."""
    servers = client.get_stats()
    if servers is None:
        return None
    return sum(int(stats.get("evictions", 0)) for _server, stats in servers)


def note_evictions_at_start(client: StoreClient, crawl_id: str, ttl: int) -> None:
    evictions = memcached_evictions(client)
    if evictions is not None:
        client.set(crawl_key(crawl_id, EVICTIONS_AT_START), evictions, time=ttl)


def evicted_during(client: StoreClient, crawl_id: str) -> int:
    """Items Memcached evicted since the crawl was seeded: any of them may have been one
    of its claims, so a page may be fetched twice (0 when unknown)."""
    start = client.get(crawl_key(crawl_id, EVICTIONS_AT_START))
    now = memcached_evictions(client)
    if start is None or now is None:
        return 0
    return max(now - int(start), 0)  # a restarted Memcached counts from 0 again
