"""The pieces ``--local --processes`` ends a crawl with: a shard's broker says it holds
nothing only when it holds nothing, and a process never waits at its exit for a dead
shard to read what it was handed."""

from __future__ import annotations

import multiprocessing
import os
import signal
import struct
import threading
import time
from typing import Any

import dramatiq

from crawler.embedded import one_process
from crawler.embedded.processes import _follow, _Relay
from crawler.embedded.shards import ShardBroker, Shards
from crawler.tracking.progress import Progress


def _message(queue_name: str = "crawl") -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name=queue_name, actor_name="crawl", args=("http://a.test/",), kwargs={},
        options={},
    )  # fmt: skip


def test_a_delayed_message_due_keeps_its_shard_busy_while_it_moves() -> None:
    # Dramatiq moves a due message as its worker does: put on its queue, then
    # acknowledged on the delay queue. Each queue's own count is 0 in between for one
    # of them; the broker's count never is.
    broker = ShardBroker(Shards.make(multiprocessing.get_context("fork"), 1), 0)
    broker.declare_queue("crawl")
    assert broker.quiet()
    broker.enqueue(_message(), delay=0)
    assert not broker.quiet()

    delayed = broker.consume("crawl.DQ", timeout=1000)
    due = next(delayed)
    assert broker.queues["crawl"].unfinished_tasks == 0  # what a per-queue look saw
    broker.enqueue(due.copy(queue_name="crawl"))
    delayed.ack(due)
    assert broker.queues["crawl.DQ"].unfinished_tasks == 0
    assert not broker.quiet()

    queued = broker.consume("crawl", timeout=1000)
    message = next(queued)
    assert not broker.quiet()  # in hand
    queued.ack(message)
    assert broker.quiet()


def test_a_shard_with_a_message_moving_between_its_queues_is_never_quiet() -> None:
    # One message, always outstanding, moved by a thread as Dramatiq's worker moves
    # retries and deferrals (to the delay queue, then back when due) while this thread
    # asks, as the shard's loop does, whether the broker holds nothing.
    broker = ShardBroker(Shards.make(multiprocessing.get_context("fork"), 1), 0)
    broker.declare_queue("crawl")
    queued, delayed = (
        broker.consume("crawl", timeout=1000),
        broker.consume("crawl.DQ", timeout=1000),
    )
    broker.enqueue(_message())
    stop = threading.Event()

    def move() -> None:
        while not stop.is_set():
            message = next(queued)
            broker.enqueue(message.copy(), delay=0)  # a retry: enqueued, then its attempt ends
            queued.ack(message)
            due = next(delayed)
            broker.enqueue(due.copy(queue_name="crawl"))  # due: put back, then acknowledged
            delayed.ack(due)

    mover = threading.Thread(target=move)
    mover.start()
    try:
        deadline = time.monotonic() + 1.0
        quiet = 0
        while time.monotonic() < deadline:
            quiet += broker.quiet()
    finally:
        stop.set()
        mover.join()
    assert quiet == 0


def _hand_over_and_exit(shards: Shards, let_go: bool) -> None:
    if let_go:
        shards.let_inboxes_go()
    for _ in range(64):  # 1 MiB that the shard it is for, dead, never reads
        shards.inboxes[1].put(b"x" * 16384)


def test_a_process_exits_though_a_dead_shard_never_read_its_hand_overs() -> None:
    context = multiprocessing.get_context("fork")
    shards = Shards.make(context, 2)
    exiting = context.Process(target=_hand_over_and_exit, args=(shards, True))
    exiting.start()
    exiting.join(30)
    assert exiting.exitcode == 0

    # Without it the process waits at its exit for the pipe to drain: for ever.
    stuck = context.Process(target=_hand_over_and_exit, args=(shards, False))
    stuck.start()
    stuck.join(2)
    assert stuck.exitcode is None
    stuck.kill()
    stuck.join()


def _dies_half_way_through_a_batch(shards: Shards) -> None:
    # What a shard killed (the OOM killer) while it sends a batch leaves in the pipe: a
    # length of 1 MiB, then 100 bytes of it.
    os.write(shards.results._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 100)  # type: ignore[attr-defined]
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_shard_killed_half_way_through_sending_is_seen_dead() -> None:
    context = multiprocessing.get_context("fork")
    shards = Shards.make(context, 1)
    child = context.Process(target=_dies_half_way_through_a_batch, args=(shards,))
    child.start()
    child.join()
    relay = _Relay(shards.results)  # its thread waits for the rest, for ever
    outcome: list[tuple[bool, str | None]] = []

    def follow_the_crawl() -> None:
        keep, progress = (lambda record, message: None), Progress(stream=None)
        full = one_process.NoRoom(None)
        outcome.append(_follow(shards, [child], None, relay, keep, progress, full, None))

    follow = threading.Thread(target=follow_the_crawl, daemon=True)
    follow.start()
    follow.join(30)
    assert outcome, "the first process waits for the dead shard's batch"
    interrupted, lost = outcome[0]
    assert not interrupted
    assert lost == f"crawling process 0 (pid {child.pid}) ended with status -9"
