"""``--include``/``--exclude`` run in RE2, in time linear in the URL: a pattern that
would backtrack for ever in Python's ``re`` holds no worker, on either broker or in
``--local``; what RE2 cannot run is refused at seeding, in one line."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from crawler.options import CrawlOptions
from tests.site_server import SiteServer, generate_site, html, page_path
from tests.support import FAST_FAILURES, usage_error, wait_for_crawl
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, queued_messages, seed

#: Python's ``re`` takes about 2^34 steps to find that this does not match.
EVIL_PATTERN = "(a+)+$"
EVIL_PATH = "/" + "a" * 34 + "!"
PAGES = 30


def test_a_backtracking_pattern_takes_no_time_on_a_url_made_to_stall_it() -> None:
    options = CrawlOptions(include=(EVIL_PATTERN,))
    assert not options.allows_url("http://h.test/" + "a" * 10_000 + "!")
    assert options.allows_url("http://h.test/aaa")


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_crawl_with_a_backtracking_pattern_leaves_other_crawls_and_sigterm_working(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest
) -> None:
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=3))
    site.pages["/evil.html"] = html(site.url(EVIL_PATH), site.url("/aaaa"))
    site.pages["/aaaa"] = html()
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        evil = wait_for_crawl(env, site.url("/evil.html"), "--include", EVIL_PATTERN)
        control = wait_for_crawl(env, site.url(page_path(0)))
        _, evil_stderr = evil.communicate(timeout=60)
        _, control_stderr = control.communicate(timeout=60)
    finally:
        stopped = workers.stop()  # SIGTERM: the workers end in time, exit 0

    assert stopped == 0
    assert evil.returncode == 0, evil_stderr[-2000:]
    assert control.returncode == 0, control_stderr[-2000:]
    counts = site.fetch_counts()
    assert counts["/aaaa"] == 1 and EVIL_PATH not in counts
    assert Counter({page_path(i): 1 for i in range(PAGES)}) <= counts


def test_a_local_crawl_with_a_backtracking_pattern_ends(site: SiteServer) -> None:
    site.pages["/evil.html"] = html(site.url(EVIL_PATH), site.url("/aaaa"))
    site.pages["/aaaa"] = html()
    crawl = subprocess.run(
        [
            sys.executable,
            "-m",
            "crawler.example",
            "--local",
            site.url("/evil.html"),
            "--include",
            EVIL_PATTERN,
        ],
        cwd=PROJECT_ROOT,
        env=environment(**FAST_FAILURES),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crawl.returncode == 0, crawl.stderr
    assert site.fetch_counts() == Counter({"/evil.html": 1, "/aaaa": 1})


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),
        ("(?=docs)", "invalid perl operator: (?="),
        ("(?<!print)x", "invalid perl operator: (?<!"),
        ("((a{1000}){1000}){1000}", "invalid repetition size: {1000}"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_at_seeding_in_one_line(
    pattern: str, reason: str, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env)

    result = seed(env, "http://127.0.0.1:1/", "--include", pattern)

    assert result.returncode == 2
    assert usage_error(result.stderr) == (
        f"python -m crawler.example: error: argument --include: {pattern!r} is not a"
        f" regular expression: {reason} (RE2 syntax: no backreferences or lookaround)"
    )
    assert "re2.cc" not in result.stderr  # RE2's own log stays quiet
    assert queued_messages(env) == 0
