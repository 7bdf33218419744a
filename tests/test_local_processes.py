"""``crawler crawl --local --processes N``: one crawl in N processes, one frontier.

Each test runs the real command (forked shards, the shared store's process) against a
site of its own, and checks what a user relies on: every page fetched once, budgets
and limits across all processes, the output and summary of all of them, and no process
left behind however the crawl ends.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from crawler.api import Crawl
from tests.scripted_site import processes_marked, wait_until_none_marked
from tests.site_server import SiteServer, generate_site, html, page_path
from tests.support import FAST_FAILURES, read_records
from tests.workers import PROJECT_ROOT, environment

PAGES = 120
COMMAND = "import sys; from crawler.command import main; sys.exit(main())"


def crawl_command(*args: str) -> list[str]:
    """``crawler crawl ARGS``, as the README's ``scripts/crawl`` runs it."""
    return [sys.executable, "-c", COMMAND, "crawl", *args]


def crawl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        crawl_command(*args), cwd=PROJECT_ROOT, env=env or environment(**FAST_FAILURES),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def cross_linked(site: SiteServer, pages: int = PAGES) -> str:
    """A site whose pages link across every shard, many links to each page."""
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=8))
    return site.url(page_path(0))


@pytest.mark.parametrize("processes", ["2", "3"])
def test_every_page_is_fetched_once_by_all_the_processes_together(
    site: SiteServer, tmp_path: Path, processes: str
) -> None:
    seed = cross_linked(site)
    output = tmp_path / "records.jsonl"

    result = crawl("--local", seed, "--processes", processes, "-o", str(output))

    assert result.returncode == 0, result.stdout + result.stderr
    expected = {page_path(i): 1 for i in range(PAGES)}
    assert site.fetch_counts() == {**expected, "/robots.txt": 1}  # robots.txt shared too
    records = read_records(output)
    assert sorted(r["url"] for r in records) == sorted(site.url(p) for p in expected)
    assert all(r["outcome"] == "crawled" for r in records)
    assert f"{PAGES} pages fetched" in result.stdout, result.stdout


def marked_crawl(
    site: SiteServer, *, new_session: bool = False
) -> tuple[subprocess.Popen[str], str]:
    """A two-process crawl of a cross-linked site, started, its processes marked in
    their environment (in a session of its own with ``new_session``, for a terminal's
    Ctrl-C): the running command, and the mark."""
    seed = cross_linked(site)
    mark = f"CRAWLER_TEST_MARK={uuid.uuid4().hex}"
    env = environment(**FAST_FAILURES)
    env["CRAWLER_TEST_MARK"] = mark
    running = subprocess.Popen(
        crawl_command("--local", seed, "--processes", "2"), cwd=PROJECT_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=new_session,
    )  # fmt: skip
    return running, mark


def test_the_shards_do_the_work_in_processes_of_their_own(site: SiteServer) -> None:
    site.hold_from = 10  # the crawl goes on until the test has looked
    running, mark = marked_crawl(site)
    try:
        site.wait_for_requests(10)
        # The command, its two shards and the shared store (robots.txt is obeyed).
        assert len(processes_marked(mark)) == 4
    finally:
        site.release()
        out, err = running.communicate(timeout=120)
    assert running.returncode == 0, out + err
    assert wait_until_none_marked(mark) == []


def test_page_budgets_count_the_pages_of_every_process(site: SiteServer) -> None:
    seed = cross_linked(site)

    result = crawl("--local", seed, "--processes", "2", "--max-pages", "25")

    assert result.returncode == 0, result.stdout + result.stderr
    pages = {path for path in site.fetch_counts() if path != "/robots.txt"}
    assert len(pages) == 25, sorted(pages)
    assert "25 pages fetched" in result.stdout, result.stdout


def test_max_per_host_holds_across_the_processes(site: SiteServer) -> None:
    seed = cross_linked(site, pages=30)
    site.delay = 0.05  # fetches overlap unless a single place is shared

    result = crawl("--local", seed, "--processes", "2", "--threads", "8", "--max-per-host", "1")

    assert result.returncode == 0, result.stdout + result.stderr
    assert len(site.fetch_counts()) == 31
    assert site.peak_in_flight == 1


def test_max_rate_holds_across_the_processes(site: SiteServer) -> None:
    seed = cross_linked(site, pages=30)

    result = crawl("--local", seed, "--processes", "2", "--max-rate", "10", "--no-obey-robots")

    assert result.returncode == 0, result.stdout + result.stderr
    times = sorted(request.time for request in site.requests)
    assert len(times) == 30
    # 10 requests a second for the host in all: 30 take about 3 s (each process with a
    # rate of its own would take half that).
    assert times[-1] - times[0] >= 2.4, times[-1] - times[0]


def test_ctrl_c_stops_every_process_and_says_what_was_done(site: SiteServer) -> None:
    site.delay, site.hold_from = 0.05, 15  # the crawl cannot end before its Ctrl-C
    running, mark = marked_crawl(site, new_session=True)
    try:
        site.wait_for_requests(15)
        os.killpg(running.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        site.release()
        out, err = running.communicate(timeout=60)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert running.returncode == 130, out + err
    assert "Interrupted" in out or "interrupted" in out, out
    assert "Traceback" not in err, err
    assert wait_until_none_marked(mark) == []
    assert len(site.requests) < PAGES + 1


@pytest.mark.parametrize("killed", ["a shard", "the shared store", "the command"])
def test_a_process_killed_leaves_none_behind(site: SiteServer, killed: str) -> None:
    site.hold_from = 10
    running, mark = marked_crawl(site)
    try:
        site.wait_for_requests(10)
        # The command's children: the shared store (started first), then the shards.
        children = sorted(pid for pid in processes_marked(mark) if _parent(pid) == running.pid)
        assert len(children) == 3
        if killed == "the command":
            running.kill()
        else:
            os.kill(children[-1] if killed == "a shard" else children[0], signal.SIGKILL)
        out, err = running.communicate(timeout=60)
    finally:
        site.release()
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert wait_until_none_marked(mark) == []
    if killed != "the command":
        assert running.returncode == 1, out + err
        said = "crawling process 1" if killed == "a shard" else "the shared store's process"
        assert said in err and "ended with status -9; the crawl stopped" in err, err


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


def test_options_one_process_keeps_are_refused_with_more_than_one(tmp_path: Path) -> None:
    for options, said in (
        (["--state", str(tmp_path / "state")], "--state"),
        (["--threads", "2", "--processes", "3"], "--threads"),
    ):
        result = crawl("--local", "http://127.0.0.1:9/", "--processes", "3", *options)
        assert result.returncode == 2, result.stdout + result.stderr
        assert said in result.stderr and "Traceback" not in result.stderr, result.stderr


# Python 3.12+ warns when a process with threads forks (this test's site serves from
# threads); the crawl's shards start before any thread of the crawl's own.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_crawl_from_python_in_two_processes_hands_every_record_over(site: SiteServer) -> None:
    seed = cross_linked(site, pages=40)
    crawled = Crawl([seed], processes=2, threads=4)
    seen = [record["url"] for record in crawled]

    assert crawled.exit_status == 0
    assert sorted(seen) == sorted(site.url(page_path(i)) for i in range(40))
    # What the caller's process held was frozen for the shards' fork only: its own
    # collections see it again.
    assert gc.get_freeze_count() == 0


def test_the_summary_waits_for_no_straggler(site: SiteServer) -> None:
    """The end is seen only once no process holds a message and none is in transit:
    a site whose pages each link to the next one only (every hand-over crosses
    shards) is crawled whole."""
    chain = [site.base_url + page_path(i + 1) for i in range(60)]
    site.pages.update({page_path(i): html(*chain[i : i + 1]) for i in range(60)})
    started = time.monotonic()
    result = crawl("--local", site.url(page_path(0)), "--processes", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "60 pages fetched" in result.stdout, result.stdout
    assert time.monotonic() - started < 60
