"""A host's turns (``--max-rate``, ``Crawl-delay``, ``--auto-throttle``): taken from
one schedule in the crawl's store, each once, ``interval`` apart, by every thread; and
``--auto-throttle``'s delay, slower at once and faster again slowly."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from crawler.errors import ServerBusy
from crawler.frontier import politeness
from crawler.frontier.politeness import Pace, adapted, next_turn, pace_of, turn_interval
from crawler.options import CrawlOptions
from crawler.stores.memory import MemoryClient


def test_threads_take_turns_of_one_schedule_each_once_and_interval_apart() -> None:
    client, now = MemoryClient(), 1000.0
    taken: list[float | None] = []
    lock = threading.Lock()

    def take(count: int) -> None:
        for _ in range(count):
            turn = next_turn(client, "crawl:c:turn:h", 0.1, now)
            with lock:
                taken.append(turn)

    threads = [threading.Thread(target=take, args=(25,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert None not in taken
    assert sorted(t for t in taken if t is not None) == pytest.approx(
        [now + 0.1 * i for i in range(200)]
    )


def test_a_host_idle_since_its_last_turn_has_one_now_and_the_next_an_interval_on() -> None:
    client = MemoryClient()
    assert next_turn(client, "k", 0.5, 100.0) == 100.0
    assert next_turn(client, "k", 0.5, 100.0) == pytest.approx(100.5)
    assert next_turn(client, "k", 0.5, 200.0) == 200.0  # idle: no turn kept from the past
    assert next_turn(client, "k", 0.5, 200.0) == pytest.approx(200.5)


def test_turns_are_not_taken_further_ahead_than_turn_ahead() -> None:
    client, interval = MemoryClient(), 60.0
    ahead = int(politeness.TURN_AHEAD / interval)
    turns = [next_turn(client, "k", interval, 0.0) for _ in range(ahead + 1)]
    assert turns[-1] == pytest.approx(politeness.TURN_AHEAD)
    assert next_turn(client, "k", interval, 0.0) is None  # none within reach: ask later


def test_the_slowest_of_rate_crawl_delay_and_auto_throttle_sets_the_interval() -> None:
    assert turn_interval(CrawlOptions(), None) is None
    assert turn_interval(CrawlOptions(max_rate=10), None) == pytest.approx(0.1)
    assert turn_interval(CrawlOptions(max_rate=10), 2.0) == pytest.approx(2.0)
    assert turn_interval(CrawlOptions(max_rate=10), None, 0.3) == pytest.approx(0.3)
    assert turn_interval(CrawlOptions(max_rate=10), None, 0.01) == pytest.approx(0.1)  # floor
    assert turn_interval(CrawlOptions(), None, 0.01) == pytest.approx(0.01)


def test_auto_throttle_is_slower_at_once_and_faster_again_slowly() -> None:
    fresh, careful = Pace(0.1), Pace(0.1, careful=True)
    assert adapted(fresh, 0.5) == Pace(0.5)  # a slower server: its latency at once
    assert adapted(fresh, None, slower=True) == Pace(0.2, careful=True)  # a 429, a failure
    assert adapted(Pace(40.0), None, slower=True).delay == politeness.AUTO_MAX
    assert adapted(fresh, 0.002).delay == pytest.approx(0.051)  # before any 429: halfway
    assert adapted(careful, 0.002).delay == pytest.approx(0.1 * (1 - politeness.AUTO_FASTER))
    assert adapted(Pace(0.00101, True), 0.001).delay == 0.001  # never below the latency
    pace, answers = Pace(0.2, careful=True), 0
    while pace.delay > 0.1:  # from half the rate back to it, once a server refused
        pace, answers = adapted(pace, 0.001), answers + 1
    assert 60 <= answers <= 75
    assert Pace.read(Pace(0.0123, True).written()) == Pace(0.0123, True)
    assert Pace.read(None) == Pace(politeness.AUTO_START, False)


def test_per_ip_paces_the_hosts_of_one_address_together(monkeypatch: pytest.MonkeyPatch) -> None:
    addresses = {"a.test": "192.0.2.1", "b.test": "192.0.2.1", "c.test": "192.0.2.2"}

    def getaddrinfo(host: str, *_: object, **__: object) -> list[tuple[Any, ...]]:
        if host not in addresses:
            raise socket.gaierror(host)
        return [(0, 0, 0, "", (addresses[host], 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    politeness.address_of.cache_clear()
    by_ip, by_host = CrawlOptions(per_ip=True), CrawlOptions()
    try:
        assert pace_of("http://a.test/x", by_ip) == pace_of("http://b.test:8080/y", by_ip)
        assert pace_of("http://a.test/x", by_ip) != pace_of("http://c.test/", by_ip)
        assert pace_of("http://a.test/x", by_host) == "a.test"
        assert pace_of("http://nowhere.invalid/", by_ip) == "nowhere.invalid"  # unresolved
    finally:
        politeness.address_of.cache_clear()


def test_each_answer_faster_than_the_delay_is_kept_for_every_worker() -> None:
    from crawler.stores.memory import MemoryPool

    pool, options = MemoryPool(MemoryClient()), CrawlOptions(crawl_id="c", auto_throttle=True)
    key = politeness.delay_key("c", pace_of("http://h.test/", options))
    pace = Pace(0.1, careful=True)
    with pool.reserve() as client:
        client.set(key, pace.written())  # a host that once asked the crawl to slow down
    for _ in range(3):
        turn = politeness.HostTurn(pool, "http://h.test/", options, "h.test", adaptive=pace)
        with turn:
            turn.answered(0.001)
        with pool.reserve() as client:
            kept = Pace.read(client.get(key))
        assert kept.careful
        assert kept.delay == pytest.approx(pace.delay * (1 - politeness.AUTO_FASTER), rel=1e-5)
        pace = kept


def test_a_slower_answer_is_not_undone_by_a_faster_one_that_read_the_pace_before_it() -> None:
    from crawler.stores.memory import MemoryPool

    pool, options = MemoryPool(MemoryClient()), CrawlOptions(crawl_id="c", auto_throttle=True)
    key = politeness.delay_key("c", "h.test")
    read_before = Pace(0.05, careful=True)
    with pool.reserve() as client:
        client.set(key, read_before.written())
    slow, fast = (
        politeness.HostTurn(pool, "http://h.test/", options, "h.test", adaptive=read_before)
        for _ in range(2)
    )
    with pytest.raises(ServerBusy), slow:  # a 429: the pace doubles
        raise ServerBusy("HTTP 429 Too Many Requests", 1000)
    with fast:  # read the pace before the 429, answered quickly after it
        fast.answered(0.001)
    with pool.reserve() as client:
        kept = Pace.read(client.get(key))
    assert kept.delay == pytest.approx(0.1 * (1 - politeness.AUTO_FASTER), rel=1e-5)


def test_a_turn_awaited_while_its_server_asked_the_crawl_to_wait_is_not_taken() -> None:
    """Another request's 429 paused the host while this one waited in its thread for a
    turn taken at the old pace: it does not go (the server refuses what comes in its
    wait), but comes back after the wait."""
    import requests

    from crawler.environment import Limits

    client, options = MemoryClient(), CrawlOptions(crawl_id="c", max_rate=10)
    url, now = "http://h.test/", time.time()
    until = now + 1.0
    client.set(politeness.pace_key("c", "h.test"), f"{until:.3f}".encode())
    verdict, due = politeness.check(
        client, requests.Session(), url, options, limits=Limits(), via_public=True,
        paced_as="h.test", reserved=now + 0.05,
    )  # fmt: skip
    assert verdict == politeness.PACED
    assert due == pytest.approx(until, abs=1e-3)

    client.delete(politeness.pace_key("c", "h.test"))  # no wait: the awaited turn is taken
    verdict, _ = politeness.check(
        client, requests.Session(), url, options, limits=Limits(), via_public=True,
        paced_as="h.test", reserved=time.time() + 0.05,
    )  # fmt: skip
    assert verdict == politeness.ALLOWED


def test_a_turn_come_back_later_than_the_interval_is_not_taken_but_asked_for_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message deferred to its turn that comes back (a busy worker) more than half the
    host's interval after it does not take it: it would go out with the turns after
    it, over the host's rate in that second; it takes the schedule's next turn.  The
    clock stands still: 0.03 s late must not become later while the test runs."""
    import requests

    from crawler.environment import Limits

    client, options = MemoryClient(), CrawlOptions(crawl_id="c", max_rate=10, obey_robots=False)
    url, key = "http://h.test/", politeness.turn_key("c", "h.test")

    def check(reserved: float) -> tuple[str, float | None]:
        return politeness.check(
            client, requests.Session(), url, options, limits=Limits(), via_public=True,
            paced_as="h.test", reserved=reserved,
        )  # fmt: skip

    now = time.time()
    clock = SimpleNamespace(time=lambda: now, monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(politeness, "time", clock)
    # Others took the next 5 s of turns.
    client.set(key, f"{now + 5:.4f}".encode())
    assert check(now - 0.03) == (politeness.ALLOWED, None)  # late within 0.05 s
    verdict, due = check(now - 0.3)
    assert verdict == politeness.RATE_LIMITED
    assert due is not None and due >= now + 4.5


def test_a_worker_s_consumers_look_for_due_turns_every_tenth_of_a_second() -> None:
    """Dramatiq's worker puts delayed messages back when its consumer wakes (a second
    by default): with PromptDelays its consumers wake every 0.1 s, its threads as before."""
    import dramatiq
    from dramatiq.brokers.stub import StubBroker

    from crawler.middleware import PromptDelays
    from crawler.middleware.prompt_delays import DELAY_POLL_MS

    broker = StubBroker()
    broker.add_middleware(PromptDelays())
    broker.declare_queue("turns")
    worker = dramatiq.Worker(broker, worker_timeout=1000, worker_threads=2)
    worker.start()
    try:
        assert worker.consumers, "no consumer started"
        assert {c.worker_timeout for c in worker.consumers.values()} == {DELAY_POLL_MS}
        assert {thread.timeout for thread in worker.workers} == {1.0}
        assert worker.worker_timeout == 1000
    finally:
        worker.stop()
        broker.close()


def test_a_browser_request_takes_no_turn_past_the_render_and_its_answer_paces_the_host() -> None:
    """``BrowserPace``: a turn that would come after the render's end is not taken (the
    crawl's own requests lose nothing to it); a request never sent slows nothing; a
    429's ``Retry-After`` pauses the host, at most ``max_backoff``."""
    from crawler.errors import TransientError
    from crawler.stores.memory import MemoryPool

    client = MemoryClient()
    pool, options = MemoryPool(client), CrawlOptions(crawl_id="c", max_rate=1)
    pace = politeness.BrowserPace(pool, options, max_backoff=5000)
    url, key = "http://h.test/s.js", politeness.turn_key("c", "h.test")
    first = pace.turn(url, 10.0)
    booked = client.get(key)
    with pytest.raises(TransientError):
        pace.turn(url, 0.5)  # the next turn is a second away
    assert client.get(key) == booked  # and was not taken
    assert pace.turn(url, 10.0) == pytest.approx(first + 1.0)

    # The host's robots.txt, read by the crawl's pages, paces its browser requests too.
    robots = CrawlOptions(crawl_id="r", obey_robots=True)
    owner = politeness.robots_owner(robots)
    client.set(politeness.robots_key(url, owner), b"User-agent: *\nCrawl-delay: 3\n")
    pace = politeness.BrowserPace(pool, robots, max_backoff=5000)
    first = pace.turn(url, 10.0)
    assert pace.turn(url, 10.0) == pytest.approx(first + 3.0)
    other = "http://elsewhere.test/s.js"  # a host none of the crawl's pages is on
    assert pace.turn(other, 10.0) == pytest.approx(pace.turn(other, 10.0), abs=0.5)

    auto = CrawlOptions(crawl_id="c", auto_throttle=True, max_per_host=1)
    pace = politeness.BrowserPace(pool, auto, max_backoff=5000)
    delay = politeness.delay_key("c", "h.test")
    client.set(delay, politeness.Pace(0.2).written())
    place = pace.place(url)
    assert place is not None and pace.place(url) is None  # its host's one place
    pace.answered(place, None, None, -1.0)  # never sent
    assert politeness.Pace.read(client.get(delay)) == politeness.Pace(0.2)
    place = pace.place(url)
    assert place is not None
    pace.answered(place, 429, 3_600_000, 0.01)
    paused = float(client.get(politeness.pace_key("c", "h.test")))
    assert 4.0 <= paused - time.time() <= 5.1  # Retry-After capped
    assert politeness.Pace.read(client.get(delay)).careful


def test_pages_about_to_be_sent_book_their_hosts_next_turns_in_order() -> None:
    client, options = MemoryClient(), CrawlOptions(max_rate=2, crawl_id="c")
    pages = {"a": "http://h1/a", "b": "http://h1/b", "c": "http://h2/c", "d": "http://h1/d"}
    before = time.time()
    turns = politeness.book_turns(client, pages, options)

    # h2's one page has its turn now, within TURN_WAIT: its delivery takes it as it comes.
    assert sorted(turns) == ["a", "b", "d"]
    assert before <= turns["a"] <= time.time()  # an idle host's first turn is now
    assert [turns["b"] - turns["a"], turns["d"] - turns["a"]] == pytest.approx([0.5, 1.0])
    # The host's schedule goes on after the turns booked: a delivery asking for one
    # anew (a message sent plainly) takes the next.
    h1 = politeness.turn_key("c", pace_of("http://h1/a", options))
    assert next_turn(client, h1, 0.5, before) == pytest.approx(turns["a"] + 1.5)
    h2 = politeness.turn_key("c", pace_of("http://h2/c", options))
    assert next_turn(client, h2, 0.5, before) == pytest.approx(before)  # none booked


def test_pages_whose_turns_all_come_within_turn_wait_book_none() -> None:
    client, options = MemoryClient(), CrawlOptions(max_rate=100, crawl_id="c")
    pages = {str(i): f"http://h/{i}" for i in range(10)}  # 10 ms apart: 90 ms for all
    assert politeness.book_turns(client, pages, options) == {}
    many = {str(i): f"http://h/{i}" for i in range(40)}  # 390 ms: all booked, in order
    turns = politeness.book_turns(client, many, options)
    assert [turns[str(i)] - turns["0"] for i in range(40)] == pytest.approx(
        [i / 100 for i in range(40)]
    )


def test_no_turn_is_booked_where_the_delivery_must_decide() -> None:
    client = MemoryClient()
    options = CrawlOptions(max_rate=10, crawl_id="c", obey_robots=True)
    rules = b"User-agent: *\nCrawl-delay: 2\nDisallow: /private\n"
    client.set(politeness.robots_key("http://read/"), rules)
    client.set(politeness.robots_key("http://down/"), politeness._UNREACHABLE + b"timeout")
    client.set(politeness.robots_key("http://waits/"), b"")
    waits = politeness.pace_key("c", pace_of("http://waits/", options))
    client.set(waits, f"{time.time() + 30:.3f}".encode())
    pages = {
        "open": "http://read/open", "private": "http://read/private/x", "next": "http://read/next",
        "unread": "http://unread/a", "down": "http://down/a", "waits": "http://waits/a",
    }  # fmt: skip

    turns = politeness.book_turns(client, pages, options)

    # robots.txt read: its Crawl-delay, slower than the rate, spaces the turns; a page it
    # disallows books none.  A host whose robots.txt is unread or unreachable, or whose
    # server asked the crawl to wait, books none: the delivery reads it, or waits.
    assert sorted(turns) == ["next", "open"]
    assert turns["next"] - turns["open"] == pytest.approx(2.0)
    assert politeness.book_turns(client, pages, CrawlOptions(crawl_id="c")) == {}  # no pace

    # Without --max-rate, robots.txt's Crawl-delay is a pace of the crawl's own: its host
    # books (--auto-throttle's delay, when slower, spacing the turns).  A host without
    # one, paced by --auto-throttle alone, books none: taken on delivery, as it answers.
    client.set(politeness.robots_key("http://free/"), b"User-agent: *\nDisallow:\n")
    slow = politeness.delay_key("c", pace_of("http://read/", options))
    client.set(slow, Pace(3.0).written())
    throttled = CrawlOptions(crawl_id="c", obey_robots=True, auto_throttle=True)
    more = {
        "a": "http://read/a",
        "b": "http://read/b",
        "free": "http://free/a",
        "f": "http://free/b",
    }
    again = politeness.book_turns(client, more, throttled)
    assert sorted(again) == ["a", "b"]
    assert again["b"] - again["a"] == pytest.approx(3.0)
    # Read once, a robots.txt without a Crawl-delay is not read again to book turns.
    keys = politeness.booking_keys(["http://free/c", "http://read/c"], throttled)
    assert politeness.robots_key("http://read/") in keys
    assert politeness.robots_key("http://free/") not in keys
    # Which group of the rules answers is the User-Agent's: another crawl's reads it.
    other = CrawlOptions(crawl_id="d", obey_robots=True, auto_throttle=True, user_agent="x/1")
    other_keys = politeness.booking_keys(["http://free/c"], other)
    assert politeness.robots_key("http://free/") in other_keys


def test_turns_further_ahead_than_turn_ahead_are_not_booked() -> None:
    client, options = MemoryClient(), CrawlOptions(max_rate=1 / 100, crawl_id="c")
    pages = {str(i): f"http://h/{i}" for i in range(5)}
    turns = politeness.book_turns(client, pages, options)
    # 100 s apart: the turns within TURN_AHEAD (300 s) only; the rest go plainly.
    assert sorted(turns) == ["0", "1", "2", "3"]


def test_a_retry_goes_without_the_turn_its_failed_attempt_took() -> None:
    """``--local`` retries within half a second (workers too, with a short
    ``CRAWLER_MIN_BACKOFF_MS``), inside the window in which a booked turn is still taken
    (``TURN_LATE``): the retry Dramatiq's ``Retries`` sends of a message whose attempt
    raised carries no ``turn``, so it takes a turn of its own.  Workers' brokers and
    ``--local``'s have :class:`RetryTurns` below ``Retries``."""
    import dramatiq
    from dramatiq.brokers.stub import StubBroker
    from dramatiq.middleware import CurrentMessage, Retries

    from crawler import example
    from crawler.brokers.local import serve
    from crawler.middleware import QuickRetries, RetryTurns, ordered

    for real in (example.broker, serve(example.crawl, parts=None)):  # workers', --local's
        kinds = [type(m) for m in real.middleware]
        assert RetryTurns in kinds and kinds.index(RetryTurns) > next(
            i for i, kind in enumerate(kinds) if issubclass(kind, Retries)
        ), kinds

    # --local's stack: Retries, and below it QuickRetries and RetryTurns.
    broker = StubBroker(
        middleware=ordered([QuickRetries(10, 10), RetryTurns(), CurrentMessage(), Retries()])
    )
    seen: list[dict[str, Any]] = []

    @dramatiq.actor(broker=broker, queue_name="turns", max_retries=1)
    def fetch() -> None:
        current = CurrentMessage.get_current_message()
        assert current is not None
        seen.append(dict(current.options))
        if len(seen) == 1:
            raise ConnectionError("503")

    broker.enqueue(fetch.message().copy(options={"turn": time.time()}))
    worker = dramatiq.Worker(broker, worker_timeout=50)
    worker.start()
    try:
        broker.join(fetch.queue_name, timeout=10_000)
        worker.join()
    finally:
        worker.stop()
    assert [("turn" in options, options.get("retries", 0)) for options in seen] == [
        (True, 0),
        (False, 1),
    ]
