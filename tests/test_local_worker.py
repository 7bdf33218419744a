"""``--local``'s worker (:class:`crawler.embedded.worker.LocalWorker`): Dramatiq's
semantics (retries through the delay queue, dead letters, middleware hooks) with each
message processed on the thread that took it, and its threads taking turns while the
process is CPU-bound (:class:`crawler.embedded.worker.Concurrency`)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dramatiq
import pytest

from crawler.brokers.local import PriorityStubBroker
from crawler.embedded.worker import Concurrency, LocalWorker
from crawler.stores.saved import SavedState
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES
from tests.workers import PROJECT_ROOT, environment


def test_a_failing_message_is_retried_when_due_and_one_that_gives_up_is_dead_lettered() -> None:
    broker = PriorityStubBroker()
    attempts: Counter[str] = Counter()
    threads: set[str] = set()

    @dramatiq.actor(broker=broker, queue_name="q", max_retries=2, min_backoff=10, max_backoff=20)
    def flaky(name: str) -> None:
        attempts[name] += 1
        threads.add(threading.current_thread().name)
        if name == "never" or attempts[name] < 3:
            raise RuntimeError(f"attempt {attempts[name]} of {name}")

    worker = LocalWorker(broker, "q", threads=2, poll_ms=10)
    broker.emit_after("process_boot")
    worker.start()
    try:
        flaky.send("twice")
        flaky.send("never")
        broker.join("q", timeout=10_000, fail_fast=False)
    finally:
        worker.stop(timeout=5_000)

    assert attempts == {"twice": 3, "never": 3}  # the first attempt and two retries
    assert [m.args for m in broker.dead_letters] == [("never",)]
    assert threads <= {"crawler-worker-0", "crawler-worker-1"}
    assert broker.outstanding == 0


def test_a_saved_message_resent_with_a_delay_is_not_kept_beside_itself(tmp_path: Path) -> None:
    # --state: a page in hand at a kill, crawled again, resends the links it claimed
    # (delayed); a link whose message is queued or in hand already is not kept twice,
    # else both copies would fetch the page.  Once the first is acknowledged, a resend
    # is kept (its page may have been lost between its claim and its send).
    saved = SavedState(tmp_path)
    broker = PriorityStubBroker(saved)
    try:
        broker.declare_queue("q")
        message: dramatiq.Message[Any] = dramatiq.Message(
            queue_name="q", actor_name="a", args=("u",), kwargs={}, options={}
        )
        broker.enqueue(message)
        broker.enqueue(message, delay=10)  # the resent copy
        assert broker.outstanding == 1
        assert [m.message_id for m in broker.kept()] == [message.message_id]
        delayed = broker.consume("q.DQ", timeout=100)
        due = next(delayed)  # the first copy was never delayed: the queue's is taken
        assert due is None
        consumer = broker.consume("q", timeout=100)
        taken = next(consumer)
        broker.enqueue(message, delay=10)  # resent while the first is in hand
        assert broker.outstanding == 1
        consumer.ack(taken)
        assert broker.kept() == []
        broker.enqueue(message, delay=10)
        assert [m.message_id for m in broker.kept()] == [message.message_id]
        # Due, the delayed one is moved to its queue (put there, then acknowledged on
        # the delay queue): not a copy of itself.
        moved = next(delayed)
        back = moved._message.copy(queue_name="q")
        back.options.pop("eta", None)
        broker.enqueue(back)
        assert len(broker.kept()) == 2
        delayed.ack(moved)
        assert [m.queue_name for m in broker.kept()] == ["q"]
        retry = message.copy(options={"retries": 1})  # another attempt: kept beside it
        broker.enqueue(retry, delay=10)
        assert len(broker.kept()) == 2
    finally:
        saved.close()


def test_stop_leaves_what_was_not_taken_in_the_broker() -> None:
    broker = PriorityStubBroker()
    started, release = threading.Event(), threading.Event()

    @dramatiq.actor(broker=broker, queue_name="q")
    def slow(number: int) -> Any:
        started.set()
        release.wait(10)

    worker = LocalWorker(broker, "q", threads=1, poll_ms=10)
    worker.start()
    for number in range(3):
        slow.send(number)
    assert started.wait(10)
    worker.stop(timeout=0)  # told to stop, not waiting for the message in hand
    release.set()  # it ends; the two others are not taken
    worker.stop(timeout=10_000)
    assert broker.outstanding == 2 and broker.queues["q"].qsize() == 2


class FakeCpu:
    """A process's CPU seconds as :class:`Concurrency` reads them: busy (one core's
    worth, as fast as the clock runs) or idle."""

    def __init__(self) -> None:
        self.busy = True
        self._used, self._at = 0.0, time.monotonic()

    def __call__(self) -> float:
        now = time.monotonic()
        if self.busy:
            self._used += now - self._at
        self._at = now
        return self._used


def test_fewer_threads_hold_a_message_while_the_process_is_cpu_bound() -> None:
    """Half as many threads at each look while the CPU is busy, down to one; one more
    at each look once it idles, back to every thread."""
    clock = [0.0]
    used = [0.0]
    concurrency = Concurrency(8, 0.75, every=0.1, cpu=lambda: used[0], clock=lambda: clock[0])
    running = threading.Event()
    running.set()
    allowed = []
    for _ in range(5):  # busy: the process used the whole 0.2 s of a core
        clock[0] += 0.2
        used[0] += 0.2
        assert concurrency.enter(running, 0.01)
        concurrency.leave()
        allowed.append(concurrency.allowed)
    for _ in range(8):  # idle: a tenth of it
        clock[0] += 0.2
        used[0] += 0.02
        assert concurrency.enter(running, 0.01)
        concurrency.leave()
        allowed.append(concurrency.allowed)
    assert allowed == [4, 2, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 8]


def test_a_thread_waits_for_its_turn_and_not_once_stopped() -> None:
    clock, used = [0.0], [0.0]
    concurrency = Concurrency(2, 0.75, every=0.1, cpu=lambda: used[0], clock=lambda: clock[0])
    concurrency.allowed = 1
    running = threading.Event()
    running.set()
    assert concurrency.enter(running, 0.01)  # the one place
    entered = threading.Event()

    def second() -> None:
        if concurrency.enter(running, 0.01):
            entered.set()
            concurrency.leave()

    waiting = threading.Thread(target=second)
    waiting.start()
    assert not entered.wait(0.2)  # no look yet: the clock stands still
    clock[0] += 0.2  # the page in hand stalls: no CPU used, the waiting thread looks
    assert entered.wait(5)
    waiting.join(5)
    assert concurrency.allowed == 2

    concurrency.allowed = 1
    running.clear()
    assert not concurrency.enter(running, 0.01)  # stopped: no wait for a place


def test_the_worker_runs_one_page_at_a_time_while_cpu_bound_and_every_thread_when_not() -> None:
    broker = PriorityStubBroker()
    lock = threading.Lock()
    holding, peaks = [0], {"busy": 0, "idle": 0}
    phase = ["warm"]

    @dramatiq.actor(broker=broker, queue_name="q")
    def page(number: int) -> None:
        with lock:
            holding[0] += 1
            if phase[0] in peaks:
                peaks[phase[0]] = max(peaks[phase[0]], holding[0])
        time.sleep(0.005)
        with lock:
            holding[0] -= 1

    cpu = FakeCpu()
    worker = LocalWorker(broker, "q", threads=4, poll_ms=10)
    worker.concurrency = Concurrency(4, 0.75, every=0.05, cpu=cpu)
    worker.start()
    try:
        for number in range(200):
            page.send(number)
        deadline = time.monotonic() + 10
        while worker.concurrency.allowed > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.concurrency.allowed == 1
        phase[0] = "busy"
        time.sleep(0.3)
        phase[0] = "recovering"
        cpu.busy = False
        while worker.concurrency.allowed < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        phase[0] = "idle"
        for number in range(200, 400):
            page.send(number)
        broker.join("q", timeout=10_000)
    finally:
        worker.stop(timeout=5_000)

    assert peaks == {"busy": 1, "idle": 4}


@pytest.mark.parametrize(
    ("busy", "delay", "expected"),
    [
        ("0.000001", 0.05, "one"),  # any CPU at all counts as CPU-bound: one page at a time
        (None, 0.2, "every"),  # the default, on a slow site: every thread keeps working
    ],
)
def test_a_real_local_crawl_lets_its_threads_take_turns_only_while_cpu_bound(
    site: SiteServer, busy: str | None, delay: float, expected: str
) -> None:
    """``crawler crawl --local`` (one process, 8 threads) on a site of its own: past its
    first looks at the CPU, as many requests in flight as ``CRAWLER_LOCAL_BUSY`` lets."""
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=8))
    site.delay = delay
    env = environment(**FAST_FAILURES, **({"CRAWLER_LOCAL_BUSY": busy} if busy else {}))
    running = subprocess.Popen(
        [sys.executable, "-m", "crawler.example", "--local", site.url(page_path(0)),
         "--processes", "1", "--threads", "8"],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        site.wait_for_requests(25)  # by then the crawl has looked at its CPU a few times
        site.peak_in_flight = site.in_flight
        stdout, stderr = running.communicate(timeout=60)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert running.returncode == 0, stdout + stderr
    assert site.fetch_counts() == Counter({page_path(i): 1 for i in range(60)})
    if expected == "one":
        assert site.peak_in_flight == 1
    else:
        assert site.peak_in_flight >= 6
