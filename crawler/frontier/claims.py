"""Which message owns a URL: dedup in Memcached that survives retries and crashes.

Upstream marks a URL visited *before* fetching it, so a retry or a redelivery
after a worker crash finds the mark and skips the URL for good.  Here the value
stored under a URL's key says which message claimed it (8 bytes of its id's digest):

* the message holding the claim proceeds, however often it is retried or
  redelivered; every other message for that URL is a duplicate and skips;
* links are claimed when they are sent (one ``add_multi`` for a page), so a
  duplicate never even enters the queue; the consumer's check stays the authority;
* a finished URL is marked ``done`` by its message, so even a second copy of that
  message (sent again by a parent that was retried) skips it, and the crawl's
  counters count each message's ending once without a key of its own.

A bare ``crawl(url)`` message claims, as upstream, the MD5 of its URL for an hour.  A
seeded crawl's claims are its own (the key is a digest of the crawl id and the URL),
last ``CRAWLER_CLAIM_TTL``, and are written to the crawl's journal too
(:mod:`crawler.frontier.journal`), which answers for a URL once its claim expired or
was evicted: a crawl of any length fetches each URL once.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import time
import uuid
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import dramatiq
import requests
from dramatiq.middleware import CurrentMessage

from crawler import outcomes
from crawler.environment import Lifetimes, Limits
from crawler.errors import Deferred, PermanentError, ServerBusy, TransientError
from crawler.frontier import counters, journal, politeness
from crawler.frontier.digests import owner_token, short_id, url_digest
from crawler.frontier.scope import SITEMAP_ACTOR, message_of, request_name, url_in
from crawler.options import CrawlOptions
from crawler.records import key_of
from crawler.stores import StorePool, Stores
from crawler.stores.client import StoreClient

logger = logging.getLogger(__name__)
#: How long a claim of a bare ``crawl(url)`` message lasts, in seconds; as upstream, the
#: URL may be crawled again after it.
CLAIM_TTL = 3600
#: A finished URL's claim: ``DONE`` and the owner of the message that finished it.
DONE = b"d"


def current_message(actor: dramatiq.Actor[Any, Any], url: str) -> dramatiq.Message[Any]:
    """The message being processed; a fresh one when the actor is called as a function."""
    message = CurrentMessage.get_current_message()
    if message is not None:
        return message
    if not any(isinstance(m, CurrentMessage) for m in actor.broker.middleware):
        raise RuntimeError("claims need Dramatiq's CurrentMessage middleware on the broker")
    return actor.message(url)


#: Marks a sitemap's claim (``--sitemaps``): a page linking to a sitemap and the
#: sitemap's own message each claim theirs, so neither hides the other.
SITEMAP_MARK = "sitemap "


def claim_name(url: str, sitemap: int | bool = False) -> str:
    """What a message for ``url`` claims: the URL; for a sitemap, the URL marked so."""
    return SITEMAP_MARK + url if sitemap else url


def claim_name_of(message: Any, url: str) -> str:
    """What ``message`` (of ``url``, whatever else it holds) claims: a sitemap's, for the
    sitemaps' actor and for a ``crawl`` message of format 1 naming a sitemap
    (:mod:`crawler.messages`); a keyed request's own (:func:`request_name`), for a
    message carrying a request's ``key``."""
    kwargs = message.kwargs if isinstance(message.kwargs, dict) else {}
    sitemap = getattr(message, "actor_name", None) == SITEMAP_ACTOR or kwargs.get("sitemap")
    return claim_name(request_name(url, key_of(kwargs.get("request"))), bool(sitemap))


def url_hash(url: str, crawl_id: str | None = None) -> str:
    """The key of a URL's claim in Memcached: as upstream the MD5 of the URL; for a
    seeded crawl 16 characters of its own digest, so that each crawl has its own
    claims and seeding a site again crawls it again."""
    if crawl_id is None:
        return hashlib.md5(url.encode("utf-8")).hexdigest()
    return _key(url_digest(url, crawl_id))


def _key(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest[:12]).decode()


def ttl(crawl_id: str | None, lifetimes: Lifetimes) -> int:
    """How long a claim lasts: an hour as upstream, ``CRAWLER_CLAIM_TTL`` in a crawl."""
    return CLAIM_TTL if crawl_id is None else lifetimes.claim


#: What :func:`claim` says: the message owns the URL, another one does, or the
#: message's crawl was cancelled or is paused (then nothing is claimed).
OWNED, TAKEN, CANCELLED, PAUSED = "owned", "taken", "cancelled", "paused"


def claim(
    client: StoreClient, url: str, message_id: str, crawl_id: str | None, lifetimes: Lifetimes
) -> str:
    """Whether the message ``message_id`` owns ``url`` (now or from before); for a
    crawl's message, whether the crawl was cancelled or is paused, read in the same
    round trip."""
    owner = owner_token(message_id)
    if crawl_id is None:
        key = url_hash(url)
        stored = client.get(key)
        if stored is None:
            if client.add(key, owner, time=CLAIM_TTL):
                return OWNED
            stored = _holder(client, key)
        # (a claim written before this release held the whole message id)
        return OWNED if stored in (owner, GIVEN_UP + owner, message_id.encode()) else TAKEN
    digest = url_digest(url, crawl_id)
    key = _key(digest)
    found = client.get_multi([key, counters.cancel_key(crawl_id), counters.pause_key(crawl_id)])
    if counters.cancel_key(crawl_id) in found:
        return CANCELLED
    if counters.pause_key(crawl_id) in found:
        return PAUSED
    stored = found.get(key)
    if stored == DONE + owner and not ending_counted(client, crawl_id, digest, owner):
        return OWNED  # its message died between marking it done and counting it: ended anew
    if stored is None:
        # A seed, or a claim that expired or was evicted: the journal knows which, and
        # whether this message finished the URL already (then this is a copy of it).
        now = journal.read_layout(client, crawl_id)
        done = journal.done_digest(digest)
        journaled = journal.owners(client, crawl_id, [digest, done], now)
        recorded = journaled.get(digest)
        if journaled.get(done) == owner:
            client.add(key, DONE + owner, time=lifetimes.claim)  # a repeat: not counted again
            return TAKEN
        if recorded is not None and recorded != owner:
            return TAKEN
        if client.add(key, owner, time=lifetimes.claim):
            if recorded is None:
                journal.record(client, crawl_id, now, {digest: owner}, lifetimes.grace)
            return OWNED
        stored = _holder(client, key)  # another message claimed it meanwhile
    return OWNED if stored in (owner, GIVEN_UP + owner) else TAKEN


def _holder(client: StoreClient, key: str) -> Any:
    """Who holds ``key`` after an ``add`` of it failed: another message, or nobody when
    Memcached failed to store it (pylibmc's ``add`` said False for both), then the
    attempt is retried rather than the URL skipped."""
    stored = client.get(key)
    if stored is None:
        raise TransientError("Memcached did not store the URL's claim")
    return stored


#: What :func:`finish` says of a message's final ending: its first, a repeat (a copy
#: of the message ended the URL before), or not known from the claim (it is another
#: message's now, or was gone): then :func:`crawler.frontier.counters.ended` asks the
#: message's own ``ended`` mark.
FIRST, REPEAT, UNKNOWN = "first", "repeat", "unknown"


def finish(
    client: StoreClient, url: str, message_id: str, crawl_id: str | None, lifetimes: Lifetimes
) -> str:
    """Mark ``url`` done by ``message_id``, from the claim that message holds, atomically:
    of two copies of one message ending at once, one finds it marked already (the
    crawl's journal is told once the ending is counted: :func:`journal_done`)."""
    key, owner = url_hash(url, crawl_id), owner_token(message_id)
    for _ in range(2):
        stored, cas = client.gets(key)
        if stored is None:  # expired or evicted: whether it ended before is not known
            if client.add(key, DONE + owner, time=ttl(crawl_id, lifetimes)):
                return UNKNOWN
            continue
        if stored == DONE + owner:
            # Marked done, then counted: a copy that finds the mark but no count in the
            # journal ends in place of the one a kill cut short between the two.
            if crawl_id is None or ending_counted(
                client, crawl_id, url_digest(url, crawl_id), owner
            ):
                return REPEAT
            return FIRST
        if stored not in (owner, GIVEN_UP + owner):
            client.set(key, DONE + owner, time=ttl(crawl_id, lifetimes))
            return UNKNOWN
        # False when changed or gone since gets: then read again
        if client.cas(key, DONE + owner, cas, time=ttl(crawl_id, lifetimes)):
            # Given up before, and counted so; a copy of the message fetched it after all.
            return REPEAT if stored == GIVEN_UP + owner else FIRST
    return UNKNOWN


def journal_done(
    client: StoreClient,
    url: str,
    message_id: str,
    crawl_id: str,
    lifetimes: Lifetimes,
    counted: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Write in the crawl's journal, for as long as the crawl lives, that ``message_id``
    finished ``url`` and its ending was counted: a copy of the message that comes once
    the URL's claim is gone (its worker was killed before the broker heard it was done;
    a redone parent sent it again) is then a repeat (:func:`claim`), neither fetched
    nor counted again.  With ``counted``, the ending's counts are added in the same
    round trip a server (no kill falls between the two): their new values."""
    done = journal.done_digest(url_digest(url, crawl_id))
    now = journal.read_layout(client, crawl_id)
    owner = {done: owner_token(message_id)}
    values = journal.record(client, crawl_id, now, owner, lifetimes.grace, counted)
    return {key: values[key] for key in counted or {}}


def ending_counted(client: StoreClient, crawl_id: str, digest: bytes, owner: bytes) -> bool:
    """Whether the crawl's journal says that the message of ``owner`` finished the URL of
    ``digest`` and its ending was counted (:func:`journal_done`, one round trip with the
    count)."""
    done = journal.done_digest(digest)
    return journal.owners(client, crawl_id, [done]).get(done) == owner


#: A URL's claim once its message was given up: kept for ``CRAWLER_CRAWL_GRACE``, as
#: long as the dead letter may be replayed.
GIVEN_UP = b"f"


def give_up(
    client: StoreClient, url: str, message_id: str, crawl_id: str | None, lifetimes: Lifetimes
) -> None:
    """Mark ``url`` given up by ``message_id``: its ending is counted through its own
    ``ended`` mark; a copy of the message (or ``--replay``) may still try it."""
    time = lifetimes.grace if crawl_id is not None else CLAIM_TTL
    client.set(url_hash(url, crawl_id), GIVEN_UP + owner_token(message_id), time=time)


def reopen(
    client: StoreClient, url: str, message_id: str, crawl_id: str | None, lifetimes: Lifetimes
) -> None:
    """``--replay``: the URL is ``message_id``'s again, to be finished and counted anew."""
    client.set(url_hash(url, crawl_id), owner_token(message_id), time=ttl(crawl_id, lifetimes))


def ending_of_duplicate(
    client: StoreClient, url: str, message_id: str, crawl_id: str | None
) -> str:
    """A message skipped as a duplicate: a repeat when it was itself the one that
    finished the URL (it was delivered again), else not known from the claim."""
    finished_by_it = client.get(url_hash(url, crawl_id)) == DONE + owner_token(message_id)
    return REPEAT if finished_by_it else UNKNOWN


#: A deferred message's option: True when the attempt that deferred it had sent no
#: link and no earlier one could have (:func:`defer`), so that its next delivery sends
#: its links as a first delivery does, without looking for those sent before.
UNSENT = "unsent"


def _attempts(message: dramatiq.Message[Any]) -> tuple[int, int, int]:
    """The attempts before this one: retries, deferrals and replays."""
    options = message.options
    return options.get("retries", 0), options.get("deferrals", 0), options.get("replays", 0)


def links_unsent(message: dramatiq.Message[Any], first_of_its_attempt: bool) -> bool:
    """Whether no delivery before this one can have sent ``message``'s links: the first
    delivery of its first attempt, or of an attempt deferred by one that had sent none
    (:data:`UNSENT`); a retry, a replay or a redelivery may have."""
    retries, deferrals, replays = _attempts(message)
    if not first_of_its_attempt or retries or replays:
        return False
    return not deferrals or message.options.get(UNSENT) is True


def first_of_attempt(
    client: StoreClient,
    message: dramatiq.Message[Any],
    max_deliveries: int,
    lifetimes: Lifetimes,
    crawl_id: str | None = None,
) -> bool:
    """Give up on an attempt that keeps coming back unfinished (a worker died on it each time);
    True on the first delivery of this attempt.

    Retries are counted by Dramatiq and deferrals (rate limits) by :func:`defer`; this
    counts the deliveries of one attempt.  The count lives as long as the crawl (the
    grace), not as long as a claim: a message handed back after its worker died, however
    late, is known as a redelivery, and resends the links its earlier try may have
    claimed (:func:`send_claimed`).  It is dropped when the attempt ends.
    """
    # RabbitMQ says whether a message was delivered before: then the first delivery
    # needs no round trip, and the count starts at the second.  Redis does not say.
    redelivered = getattr(message, "redelivered", None)
    if redelivered is False:
        deliveries = 1
    else:
        key = deliveries_key(message)
        added = client.add(key, 1, time=lifetimes.grace if crawl_id is not None else CLAIM_TTL)
        counted = 1 if added else int(client.incr(key))
        deliveries = counted + (1 if redelivered else 0)
    if deliveries > max_deliveries:
        raise PermanentError(
            f"delivered {deliveries} times without finishing; a worker may be dying on it"
        )
    return deliveries == 1


def may_have_unsent_links(
    client: StoreClient, message: dramatiq.Message[Any], url: str, crawl_id: str | None
) -> bool:
    """Whether an earlier delivery of ``message``, whose ``url`` is taken, may have
    claimed links it never sent (it failed, or its worker died, between claiming them
    and sending them): a retry, a replay or a redelivery (RabbitMQ says so; on Redis the
    attempt's delivery count, kept until the attempt ends, shows it) that did not finish
    the URL itself.

    Such a message whose URL is another message's now (its own claim was evicted or
    lost with a Memcached server, and another parent claimed the URL afresh) must crawl
    it all the same: the links it claimed hold its children's claims, which no other
    message sends, and which would otherwise keep their URLs out of the crawl.
    """
    retried = message.options.get("retries", 0) or message.options.get("replays", 0)
    redelivered = getattr(message, "redelivered", None)
    if not retried and redelivered is False:
        return False
    if not retried and redelivered is None and client.get(deliveries_key(message)) is None:
        return False
    return bool(client.get(url_hash(url, crawl_id)) != DONE + owner_token(message.message_id))


def claim_message(
    client: StoreClient,
    message: dramatiq.Message[Any],
    url: str,
    crawl_id: str | None,
    lifetimes: Lifetimes,
) -> str:
    """:func:`claim` for ``message``; a URL taken from under a message that may have
    claimed links it never sent (:func:`may_have_unsent_links`) is its to crawl again."""
    verdict = claim(client, url, message.message_id, crawl_id, lifetimes)
    if verdict == PAUSED:
        return verdict
    if verdict == TAKEN and may_have_unsent_links(client, message, url, crawl_id):
        logger.info("URL %r is another message's now; crawling it again to send its links.", url)
        return OWNED
    return verdict


def deliveries_key(message: dramatiq.Message[Any]) -> str:
    """Where the deliveries of ``message``'s attempt are counted (``--local --state``
    gives back those a kill cut short)."""
    attempt = [message.options.get(name, 0) for name in ("retries", "deferrals", "replays")]
    return f"d:{short_id(message.message_id)}:{attempt[0]}:{attempt[1]}:{attempt[2]}"


def attempt_ended(client: StoreClient, message: dramatiq.Message[Any]) -> None:
    """Drop the delivery count of an attempt that ended (none was kept for a RabbitMQ
    message delivered once)."""
    if getattr(message, "redelivered", None) is not False:
        client.delete(deliveries_key(message))


def defer(
    broker: dramatiq.Broker,
    message: dramatiq.Message[Any],
    delay: int,
    turn: float | None = None,
    *,
    unsent: bool = False,
    **counts: int,
) -> None:
    """Send the message again, same id (so it keeps its claim), ``delay`` ms from now,
    with ``counts`` (``paced=N``) among its options, and the host's ``turn`` it took
    (:func:`crawler.frontier.politeness.next_turn`), if deferred to it: a turn is
    used once, so a message deferred for another reason takes a new one.  ``unsent``:
    no delivery of the message can have sent its links yet (:attr:`Links.unsent`), nor
    will this one, deferred before it sends any (:data:`UNSENT`).

    Unlike a retry this is no failure: rate-limited messages wait, however often.
    """
    deferrals = message.options.get("deferrals", 0) + 1
    options = {"deferrals": deferrals, "turn": turn, UNSENT: unsent, **counts}
    broker.enqueue(message.copy(options=options), delay=delay)


def put_back_paused(broker: dramatiq.Broker, message: dramatiq.Message[Any], longest: int) -> None:
    """Send a paused crawl's message again, same id, after a wait that doubles from a
    second up to ``longest`` milliseconds: it waits in the broker, its retries untouched,
    and looks again whether the crawl was resumed."""
    pauses = message.options.get("pauses", 0)
    delay = min(1000 << min(pauses, 20), longest)
    broker.enqueue(message.copy(options={"pauses": pauses + 1}), delay=delay)


def turn_or_defer(
    stores: Stores,
    broker: dramatiq.Broker,
    message: dramatiq.Message[Any],
    session: requests.Session,
    url: str,
    options: CrawlOptions,
    limits: Limits,
    *,
    via_public: bool,
    unsent: bool = False,
) -> tuple[AbstractContextManager[Any] | None, str | None]:
    """The host's turn for ``message`` (:func:`crawler.frontier.politeness.take_turn`): the
    :class:`Turn` to hold while ``url`` is fetched, or None and why not.  A message
    deferred (its server asked the crawl to wait, over ``--max-rate``, or the host's places
    all taken) is sent again a while later, its claim kept (:func:`defer`; ``unsent``:
    no delivery of it can have sent its links, :attr:`Links.unsent`)."""
    reserved = message.options.get("turn")
    answer = politeness.take_turn(
        stores, session, url, options, limits=limits, via_public=via_public,
        reserved=reserved if isinstance(reserved, (int, float)) else None,
    )  # fmt: skip
    if answer.skipped == outcomes.DEFERRED:
        defer(broker, message, answer.delay, answer.reserved, unsent=unsent)
    if answer.turn is None:
        return None, answer.skipped
    return Turn(answer.turn, broker, message, limits.max_paced, unsent=unsent), None


class Turn(AbstractContextManager["Turn"]):
    """A message's turn at its host, held while its URL is fetched: the host's own
    (:class:`~crawler.frontier.politeness.HostTurn`); and when the server asks the crawl
    to slow down (:class:`ServerBusy`: a 429, a 503 with ``Retry-After``), the message
    is sent again after the wait it asked for, its retries untouched, up to
    ``max_paced`` times (past them the answer is a failed attempt, retried as any): the
    fetch then raises :class:`Deferred`, which the actor's wrapper records as such.

    Parameters:
      host(HostTurn): The host's turn.
      broker(Broker): The broker the message came from.
      message(Message): The message.
      max_paced(int): How often a message waits for its server without spending a retry.
      unsent(bool): No delivery of the message can have sent its links
        (:attr:`Links.unsent`): nor has this one, its fetch not done.
    """

    def __init__(
        self,
        host: politeness.HostTurn,
        broker: dramatiq.Broker,
        message: dramatiq.Message[Any],
        max_paced: int,
        *,
        unsent: bool = False,
    ) -> None:
        self.host, self.broker, self.message, self.max_paced = host, broker, message, max_paced
        self.unsent = unsent

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self.host.__exit__(exc_type, exc, traceback)
        paced = self.message.options.get("paced", 0)
        if not isinstance(exc, ServerBusy) or paced >= self.max_paced:
            return
        delay = exc.delay + politeness.defer_delay()
        defer(self.broker, self.message, delay, unsent=self.unsent, paced=paced + 1)
        raise Deferred(f"{exc}: its host waits, and the page comes back in {delay / 1000:.1f}s")


def take(
    client: StoreClient,
    message: dramatiq.Message[Any],
    url: str,
    sitemap: int,
    options: CrawlOptions,
    limits: Limits,
    lifetimes: Lifetimes,
) -> tuple[str | None, bool, bool]:
    """Claim ``url`` for ``message`` (a sitemap's as one): what became of it if it is not
    this message's to crawl (``cancelled``, ``paused``, ``duplicate``); whether this
    is the message's first delivery (a page's budgets are counted on it alone, by the
    page pipeline's :class:`~crawler.pipeline.budget.BudgetStage`); and whether no
    delivery before it can have sent its links (:func:`links_unsent`).

    A store that failed lately must answer on every node first (``client.ready()``),
    so that no page is fetched whose links and ending could not be recorded."""
    client.ready()
    added = claim_message(client, message, claim_name(url, sitemap), options.crawl_id, lifetimes)
    if added == CANCELLED:
        logger.warning("Skipping URL %r since its crawl was cancelled.", url)
        return outcomes.CANCELLED, False, False
    if added == PAUSED:
        return outcomes.PAUSED, False, False
    if added == TAKEN:
        return outcomes.DUPLICATE, False, False
    once = first_of_attempt(client, message, limits.max_deliveries, lifetimes, options.crawl_id)
    return None, once and not any(_attempts(message)), links_unsent(message, once)


def take_url(
    pool: StorePool,
    actor: dramatiq.Actor[Any, Any],
    message: dramatiq.Message[Any],
    url: str,
    options: CrawlOptions,
    limits: Limits,
    lifetimes: Lifetimes,
    *,
    sitemap: int = 0,
) -> tuple[str | None, Links]:
    """:func:`take` ``url`` for ``message`` (a sitemap's, at level ``sitemap``) of the crawl
    whose ``crawl`` actor is ``actor``, in the dedup store of ``pool`` (or ``Stores``): what
    became of it if it is not the message's to crawl (a paused crawl's message is put back
    a while, :func:`put_back_paused`), and what sends its links."""
    with pool.reserve() as client:
        skipped, first, unsent = take(client, message, url, sitemap, options, limits, lifetimes)
    if skipped == outcomes.PAUSED:  # `crawler pause`: back to the broker a while, retries untouched
        put_back_paused(actor.broker, message, limits.pause_max_delay)
    links = Links(actor, message.message_id, options.crawl_id, lifetimes, first, unsent)
    return skipped, links


@dataclass(frozen=True)
class Links:
    """What sends one message's links (:func:`send_claimed`): the actor, the message
    they come from, its crawl, whether this is the message's first delivery and whether
    a delivery before it may have sent them.

    Parameters:
      actor(dramatiq.Actor): The ``crawl`` actor, whose broker takes the messages.
      parent_id(str): The id of the message the links come from.
      crawl_id(str|None): The crawl's id (None: a bare ``crawl(url)``).
      lifetimes(Lifetimes): How long claims and the crawl's entries live.
      first_delivery(bool): False for a retried, deferred or redelivered message.
      unsent(bool): True when no delivery before this one can have sent the links (the
        first delivery, or one deferred before any was sent: :func:`links_unsent`).
    """

    actor: dramatiq.Actor[Any, Any]
    parent_id: str
    crawl_id: str | None
    lifetimes: Lifetimes
    first_delivery: bool
    unsent: bool

    def send(
        self,
        client: StoreClient,
        urls: Iterable[str],
        kwargs: dict[str, Any],
        own: Mapping[str, Mapping[str, Any]] | None = None,
        priority: int | None = None,
        *,
        sitemaps: bool = False,
    ) -> list[str]:
        """Send ``actor(url, **kwargs)`` for each URL nobody claimed yet (with the
        arguments ``own`` holds for that URL besides): their ids."""
        return send_claimed(
            client,
            self.actor,
            self.parent_id,
            urls,
            kwargs,
            self.crawl_id,
            self.lifetimes,
            first_delivery=self.unsent,
            priority=priority,
            sitemaps=sitemaps,
            own=own,
        )


def child_message_id(parent_id: str, url: str) -> str:
    """The same parent always sends a link under the same id, even when retried."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{parent_id} {url}"))


def send_claimed(
    client: StoreClient,
    actor: dramatiq.Actor[Any, Any],
    parent_id: str,
    urls: Iterable[str],
    kwargs: dict[str, Any],
    crawl_id: str | None,
    lifetimes: Lifetimes,
    *,
    first_delivery: bool = True,
    priority: int | None = None,
    sitemaps: bool = False,
    own: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """Send ``actor(url, **kwargs)`` for each URL nobody has claimed yet (with the
    broker ``priority``, when given; claimed as sitemaps with ``sitemaps``; with the
    arguments of its own ``own`` holds for a URL, a handler's label and data, besides
    ``kwargs``); return the ids of the messages sent.

    The first claim of a URL wins, whatever its message carries: a URL claimed before
    (plainly, or with other arguments of its own) is not sent again for these.

    Most links of a page are claimed already, so one ``get_multi`` finds those and
    only the rest are looked up in the crawl's journal, then added (one ``add_multi``)
    and given message ids.  The new claims are journaled and counted in the crawl's
    counters before anything is sent.
    """
    route = getattr(actor.broker, "route_links", None)
    if route is not None:  # --local --processes: links of other shards claimed by theirs
        urls = route(
            parent_id, list(urls), kwargs, own or {}, crawl_id=crawl_id, priority=priority,
            sitemaps=sitemaps, first_delivery=first_delivery,
        )  # fmt: skip
    # What each message claims, and its entry: a URL, or a keyed request's name
    names = {claim_name(entry, sitemaps): entry for entry in urls}
    digests, keys = _claim_keys(list(names), crawl_id)
    if not keys:
        return []
    options = CrawlOptions.from_message(kwargs.get("options"))
    pages = [url_in(entry) for name, entry in names.items() if not name.startswith(SITEMAP_MARK)]
    pacing = politeness.booking_keys(pages, options)  # read with the claims, for their turns
    links = _look_up(client, keys, digests, crawl_id, pacing)
    children = _child_ids(parent_id, links, first_delivery)
    to_send = _claim_new(client, links, children, crawl_id, lifetimes)
    again: set[str] = set()
    if not first_delivery:
        again = _claimed_before(client, links, children, crawl_id, lifetimes) - to_send
    messages = _messages(actor, names, keys, children, to_send, kwargs, priority, own or {})
    messages, delays = _delayed_to_turns(client, messages, options, links.stored)
    enqueue_all(actor.broker, messages, delays)
    # The links an interrupted try claimed may have been sent then too, and be in hand
    # now: sent again after the longest a message can be in hand (the actor's time
    # limit), their copies find them done rather than fetch them beside them.
    resent = _messages(actor, names, keys, children, again, kwargs, priority, own or {})
    delay = round(lifetimes.resend * 1000) or None
    for message in resent:
        actor.broker.enqueue(message, delay=delay)
    return [message.message_id for message in (*messages, *resent)]


@dataclass(frozen=True)
class _Found:
    """What the store holds of a page's links, as :func:`send_claimed` reads it.

    Parameters:
      keys(dict[str, str]): Each link's claim key, and what its message claims.
      digests(dict[str, bytes]): What each message claims, and its digest in the crawl
        (empty for a bare ``crawl(url)``).
      stored(dict[str, Any]): The claims there already, and the journal's layout keys.
      now(journal.Layout | None): The crawl's journal layout (None: a bare message).
      missing(list[str]): The keys of the links not claimed, in the order of ``keys``.
      recorded(dict[bytes, bytes]): The journal's owner of each missing link it holds.
    """

    keys: dict[str, str]
    digests: dict[str, bytes]
    stored: dict[str, Any]
    now: journal.Layout | None
    missing: list[str]
    recorded: dict[bytes, bytes]


def _claim_keys(names: list[str], crawl_id: str | None) -> tuple[dict[str, bytes], dict[str, str]]:
    """The digest of each of ``names`` in the crawl (none for a bare message), and the
    claim key of each, with the name it stands for."""
    digests = {url: url_digest(url, crawl_id) for url in names} if crawl_id is not None else {}
    keys = {(_key(digests[url]) if crawl_id is not None else url_hash(url)): url for url in names}
    return digests, keys


def _look_up(
    client: StoreClient,
    keys: dict[str, str],
    digests: dict[str, bytes],
    crawl_id: str | None,
    also: list[str],
) -> _Found:
    """The links' claims (one ``get_multi``, which reads the keys ``also`` names too)
    and, for those not claimed, what the crawl's journal holds."""
    # The journal's layout comes in the same round trip, for the links not claimed yet.
    state = journal.state_keys(crawl_id) if crawl_id is not None else []
    stored = client.get_multi([*keys, *state, *also])
    now = journal.layout(crawl_id, stored) if crawl_id is not None else None
    missing = [key for key in keys if key not in stored]
    recorded: dict[bytes, bytes] = {}
    if crawl_id is not None and missing:
        recorded = journal.owners(client, crawl_id, (digests[keys[key]] for key in missing), now)
    return _Found(keys, digests, stored, now, missing, recorded)


def _child_ids(parent_id: str, links: _Found, first_delivery: bool) -> dict[str, str]:
    """The message id of each link the message may send, by claim key: those not
    claimed; on a later delivery, those claimed too (maybe by this very message)."""
    # Message ids only for the links this message may send: most are claimed already.
    children = {key: child_message_id(parent_id, links.keys[key]) for key in links.missing}
    if not first_delivery:
        children.update(
            (key, child_message_id(parent_id, url))
            for key, url in links.keys.items()
            if key in links.stored
        )
    return children


def _claim_new(
    client: StoreClient,
    links: _Found,
    children: dict[str, str],
    crawl_id: str | None,
    lifetimes: Lifetimes,
) -> set[str]:
    """Claim the links nobody holds, in the store or the crawl's journal (one
    ``add_multi``), then journal and count those claimed: their keys, to send."""
    fresh = {
        key: owner_token(children[key])
        for key in links.missing
        if crawl_id is None or links.digests[links.keys[key]] not in links.recorded
    }
    taken = set(client.add_multi(fresh, time=ttl(crawl_id, lifetimes))) if fresh else set()
    if taken:
        # A store may list a key it failed to store (pylibmc did, out of memory) with
        # the keys another message holds: only a key that is there now is taken; for
        # the others the page is retried rather than its links lost.
        unstored = taken - set(client.get_multi(list(taken)))
        if unstored:
            raise TransientError(f"Memcached did not store {len(unstored)} claim(s) of links")
    to_send = {key for key in fresh if key not in taken}
    if crawl_id is not None and links.now is not None:
        entries = {links.digests[links.keys[key]]: fresh[key] for key in to_send}
        journal_and_count(client, crawl_id, links.now, entries, lifetimes.grace)
    return to_send


def _claimed_before(
    client: StoreClient,
    links: _Found,
    children: dict[str, str],
    crawl_id: str | None,
    lifetimes: Lifetimes,
) -> set[str]:
    """The keys of the links this very message claimed on an earlier, interrupted try:
    sent again, whether their claim still stands or only the journal remembers it."""
    # The earlier try may have stopped between claiming them and journaling them (with
    # their count as discovered, in the same round trip): those whose claim stands and
    # that the journal lacks are journaled and counted now.
    again, standing = set(), {}
    for key in links.keys:
        mine = owner_token(children[key])
        if links.stored.get(key) == mine:
            again.add(key)
            standing[key] = mine
        elif (
            key in links.missing
            and links.recorded.get(links.digests.get(links.keys[key], b"")) == mine
        ):
            again.add(key)
    if crawl_id is not None and links.now is not None and standing:
        entries = {links.digests[links.keys[key]]: mine for key, mine in standing.items()}
        known = journal.owners(client, crawl_id, entries, links.now)
        unjournaled = {
            digest: mine for digest, mine in entries.items() if known.get(digest) != mine
        }
        journal_and_count(client, crawl_id, links.now, unjournaled, lifetimes.grace)
    return again


def _messages(
    actor: dramatiq.Actor[Any, Any],
    names: dict[str, str],
    keys: dict[str, str],
    children: dict[str, str],
    to_send: set[str],
    kwargs: dict[str, Any],
    priority: int | None,
    own: Mapping[str, Mapping[str, Any]],
) -> list[dramatiq.Message[Any]]:
    """A message for each link of ``to_send``, in the page's order: of ``actor``, or of
    its sitemaps' actor for the sitemaps' claims (:func:`claim_name`); with the
    arguments ``own`` holds for its entry (a URL, or a keyed request's name) besides
    ``kwargs``."""
    return [
        message_of(
            actor,
            url_in(names[name]),
            {**kwargs, **own[names[name]]} if names[name] in own else kwargs,
            priority,
            sitemap=name.startswith(SITEMAP_MARK),
            message_id=children[key],
        )
        for key, name in keys.items()
        if key in to_send
    ]


def _delayed_to_turns(
    client: StoreClient,
    messages: list[dramatiq.Message[Any]],
    options: CrawlOptions,
    stored: Mapping[str, Any],
) -> tuple[list[dramatiq.Message[Any]], dict[str, int]]:
    """The pages' messages, each with its host's turn booked
    (:func:`crawler.frontier.politeness.book_turns`, from what ``stored`` holds of the
    hosts) among its options, and how long each waits in the broker for it (ms, by
    message id): it comes once, at its turn, rather than once to find its turn later and
    again when deferred to it."""
    pages = {m.message_id: m.args[0] for m in messages if m.actor_name != SITEMAP_ACTOR}
    if not pages:
        return messages, {}
    turns = politeness.book_turns(client, pages, options, stored)
    if not turns:
        return messages, {}
    now, booked, delays = time.time(), [], {}
    for message in messages:
        turn = turns.get(message.message_id)
        if turn is None:
            booked.append(message)
            continue
        booked.append(message.copy(options={"turn": turn}))
        if turn - now > politeness.TURN_WAIT:  # nearer, its delivery waits for it
            delays[message.message_id] = math.ceil((turn - now - politeness.TURN_EARLY) * 1000)
    return booked, delays


def journal_and_count(
    client: StoreClient, crawl_id: str, now: journal.Layout, claimed: dict[bytes, bytes], ttl: int
) -> None:
    """Journal the links just claimed and count them as discovered, before they are
    sent: the counter's increment and the journal's appends in one round trip a server
    (:func:`crawler.frontier.journal.record`)."""
    discovered = counters.crawl_key(crawl_id, counters.DISCOVERED)
    journal.record(client, crawl_id, now, claimed, ttl, {discovered: len(claimed)})


def enqueue_all(
    broker: dramatiq.Broker,
    messages: list[dramatiq.Message[Any]],
    delays: Mapping[str, int] | None = None,
) -> None:
    """Put ``messages`` on the broker, returning once it holds them all, each delayed by
    the milliseconds ``delays`` holds for its id: RabbitMQ's broker publishes them as
    one transaction (``enqueue_all``), Redis's answers each."""
    delays = delays or {}
    together = getattr(broker, "enqueue_all", None)
    if together is not None:
        together(messages, delays)
        return
    for message in messages:
        broker.enqueue(message, delay=delays.get(message.message_id))
