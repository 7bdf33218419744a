"""``--local --state DIR`` against the faults of issue 41: a second process on the same
directory, kills with the seed in hand, a crash on one page, and a disk that fills."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.handlers import Page as HandledPage
from tests.site_server import SiteServer, generate_site, html, page_path, send
from tests.workers import PROJECT_ROOT, environment

#: The page :func:`crashing` crashes the process on.
CRASHING_PAGE = page_path(7)


def crashing(page: HandledPage) -> dict[str, Any]:
    """A page handler (``--handler tests.test_local_state_faults:crashing``) that aborts
    the whole process (SIGABRT, as a C library's failed assertion does) on one page."""
    if page.url.endswith(CRASHING_PAGE):
        os.abort()
    return {}


def _no_core_dump() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def start(
    site: SiteServer, state: Path, *extra: str, threads: int = 4, **env: str
) -> subprocess.Popen[str]:
    """``crawler crawl --local URL --state DIR ...``, as a user starts it."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crawler.example",
            site.url(page_path(0)),
            "--local",
            "--threads",
            str(threads),
            "--state",
            str(state),
            *extra,
        ],
        cwd=PROJECT_ROOT,
        env=environment(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_no_core_dump,
    )


def finish(crawl: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    try:
        stdout, stderr = crawl.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        crawl.kill()
        stdout, stderr = crawl.communicate()
        pytest.fail(f"the crawl did not end in {timeout} s: {stdout[-1000:]} {stderr[-2000:]}")
    return crawl.returncode, stdout, stderr


def wait_for(site: SiteServer, condition: Callable[[], bool], timeout: float = 30) -> None:
    """Until ``condition`` holds, woken by each request the site sees."""
    with site._lock:
        assert site._lock.wait_for(condition, timeout), f"not true after {timeout} s"


def seen(site: SiteServer, count: int, path: str | None = None) -> Callable[[], bool]:
    """Whether the site saw ``count`` requests (for ``path`` only, when given)."""
    return lambda: sum(path in (None, r.path) for r in site.requests) >= count


def records_of(path: Path) -> set[str]:
    return {json.loads(line)["url"] for line in path.read_text().splitlines()}


def all_pages(site: SiteServer, pages: int) -> set[str]:
    return {site.url(page_path(i)) for i in range(pages)}


# Item 2: one process at a time on a --state directory.


def test_a_second_process_on_the_same_state_is_refused_and_a_killed_one_leaves_no_lock(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 60
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=4))
    release = [threading.Event()]  # the crawl holds page 9 in hand until it is set

    def held(handler: BaseHTTPRequestHandler, nth: int) -> None:
        if nth <= len(release):  # the crawls after those held answer at once
            release[nth - 1].wait(timeout=60)
        send(handler, site.pages[page_path(9)])

    site.behaviors[page_path(9)] = held
    state = tmp_path / "state"
    first = start(site, state, "--output", str(tmp_path / "records.jsonl"))
    wait_for(site, seen(site, 1, page_path(9)))
    started = time.monotonic()
    second = start(site, state)
    code, stdout, stderr = finish(second, timeout=30)
    refused_in = time.monotonic() - started
    release[0].set()
    first_code, first_stdout, first_stderr = finish(first)

    assert code == 2, stdout + stderr
    assert stdout == ""
    naming = [line for line in stderr.splitlines() if f"PID {first.pid}" in line]
    assert len(naming) == 1 and naming[0].endswith(
        f": error: {str(state)!r} is in use by another crawler (PID {first.pid}):"
        " wait for it to end, or give another --state directory"
    ), stderr
    assert stderr.splitlines()[0] == naming[0]  # first, then the pointer to --help
    assert refused_in < 10  # at once: not after the first one ends
    assert first_code == 0, first_stderr[-2000:]
    assert f"{pages} pages fetched" in first_stdout
    counts = site.fetch_counts()
    assert {p: counts[p] for p in counts if p.startswith("/page/")} == {
        page_path(i): 1 for i in range(pages)
    }  # every page once: the second process fetched nothing
    assert records_of(tmp_path / "records.jsonl") == all_pages(site, pages)

    # A run killed (-9) leaves its lock file, which does not block the next run.
    other = tmp_path / "other"
    release.append(threading.Event())
    killed = start(site, other)
    wait_for(site, seen(site, 2, page_path(9)))
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    release[1].set()
    assert killed.returncode == -signal.SIGKILL
    assert (other / "lock").read_text().strip() == str(killed.pid)
    code, stdout, stderr = finish(start(site, other))
    assert code == 0, stderr[-2000:]
    assert "Carrying on with the crawl kept in" in stdout
    assert f"{pages} pages fetched" in stdout


# Item 3: kills are not poison; crashes still are.


def test_ten_kills_at_random_moments_three_with_the_seed_in_hand_lose_nothing(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 300
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    site.delay = 0.003
    seed_answers = threading.Event()  # the seed is held in hand until then

    def slow_seed(handler: BaseHTTPRequestHandler, nth: int) -> None:
        seed_answers.wait(timeout=120)
        send(handler, site.pages[page_path(0)])

    site.behaviors[page_path(0)] = slow_seed
    state = tmp_path / "state"
    options = ("--output", str(tmp_path / "records.jsonl"), "--warc", str(tmp_path / "warc"))
    rng = random.Random(41)
    # Three kills with the seed in hand (upstream's limit of deliveries is three: a fourth
    # delivery would give it up, and the whole crawl with it), then seven at random
    # moments of the crawl (after a random number of requests more).
    for kill in range(10):
        crawl = start(site, state, *options)
        if kill < 3:
            wait_for(site, seen(site, kill + 1, page_path(0)))
        else:
            seed_answers.set()
            wait_for(site, seen(site, len(site.requests) + rng.randrange(1, 30)))
        crawl.send_signal(signal.SIGKILL)
        crawl.communicate(timeout=30)
        assert crawl.returncode == -signal.SIGKILL
    code, stdout, stderr = finish(start(site, state, *options), timeout=120)

    assert code == 0, stdout[-2000:] + stderr[-2000:]
    assert "dying on it" not in stdout + stderr
    assert f"{pages} pages fetched" in stdout and "0 failed" in stdout
    assert set(site.fetch_counts()) >= {page_path(i) for i in range(pages)}
    assert records_of(tmp_path / "records.jsonl") == all_pages(site, pages)  # every line whole
    responses = set()
    for path in sorted((tmp_path / "warc").rglob("*.warc.gz")):
        with path.open("rb") as file:
            responses |= {
                r.rec_headers.get_header("WARC-Target-URI")
                for r in ArchiveIterator(file)
                if r.rec_type == "response"
            }
    assert responses == all_pages(site, pages)


def test_a_page_that_crashes_the_process_is_still_given_up_after_its_deliveries(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 50
    site.pages[page_path(0)] = html(*(site.url(page_path(i)) for i in range(1, pages)))
    site.pages.update({page_path(i): html() for i in range(1, pages)})
    state = tmp_path / "state"
    handler = ("--handler", "tests.test_local_state_faults:crashing")
    runs = []
    for _ in range(6):  # three crashes, then the run that gives the page up
        code, stdout, stderr = finish(start(site, state, *handler, threads=1))
        runs.append((code, stdout, stderr))
        if code != -signal.SIGABRT:
            break

    assert [code for code, _, _ in runs] == [-signal.SIGABRT] * 3 + [1], runs[-1]
    assert "Fatal Python error: Aborted" in (state / "crashes.log").read_text()
    for _, stdout, _ in runs[1:]:
        assert "The last run crashed" in stdout
    stdout = runs[-1][1]
    assert "delivered 4 times without finishing; a worker may be dying on it" in stdout
    assert f"{pages - 1} pages fetched" in stdout and "1 failed" in stdout
    counts = site.fetch_counts()
    assert counts[CRASHING_PAGE] == 3
    assert {page_path(i) for i in range(pages)} <= set(counts)


# Item 4: a full disk stops the crawl with one line; the same command carries on.


@contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``path``, unmounted after; skipped unless root."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize(("full", "size"), [("state", "384k"), ("output", "64k"), ("warc", "96k")])
def test_a_full_disk_stops_the_crawl_with_one_line_and_the_same_command_carries_on(
    site: SiteServer, tmp_path: Path, full: str, size: str
) -> None:
    pages = 400
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    with small_tmpfs(tmp_path / "small", size) as small:
        where = {
            name: (small if name == full else tmp_path) for name in ("state", "output", "warc")
        }
        state = where["state"] / "state"
        records = where["output"] / "records.jsonl"
        warc = where["warc"] / "warc"
        options = ("--output", str(records), "--warc", str(warc))
        started = time.monotonic()
        code, stdout, stderr = finish(start(site, state, *options), timeout=60)
        took = time.monotonic() - started
        stopped_at = len(site.requests)
        subprocess.run(["mount", "-o", "remount,size=64m", str(small)], check=True)
        again, again_stdout, again_stderr = finish(start(site, state, *options), timeout=120)
        written = records_of(records)
        responses = set()
        for path in sorted(warc.rglob("*.warc.gz")):
            with path.open("rb") as file:  # every file reads to its end
                responses |= {
                    r.rec_headers.get_header("WARC-Target-URI")
                    for r in ArchiveIterator(file)
                    if r.rec_type == "response"
                }

    assert code == 1, stdout[-2000:] + stderr[-3000:]
    [line] = stderr.splitlines()  # one line, no traceback
    assert line.startswith(f"crawler: no room left on the device of {small}"), line
    assert line.endswith(": free some space, then run the same command to carry on")
    assert "Finished" not in stdout
    assert took < 30
    assert stopped_at < pages  # it stopped before the end
    assert again == 0, again_stdout[-2000:] + again_stderr[-3000:]
    assert "Traceback" not in again_stderr
    assert "Carrying on with the crawl kept in" in again_stdout
    assert f"{pages} pages fetched" in again_stdout and "0 failed" in again_stdout
    assert set(site.fetch_counts()) >= {page_path(i) for i in range(pages)}
    assert written == all_pages(site, pages)
    assert responses == all_pages(site, pages)
