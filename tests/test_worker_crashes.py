"""Workers killed, stopped or crashing mid-crawl: nothing lost, duplicates bounded."""

from __future__ import annotations

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.site_server import SiteServer, generate_site, html, page_path, send
from tests.support import FAST_FAILURES, crawl_id_of, wait_for_crawl
from tests.workers import WorkerProcesses, dead_letters, environment, queued_messages, seed

PAGES = 150
PROCESSES, THREADS = 2, 4
LINKS = 5


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_kill_9_mid_crawl_then_a_fresh_worker_fetches_every_page(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, dedup_env: dict[str, str]
) -> None:
    # Links a redone page claimed before the kill are sent again at once
    # (CRAWLER_RESEND_DELAY=0), not after the time limit: the crawl, and its queue, end sooner.
    env = environment(
        **request.getfixturevalue(broker_env), **dedup_env, **FAST_FAILURES,
        CRAWLER_RESEND_DELAY="0",
    )  # fmt: skip
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=LINKS))
    site.delay, site.hold_from = 0.02, 40  # the crawl cannot end before the kill
    every_page = [page_path(i) for i in range(PAGES)]

    doomed = WorkerProcesses(env, processes=PROCESSES, threads=THREADS)
    assert seed(env, site.url(page_path(0))).returncode == 0
    doomed.wait_until(lambda: doomed.count("Done crawling") >= 30)
    doomed.kill()
    site.release()
    assert not site.fetched(every_page)

    fresh = WorkerProcesses(env, processes=PROCESSES, threads=THREADS)
    try:
        # On Redis the killed worker's messages come back once its heartbeat expires.
        fresh.wait_until(lambda: site.fetched(every_page) and queued_messages(env) == 0, timeout=90)
    finally:
        assert fresh.stop() == 0

    assert queued_messages(env) == 0
    fetched_twice = [path for path, n in site.fetch_counts().items() if n > 1]
    # Only what the killed worker had in hand may be fetched again, and the links such
    # a page had sent, which it sends again (same ids) when it is redone.
    assert len(fetched_twice) <= PROCESSES * THREADS * (1 + LINKS)
    assert all(n <= 2 for n in site.fetch_counts().values())


def test_sigterm_mid_fetch_finishes_the_fetch_and_loses_nothing(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=40, links_per_page=3))
    in_slow_fetch = threading.Event()

    def slow(handler: BaseHTTPRequestHandler, nth: int) -> None:
        in_slow_fetch.set()
        threading.Event().wait(1.0)  # the worker is told to stop while it waits here
        send(handler, html(site.url(page_path(1))))

    site.behaviors["/slow.html"] = slow
    site.pages[page_path(0)] = html(site.url("/slow.html"))
    every_page = ["/slow.html", *(page_path(i) for i in range(40))]

    first = WorkerProcesses(env, processes=1, threads=2)
    assert seed(env, site.url(page_path(0))).returncode == 0
    assert in_slow_fetch.wait(timeout=30)
    assert first.stop() == 0
    assert first.count(f"Done crawling {site.url('/slow.html')!r}") == 1

    second = WorkerProcesses(env, processes=1, threads=2)
    try:
        second.wait_until(lambda: site.fetched(every_page))
    finally:
        assert second.stop() == 0

    assert queued_messages(env) == 0
    assert site.fetch_counts() == dict.fromkeys(every_page, 1)


def test_a_page_that_kills_every_worker_is_given_up_after_max_deliveries(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES, CRAWLER_MAX_DELIVERIES="2")
    killer_reached = threading.Event()

    def killer(handler: BaseHTTPRequestHandler, nth: int) -> None:
        killer_reached.set()
        threading.Event().wait(10)  # the test kills the worker meanwhile

    site.behaviors["/killer.html"] = killer
    others = [f"/other/{i}.html" for i in range(5)]
    site.pages["/"] = html(site.url("/killer.html"), *map(site.url, others))
    site.pages.update(dict.fromkeys(others, html()))
    assert seed(env, site.url("/")).returncode == 0
    killer_url = site.url("/killer.html")

    def next_workers_reach_killer() -> WorkerProcesses:
        # One thread: a kill then interrupts the killer page alone, not a neighbour too
        # (every message in flight when a worker dies counts a delivery).
        workers = WorkerProcesses(env, processes=1, threads=1)
        workers.wait_until(lambda: killer_reached.is_set() or workers.count("Giving up on URL") > 0)
        return workers

    kills = 0
    workers = next_workers_reach_killer()
    while killer_reached.is_set():
        assert kills < 2, "the killer page was delivered again after the bound"
        workers.kill()
        kills += 1
        killer_reached.clear()
        workers = next_workers_reach_killer()
    workers.wait_until(lambda: site.fetched(["/", *others]))
    assert workers.stop() == 0

    assert kills == 2
    assert site.fetch_counts()["/killer.html"] == 2
    assert (
        workers.count(f"Giving up on URL {killer_url!r}: delivered 3 times without finishing") == 1
    )
    assert dead_letters(env) == 1
    assert queued_messages(env) == 0


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_worker_process_dying_of_sigsegv_ends_its_group_and_the_restarted_group_ends_the_crawl(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest
) -> None:
    """What the compose file's ``restart: unless-stopped`` and the systemd unit's
    ``Restart=always`` (docs/deploy/) do, done by the test: Dramatiq stops the whole
    group when one process dies, and the group started again finishes the crawl."""
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=LINKS))
    site.delay = 0.02
    group = WorkerProcesses(env, processes=PROCESSES, threads=THREADS)
    restarted: WorkerProcesses | None = None
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        group.wait_until(lambda: group.count("Done crawling") >= 30)
        victim = worker_processes(group.process.pid)[0]
        os.kill(victim, signal.SIGSEGV)
        group.process.wait(timeout=60)  # the whole group ends: Dramatiq shuts it down
        group_exit = group.stop()  # (reads its last lines)
        restarted = WorkerProcesses(env, processes=PROCESSES, threads=THREADS)
        _, stderr = waiting.communicate(timeout=120)
    finally:
        group.stop()
        if restarted is not None:
            assert restarted.stop() == 0

    assert group_exit != 0  # a failure, for systemd's Restart=on-failure too
    assert group.logged_any(f"Worker with PID {victim} exited unexpectedly (code -11)")
    assert waiting.returncode == 0, stderr[-2000:]
    assert set(site.fetch_counts()) == {page_path(i) for i in range(PAGES)}
    # A second fetch only for what the dead group had in hand, and the links it resends.
    assert sum(n - 1 for n in site.fetch_counts().values()) <= PROCESSES * THREADS * (1 + LINKS)


def worker_processes(pid: int) -> list[int]:
    """The worker processes of Dramatiq's main process ``pid``."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_killed_twice_with_short_claims_the_figures_are_exact_and_only_pages_in_hand_come_twice(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    dedup_env: dict[str, str],
    tmp_path: Path,
) -> None:
    pages, threads = 400, 4
    # Claims of 2 s: a page's claim expires under it while the crawl goes on, and the
    # journal answers for it (the copies a killed parent's redone page sends again).
    env = environment(
        **request.getfixturevalue(broker_env), **dedup_env, **FAST_FAILURES,
        CRAWLER_CLAIM_TTL="2",
    )  # fmt: skip
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=LINKS))
    site.delay = 0.01
    every_page = [page_path(i) for i in range(pages)]
    output = tmp_path / "records.jsonl"
    seeder = wait_for_crawl(env, site.url(page_path(0)), "-o", str(output))
    in_hand = 0
    try:
        for done in (60, 180):  # kill -9 the whole group twice, a new group each time
            doomed = WorkerProcesses(env, processes=PROCESSES, threads=threads)
            doomed.wait_until(lambda: len(site.fetch_counts()) >= done, timeout=90)  # noqa: B023
            doomed.kill()
            in_hand += PROCESSES * threads

        assert not site.fetched(every_page)
        fresh = WorkerProcesses(env, processes=PROCESSES, threads=threads)
        try:
            stdout, stderr = seeder.communicate(timeout=120)
            status = seed(env, "--status", crawl_id_of(stdout))
        finally:
            assert fresh.stop() == 0
    finally:
        seeder.kill()

    assert seeder.returncode == 0, stderr
    counts = site.fetch_counts()
    assert sorted(counts) == sorted(every_page)
    urls = [json.loads(line)["url"] for line in output.read_text().splitlines()]
    assert sorted(urls) == sorted(map(site.url, every_page))  # each page's record once
    figures = f"{pages} pages fetched"
    assert figures in stdout and figures in status.stdout, (stdout, status.stdout)
    assert f"{pages} discovered, 0 outstanding" in status.stdout, status.stdout
    twice = sorted(path for path, n in counts.items() if n > 1)
    assert len(twice) <= in_hand, twice
    assert all(n <= 2 for n in counts.values())
