"""Which message owns a URL: dedup in Memcached that survives retries and crashes.

Upstream marks a URL visited *before* fetching it, so a retry or a redelivery
after a worker crash finds the mark and skips the URL for good.  Here the value
stored under a URL's key is the id of the message that claimed it:

* the message holding the claim proceeds, however often it is retried or
  redelivered; every other message for that URL is a duplicate and skips;
* links are claimed when they are sent (one ``add_multi`` for a page), so a
  duplicate never even enters the queue; the consumer's check stays the authority;
* a finished URL is marked ``done``, so even a second copy of its own message
  (sent again by a parent that was retried) skips it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from typing import Any

import dramatiq
from dramatiq.middleware import CurrentMessage

from crawler.errors import PermanentError
from crawler.frontier import counters

#: How long a claim of a bare ``crawl(url)`` message lasts, in seconds; as upstream, the
#: URL may be crawled again after it.
CLAIM_TTL = 3600
#: How long a seeded crawl's claims last: as long as its counters, a week.
CRAWL_CLAIM_TTL = counters.COUNTER_TTL
DONE = b"done"


def current_message(actor: dramatiq.Actor[Any, Any], url: str) -> dramatiq.Message[Any]:
    """The message being processed; a fresh one when the actor is called as a function."""
    message = CurrentMessage.get_current_message()
    if message is not None:
        return message
    if not any(isinstance(m, CurrentMessage) for m in actor.broker.middleware):
        raise RuntimeError("claims need Dramatiq's CurrentMessage middleware on the broker")
    return actor.message(url)


def url_hash(url: str, crawl_id: str | None = None) -> str:
    """The key of a URL's claim in Memcached: as upstream the MD5 of the URL; for a
    seeded crawl the MD5 of its crawl id and the URL, so that each crawl has its own
    claims and seeding a site again crawls it again."""
    if crawl_id is not None:
        url = f"{crawl_id} {url}"
    return hashlib.md5(url.encode("utf-8")).hexdigest()


def ttl(crawl_id: str | None) -> int:
    """How long a claim lasts: an hour as upstream, a week for a seeded crawl."""
    return CLAIM_TTL if crawl_id is None else CRAWL_CLAIM_TTL


#: What :func:`claim` says: the message owns the URL, another one does, or the
#: message's crawl was cancelled (then nothing is claimed).
OWNED, TAKEN, CANCELLED = "owned", "taken", "cancelled"


def claim(client: Any, key: str, message_id: str, crawl_id: str | None = None) -> str:
    """Whether the message ``message_id`` owns ``key`` (now or from before); for a
    crawl's message, whether the crawl was cancelled, read in the same round trip."""
    owner = message_id.encode()
    if crawl_id is None:
        stored = client.get(key)
    else:
        found = client.get_multi([key, counters.cancel_key(crawl_id)])
        if counters.cancel_key(crawl_id) in found:
            return CANCELLED
        stored = found.get(key)
    if stored is None:
        if client.add(key, owner, time=ttl(crawl_id)):
            return OWNED
        stored = client.get(key)
    return OWNED if stored == owner else TAKEN


def finish(client: Any, key: str, crawl_id: str | None = None) -> None:
    client.set(key, DONE, time=ttl(crawl_id))


def bound_deliveries(client: Any, message: dramatiq.Message[Any], max_deliveries: int) -> bool:
    """Give up on an attempt that keeps coming back unfinished (a worker died on it each time);
    True on the very first delivery of the message.

    Retries are counted by Dramatiq and deferrals (rate limits) by :func:`defer`; this
    counts the deliveries of one attempt.
    """
    retries, deferrals = message.options.get("retries", 0), message.options.get("deferrals", 0)
    replays = message.options.get("replays", 0)  # --replay: a dead letter's second chance
    # RabbitMQ says whether a message was delivered before: then the first delivery
    # needs no round trip, and the count starts at the second.  Redis does not say.
    redelivered = getattr(message, "redelivered", None)
    if redelivered is False:
        deliveries = 1
    else:
        key = f"deliveries:{message.message_id}:{retries}:{deferrals}:{replays}"
        counted = 1 if client.add(key, 1, time=CLAIM_TTL) else int(client.incr(key))
        deliveries = counted + (1 if redelivered else 0)
    if deliveries > max_deliveries:
        raise PermanentError(
            f"delivered {deliveries} times without finishing; a worker may be dying on it"
        )
    return deliveries == 1 and retries == 0 and deferrals == 0 and replays == 0


def defer(broker: dramatiq.Broker, message: dramatiq.Message[Any], delay: int) -> None:
    """Send the message again, same id (so it keeps its claim), ``delay`` ms from now.

    Unlike a retry this is no failure: rate-limited messages wait, however often.
    """
    deferrals = message.options.get("deferrals", 0) + 1
    broker.enqueue(message.copy(options={"deferrals": deferrals}), delay=delay)


def child_message_id(parent_id: str, url: str) -> str:
    """The same parent always sends a link under the same id, even when retried."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{parent_id} {url}"))


def send_claimed(
    client: Any,
    actor: dramatiq.Actor[Any, Any],
    parent_id: str,
    urls: Iterable[str],
    kwargs: dict[str, Any],
    crawl_id: str | None = None,
    *,
    first_delivery: bool = True,
) -> list[str]:
    """Send ``actor(url, **kwargs)`` for each URL nobody has claimed yet; return the ids
    of the messages sent.

    Most links of a page are claimed already, so one ``get_multi`` finds those and
    only the rest are added (an ``add`` is a round trip per key) and get message ids.
    The new claims are counted in the crawl's counters before anything is sent.
    """
    keys = {url_hash(url, crawl_id): url for url in urls}
    if not keys:
        return []
    stored = client.get_multi(list(keys))
    fresh = {
        key: child_message_id(parent_id, url) for key, url in keys.items() if key not in stored
    }
    taken = (
        set(client.add_multi({key: mid.encode() for key, mid in fresh.items()}, time=ttl(crawl_id)))
        if fresh
        else set()
    )
    to_send = {key: mid for key, mid in fresh.items() if key not in taken}
    if crawl_id is not None:
        counters.discovered(client, crawl_id, len(to_send))
    if not first_delivery:
        # Keys this very message claimed on an earlier, interrupted try: send them again.
        for key, value in stored.items():
            mid = child_message_id(parent_id, keys[key])
            if value == mid.encode():
                to_send[key] = mid
    sent = []
    for key, url in keys.items():
        if key in to_send:
            message: dramatiq.Message[Any] = dramatiq.Message(
                queue_name=actor.queue_name,
                actor_name=actor.actor_name,
                args=(url,),
                kwargs=kwargs,
                options={},
                message_id=to_send[key],
            )
            actor.broker.enqueue(message)
            sent.append(to_send[key])
    return sent
