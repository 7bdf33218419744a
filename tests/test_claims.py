"""Claims against a real Memcached: who sends a link, and how deliveries are bounded."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import dramatiq
import pytest
import redis
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import dq_name

from crawler import example
from crawler.environment import Lifetimes, Limits
from crawler.errors import PermanentError, TransientError
from crawler.frontier import claims, counters, journal, politeness
from crawler.frontier.digests import owner_token, short_id, url_digest
from crawler.options import CrawlOptions
from crawler.stores.memcached import MemcachedClient
from crawler.stores.redis import RedisStorePool
from crawler.tracking.bookkeeping import settle
from tests.test_counting_once import Message, store_pool

URLS = [f"http://127.0.0.1:1/page/{i}.html" for i in range(5)]


def queued(broker: StubBroker) -> list[dramatiq.Message[Any]]:
    return [dramatiq.Message.decode(body) for body in broker.queues[example.crawl.queue_name].queue]


LIFETIMES = Lifetimes()


def send(client: Any, parent: str, *, first_delivery: bool = True) -> list[str]:
    return claims.send_claimed(
        client,
        example.crawl,
        parent,
        URLS,
        {"depth": 1},
        "crawl-1",
        LIFETIMES,
        first_delivery=first_delivery,
    )


def test_send_claimed_sends_only_unclaimed_links_and_counts_them(
    store: Any, stub_broker: StubBroker
) -> None:
    store.set(claims.url_hash(URLS[1], "crawl-1"), b"someone-else")
    store.set(claims.url_hash(URLS[3], "crawl-1"), claims.DONE)

    sent = send(store, "parent-1")

    expected = [claims.child_message_id("parent-1", URLS[i]) for i in (0, 2, 4)]
    assert sent == expected
    assert [m.message_id for m in queued(stub_broker)] == expected
    assert [m.args[0] for m in queued(stub_broker)] == [URLS[0], URLS[2], URLS[4]]
    for i, message_id in zip((0, 2, 4), expected, strict=True):
        assert store.get(claims.url_hash(URLS[i], "crawl-1")) == owner_token(message_id)
    assert counters.read(store, "crawl-1")[counters.DISCOVERED] == 3  # type: ignore[index]
    # Another page linking to the same URLs sends nothing: all are claimed now.
    assert send(store, "parent-2") == []


def test_links_of_a_paced_crawl_are_sent_delayed_to_their_hosts_turns_booked_then(
    memcached: MemcachedClient, stub_broker: StubBroker
) -> None:
    options = CrawlOptions(max_rate=2, crawl_id="crawl-1").to_message()
    before = time.time()
    sent = claims.send_claimed(
        memcached, example.crawl, "parent-1", URLS, {"options": options}, "crawl-1", LIFETIMES
    )

    assert len(sent) == len(URLS)
    # The host's first turn is now: that page goes at once; each next one is half a
    # second on, and its message waits in the delay queue until just before it.
    (first,) = queued(stub_broker)
    assert first.args[0] == URLS[0] and before <= first.options["turn"] <= time.time()
    delay_queue = stub_broker.queues[dq_name(example.crawl.queue_name)].queue
    delayed = sorted(
        (dramatiq.Message.decode(body) for body in delay_queue),
        key=lambda message: message.options["turn"],
    )
    assert [message.args[0] for message in delayed] == URLS[1:]
    turns = [message.options["turn"] - first.options["turn"] for message in delayed]
    assert turns == pytest.approx([0.5, 1.0, 1.5, 2.0])
    for message in delayed:  # the broker's eta: TURN_EARLY before the turn
        early = message.options["turn"] - message.options["eta"] / 1000
        assert early == pytest.approx(politeness.TURN_EARLY, abs=0.02)


def test_a_redelivered_parent_sends_again_what_it_claimed_before(
    store: Any, stub_broker: StubBroker
) -> None:
    first = send(store, "parent-1")
    assert len(first) == len(URLS)
    # Delivered again (the worker died after claiming): on the first delivery nothing is
    # taken as its own, on a redelivery its own claims are sent again under the same ids.
    assert send(store, "parent-1") == []
    assert send(store, "parent-1", first_delivery=False) == first
    assert counters.read(store, "crawl-1")[counters.DISCOVERED] == len(URLS)  # type: ignore[index]


class Delivery:
    """A message as a broker hands it over; ``redelivered`` as RabbitMQ says it, if at all."""

    def __init__(self, redelivered: bool | None, retries: int = 0) -> None:
        self.message_id = "message-1"
        self.options = {"retries": retries} if retries else {}
        if redelivered is not None:
            self.redelivered = redelivered


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_deliveries_of_one_attempt_are_bounded(store: Any, broker: str) -> None:
    def deliver(nth: int) -> bool:
        redelivered = (nth > 1) if broker == "rabbitmq" else None
        return claims.first_of_attempt(store, Delivery(redelivered), 3, LIFETIMES)  # type: ignore[arg-type]

    assert deliver(1) is True
    assert deliver(2) is False
    assert deliver(3) is False
    with pytest.raises(PermanentError, match="delivered 4 times"):
        deliver(4)
    # An attempt that ended leaves no count behind (Redis keeps one per attempt).
    claims.attempt_ended(store, Delivery(None if broker == "redis" else True))  # type: ignore[arg-type]
    assert store.get_multi([f"d:{short_id('message-1')}:0:0:0"]) == {}
    # A retry is a new attempt with its own count, whose links an earlier one may have sent.
    retry = Delivery(False, retries=1)
    assert claims.first_of_attempt(store, retry, 3, LIFETIMES) is True  # type: ignore[arg-type]
    assert claims.links_unsent(retry, True) is False  # type: ignore[arg-type]


def test_a_message_handed_back_after_its_claims_expired_resends_the_links_it_claimed(
    store: Any, stub_broker: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Claims of a second (CRAWLER_CLAIM_TTL=1), and a Redis broker's message, which does
    # not say whether it was delivered before.
    lifetimes = Lifetimes(claim=1)
    options = CrawlOptions(crawl_id="crawl-1")
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name="crawler", actor_name="crawl", args=("http://127.0.0.1:1/",), kwargs={},
        options={}, message_id="parent-1",
    )  # fmt: skip

    def take() -> bool:
        skipped, first, unsent = claims.take(
            store, message, "http://127.0.0.1:1/", 0, options, Limits(), lifetimes
        )
        assert skipped is None and unsent == first
        return first

    assert take() is True
    # The first try claims and journals its links, and its worker dies before they are sent.
    monkeypatch.setattr(claims, "enqueue_all", lambda broker, messages, delays=None: None)
    sent_before = claims.send_claimed(
        store, example.crawl, "parent-1", URLS, {}, "crawl-1", lifetimes, first_delivery=True
    )
    monkeypatch.undo()
    assert len(sent_before) == len(URLS) and queued(stub_broker) == []
    # Handed back long after every claim expired: still a redelivery, so the links go out.
    time.sleep(2.1)
    assert take() is False
    sent = claims.send_claimed(
        store, example.crawl, "parent-1", URLS, {}, "crawl-1", lifetimes, first_delivery=False
    )
    assert sent == sent_before
    # Sent after the actor's time limit: a copy sent before and in hand now is done by then.
    assert queued(stub_broker) == []
    delayed = [
        dramatiq.Message.decode(body)
        for body in stub_broker.queues[dq_name(example.crawl.queue_name)].queue
    ]
    assert [m.message_id for m in delayed] == sent_before
    soonest = time.time() * 1000 + lifetimes.resend * 1000 - 2000
    assert all(m.options["eta"] >= soonest for m in delayed)


def test_a_message_deferred_before_any_delivery_could_send_its_links_sends_them_plainly(
    store: Any, stub_broker: StubBroker
) -> None:
    # A page deferred for its host's turn sent no link: its next delivery need not look
    # for links sent before (10 message ids and the journal a page), but counts no
    # budget again; one deferred after a redelivery (a worker died on it, maybe after
    # claiming its links) still looks.
    options = CrawlOptions(crawl_id="crawl-1")
    url = "http://127.0.0.1:1/"
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=example.crawl.queue_name, actor_name="crawl", args=(url,), kwargs={},
        options={}, message_id="parent-1",
    )  # fmt: skip

    def take(message: dramatiq.Message[Any]) -> tuple[bool, bool]:
        skipped, first, unsent = claims.take(store, message, url, 0, options, Limits(), LIFETIMES)
        assert skipped is None
        return first, unsent

    def deferred(unsent: bool) -> dramatiq.Message[Any]:
        claims.defer(stub_broker, message, 0, unsent=unsent)
        delays = stub_broker.queues[dq_name(example.crawl.queue_name)]
        return dramatiq.Message.decode(delays.get_nowait())

    assert take(message) == (True, True)
    clean = deferred(unsent=True)
    assert take(clean) == (False, True)
    assert take(clean) == (False, False)  # a redelivery of that attempt
    assert take(message) == (False, False)  # the first attempt, redelivered
    assert take(deferred(unsent=False)) == (False, False)
    # Deferred again from a clean delivery, its next one is clean too.
    twice = clean.copy(options={"deferrals": 2})
    assert take(twice) == (False, True)


def test_when_claims_are_gone_the_journal_says_who_owns_each_url(
    store: Any, stub_broker: StubBroker
) -> None:
    first = send(store, "parent-1")
    # The claims expire (CRAWLER_CLAIM_TTL) or are evicted; the journal stays.
    for url in URLS:
        store.delete(claims.url_hash(url, "crawl-1"))

    assert send(store, "parent-2") == []
    assert send(store, "parent-1", first_delivery=False) == first
    owner, stranger = first[2], claims.child_message_id("parent-2", URLS[2])
    assert claims.claim(store, URLS[2], stranger, "crawl-1", LIFETIMES) == claims.TAKEN
    assert claims.claim(store, URLS[2], owner, "crawl-1", LIFETIMES) == claims.OWNED
    assert counters.read(store, "crawl-1")[counters.DISCOVERED] == len(URLS)  # type: ignore[index]


def test_a_seed_claimed_by_its_consumer_is_journaled_too(store: Any) -> None:
    assert claims.claim(store, URLS[0], "seed-1", "crawl-1", LIFETIMES) == claims.OWNED
    store.delete(claims.url_hash(URLS[0], "crawl-1"))

    assert claims.claim(store, URLS[0], "seed-2", "crawl-1", LIFETIMES) == claims.TAKEN
    assert claims.claim(store, URLS[0], "seed-1", "crawl-1", LIFETIMES) == claims.OWNED
    # Another crawl has claims of its own.
    assert claims.claim(store, URLS[0], "seed-2", "crawl-2", LIFETIMES) == claims.OWNED


def test_journal_entries_of_many_urls_spread_over_buckets_and_read_back(
    store: Any,
) -> None:
    digests = {url_digest(f"http://h/{i}", "c"): owner_token(f"m{i}") for i in range(3000)}
    half = dict(list(digests.items())[:1500])
    journal.write(store, "c", half, ttl=60)
    journal.write(store, "c", {d: o for d, o in digests.items() if d not in half}, ttl=60)
    # A second entry for a URL (a claim made again after a loss) never hides the first.
    some = next(iter(digests))
    journal.write(store, "c", {some: owner_token("late")}, ttl=60)

    assert journal.owners(store, "c", digests) == digests
    assert journal.owners(store, "c", [url_digest("http://h/nope", "c")]) == {}
    # Level 0 is read, level 1 written beside it: each entry twice.
    assert journal.read_layout(store, "c") == journal.Layout(read=0, top=1)
    buckets = [key for key in journal.keys(store, "c") if key not in journal.state_keys("c")]
    stored = store.get_multi(buckets)
    assert sum(map(len, stored.values())) == 2 * 3001 * journal.ENTRY


def fill_journal(store: Any, crawl_id: str, count: int, batch: int) -> dict[bytes, bytes]:
    """``count`` entries written as pages write them, ``batch`` at a time."""
    written: dict[bytes, bytes] = {}
    for first in range(0, count, batch):
        claimed = {
            url_digest(f"http://h/{i}", crawl_id): owner_token(f"m{i}")
            for i in range(first, min(first + batch, count))
        }
        now = journal.read_layout(store, crawl_id)
        journal.record(store, crawl_id, now, claimed, ttl=600)
        written.update(claimed)
    return written


def test_the_journal_grows_by_levels_and_a_lookup_reads_one_bucket_of_bounded_size(
    store: Any,
) -> None:
    # Four times level 1's start: levels 1 and 2 were copied and completed on the way.
    written = fill_journal(store, "c", 4 * journal.SPAN + 100, batch=100)

    now = journal.read_layout(store, "c")
    assert now == journal.Layout(read=2, top=3)
    assert journal.owners(store, "c", written, now) == written
    assert journal.owners(store, "c", [url_digest("http://h/nope", "c")]) == {}
    sizes = [
        len(store.get(journal._bucket_key("c", 2, bucket)) or b"") // journal.ENTRY
        for bucket in range(journal.buckets(2))
    ]
    # Some 33 entries a bucket on average, never the whole crawl's share of 256 buckets.
    assert sum(sizes) / len(sizes) < 2 * journal.PER_BUCKET
    assert max(sizes) < 4 * journal.PER_BUCKET
    # Level 0 was deleted as level 1 was copied into level 2: nobody reads it now.
    assert store.get_multi([journal._bucket_key("c", 0, b) for b in range(journal.BASE)]) == {}


def test_a_writer_whose_layout_went_stale_writes_where_lookups_will_read(store: Any) -> None:
    fill_journal(store, "c", journal.SPAN - 10, batch=500)
    stale = journal.read_layout(store, "c")
    assert stale == journal.Layout(read=0, top=1)
    fill_journal(store, "c", 2 * journal.SPAN, batch=500)  # level 1 is current now
    late = {url_digest("http://late/", "c"): owner_token("late")}

    journal.record(store, "c", stale, late, ttl=600)  # written at levels 0, 1 and 2

    now = journal.read_layout(store, "c")
    assert now.top == 2
    assert journal.owners(store, "c", late, journal.Layout(read=2, top=2)) == late


def test_a_message_finishes_its_url_once_and_its_ending_is_counted_once(
    store: Any,
) -> None:
    owner = claims.child_message_id("parent-1", URLS[0])
    assert claims.claim(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.OWNED

    assert claims.finish(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.FIRST
    # Killed before its ending was counted: a copy of the message ends it in its place ...
    assert claims.claim(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.OWNED
    assert claims.finish(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.FIRST
    counted = counters.amounts_of("crawl-1", "crawled", None)
    claims.journal_done(store, URLS[0], owner, "crawl-1", LIFETIMES, counted)
    # ... and once it was counted, a copy (its ack was lost) finds the URL done by itself ...
    assert claims.claim(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.TAKEN
    assert claims.ending_of_duplicate(store, URLS[0], owner, "crawl-1") == claims.REPEAT
    assert claims.finish(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.REPEAT
    # ... another message for the URL is not known from the claim: it has an ended mark.
    other = claims.child_message_id("parent-2", URLS[0])
    assert claims.ending_of_duplicate(store, URLS[0], other, "crawl-1") == claims.UNKNOWN
    for first in (False, None, None):
        counters.ended(store, "crawl-1", owner, "crawled", LIFETIMES, first)
    counters.ended(store, "crawl-1", other, "duplicate", LIFETIMES)
    counters.ended(store, "crawl-1", other, "duplicate", LIFETIMES)
    figures = counters.read(store, "crawl-1")
    assert figures is not None
    assert (figures["crawled"], figures["duplicate"]) == (2, 1)


def test_a_given_up_url_counts_once_though_a_copy_fetches_it_and_counts_again_when_replayed(
    store: Any,
) -> None:
    def end(outcome: str) -> None:
        first = None
        if outcome == "crawled":
            ending = claims.finish(store, URLS[0], owner, "crawl-1", LIFETIMES)
            first = None if ending == claims.UNKNOWN else ending == claims.FIRST
        else:
            claims.give_up(store, URLS[0], owner, "crawl-1", LIFETIMES)
        counters.ended(store, "crawl-1", owner, outcome, LIFETIMES, first)

    def figures() -> tuple[int, int]:
        read = counters.read(store, "crawl-1")
        assert read is not None
        return read["failed"], read["crawled"]

    owner = claims.child_message_id("parent-1", URLS[0])
    assert claims.claim(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.OWNED
    end("failed")
    assert figures() == (1, 0)
    # A copy of the message (its parent redone) may still try, and fetches it: no recount.
    assert claims.claim(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.OWNED
    end("crawled")
    assert figures() == (1, 0)

    # --replay of another given-up URL: reopened, then counted as what it becomes.
    owner = claims.child_message_id("parent-1", URLS[1])
    claims.claim(store, URLS[1], owner, "crawl-1", LIFETIMES)
    claims.give_up(store, URLS[1], owner, "crawl-1", LIFETIMES)
    counters.ended(store, "crawl-1", owner, "failed", LIFETIMES)
    assert figures() == (2, 0)
    claims.reopen(store, URLS[1], owner, "crawl-1", LIFETIMES)
    counters.reopened(store, "crawl-1", owner)
    ending = claims.finish(store, URLS[1], owner, "crawl-1", LIFETIMES)
    assert ending == claims.FIRST
    counters.ended(store, "crawl-1", owner, "crawled", LIFETIMES, True)
    assert figures() == (1, 1)


def test_a_copy_of_a_finished_message_that_comes_once_its_claim_is_gone_is_a_repeat(
    store: Any,
) -> None:
    """A worker killed before the broker heard its message was done, or a redone parent
    that sends its links again: a copy of a finished message comes back after its URL's
    claim expired.  The journal knows the URL was finished: the copy is neither fetched
    nor counted again (the bookkeeping as workers and ``--local`` run it)."""
    message = Message()
    url, crawl_id = URLS[0], "crawl-1"
    assert claims.claim(store, url, message.message_id, crawl_id, LIFETIMES) == claims.OWNED
    counters.start(store, crawl_id, 1, LIFETIMES.grace)
    end = settle(store_pool(store), LIFETIMES, None, patience=5)
    end({"url": url, "outcome": "crawled"}, message)
    store.delete(claims.url_hash(url, crawl_id))  # the claim expired

    assert claims.claim(store, url, message.message_id, crawl_id, LIFETIMES) == claims.TAKEN
    end({"url": url, "outcome": "duplicate"}, message)
    figures = counters.read(store, crawl_id)
    assert figures is not None
    assert (figures["crawled"], figures["duplicate"], figures["outstanding"]) == (1, 0, 0)


def test_a_message_whose_claim_was_lost_is_counted_once_through_its_mark(
    store: Any,
) -> None:
    owner = claims.child_message_id("parent-1", URLS[0])
    # Its claim expired or was evicted while it was in hand: whether it ended before is
    # not known from the claim, so its mark decides, once.
    assert claims.finish(store, URLS[0], owner, "crawl-1", LIFETIMES) == claims.UNKNOWN
    counters.ended(store, "crawl-1", owner, "crawled", LIFETIMES)
    counters.ended(store, "crawl-1", owner, "crawled", LIFETIMES)
    read = counters.read(store, "crawl-1")
    assert read is not None and read["crawled"] == 1


def test_the_redis_store_answers_as_memcached_does(own_redis_store: Any) -> None:
    """The operations whose edge cases the frontier relies on, on the DEDUP_URL store."""
    own_redis_store.flush()
    client = RedisStorePool(own_redis_store.url).client

    assert client.add("k", b"a", time=60) is True
    assert client.add("k", b"b", time=60) is False
    assert client.add_multi({"k": b"x", "j": b"y"}, time=60) == ["k"]
    assert client.get_multi(["k", "j", "none"]) == {"k": b"a", "j": b"y"}
    with pytest.raises(KeyError):
        client.incr("counter", 2)  # as Memcached's NotFound: a counter is added first
    client.add("counter", 1, time=60)
    assert client.incr("counter", 2) == 3 and client.decr("counter", 1) == 2
    assert client.append("none", b"x") is False
    assert client.append("k", b"bc") is True and client.get("k") == b"abc"
    assert 0 < redis.Redis.from_url(own_redis_store.url).ttl("k") <= 60  # kept by append
    _, token = client.gets("k")
    assert client.cas("k", b"new", token, time=60) is True
    assert client.cas("k", b"newer", token, time=60) is False and client.get("k") == b"new"
    assert client.touch("k", 600) is True and client.touch("none", 600) is False
    assert client.delete("k") is True and client.get("k") is None
    assert client.get_stats()[0][1]["evictions"] == 0


class FailingToStore:
    """A store whose ``add`` and ``add_multi`` fail without storing, as pylibmc reported a
    Memcached out of memory: the same False (or listed key) as a key already held."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def add(self, key: str, value: Any, time: float = 0) -> bool:
        return False

    def add_multi(self, mapping: Mapping[str, Any], time: float = 0) -> list[str]:
        return list(mapping)


def test_a_claim_memcached_failed_to_store_retries_instead_of_skipping_the_url(
    store: Any, stub_broker: StubBroker
) -> None:
    failing = FailingToStore(store)

    with pytest.raises(TransientError, match="did not store the URL's claim"):
        claims.claim(failing, URLS[0], "seed-1", "crawl-1", LIFETIMES)
    with pytest.raises(TransientError, match="did not store 5 claim"):
        send(failing, "parent-1")
    assert queued(stub_broker) == []


def test_touch_multi_gives_every_key_that_is_there_more_time_in_one_call(store: Any) -> None:
    # Keys of every store's layout: the crawl's figures (one hash tag) and per-URL keys.
    keys = [f"crawl:{{crawl-1}}:n{i}" for i in range(3)] + [f"url-{i}" for i in range(3)]
    for key in keys:
        store.set(key, b"v", time=2)
    touches = _touches(store)
    store.touch_multi([*keys, "absent"], 600)
    if isinstance(store, MemcachedClient):
        hits, misses = (
            after - before for after, before in zip(_touches(store), touches, strict=True)
        )
        assert (hits, misses) == (len(keys), 1)
    else:
        for key in keys:
            assert store.redis.ttl(key) > 500
        assert store.redis.exists("absent") == 0
    assert store.get_multi(keys) == dict.fromkeys(keys, b"v")


def _touches(store: Any) -> tuple[int, int]:
    """Memcached's count of touches that found their key, and of those that did not."""
    if not isinstance(store, MemcachedClient):
        return 0, 0
    ((_, stats),) = store.get_stats()
    return int(stats["touch_hits"]), int(stats["touch_misses"])


def test_incr_and_append_writes_what_is_there_and_names_what_is_not(store: Any) -> None:
    store.add("crawl:{crawl-1}:counter", 5, time=60)
    store.add("bucket-a", b"ab", time=60)
    missing = store.incr_and_append(
        {"crawl:{crawl-1}:counter": 2, "crawl:{crawl-1}:none": 3},
        {"bucket-a": b"cd", "bucket-b": b"ef"},
    )
    assert missing == ({"crawl:{crawl-1}:counter": 7, "crawl:{crawl-1}:none": None}, ["bucket-b"])
    found = store.get_multi(["crawl:{crawl-1}:counter", "bucket-a"])
    assert int(found["crawl:{crawl-1}:counter"]) == 7 and found["bucket-a"] == b"abcd"
    assert store.get_multi(["crawl:{crawl-1}:none", "bucket-b"]) == {}  # none made


def test_new_links_journal_and_count_in_one_call_and_create_what_is_missing(store: Any) -> None:
    owners = {url_digest(url, "crawl-1"): owner_token(f"m-{url}") for url in URLS}
    start = journal.read_layout(store, "crawl-1")
    claims.journal_and_count(store, "crawl-1", start, owners, 60)  # counter and buckets created
    claims.journal_and_count(store, "crawl-1", start, {}, 60)  # nothing: no round trip
    assert journal.owners(store, "crawl-1", owners) == {d: o[:8] for d, o in owners.items()}
    read = counters.read(store, "crawl-1")
    assert read is not None and read["discovered"] == len(URLS)
    more = {url_digest("http://more.test/", "crawl-1"): owner_token("m-more")}
    claims.journal_and_count(store, "crawl-1", start, more, 60)  # appended and added
    read = counters.read(store, "crawl-1")
    assert read is not None and read["discovered"] == len(URLS) + 1
