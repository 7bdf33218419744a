"""A 4xx answer is the URL's answer, not a failure (issue 43).

404, 410, 403...: the page is recorded (outcome ``answered``, with its status), counted
in the summary, not retried, not dead-lettered, and the exit status stays 0.  408 and
429 say "not now": retried, as a 5xx is.  Dead letters and exit 1 are for what could
not be fetched.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler.environment import Limits
from crawler.errors import Answered, ServerBusy, TransientError
from crawler.fetching import new_session
from crawler.fetching.bounded_fetch import PACE_MS, fetch
from crawler.outcomes import ANSWERED, CRAWLED, FAILED, NOT_HTML, summary
from crawler.tracking.progress import Progress
from tests import faults
from tests.site_server import Page, SiteServer, html
from tests.support import FAST_FAILURES, crawl_id_of, read_records, waited_crawl
from tests.workers import PROJECT_ROOT, dead_letters, environment, seed

#: The pages that answer with a 4xx, and their status.
ANSWERS = {"/missing.html": 404, "/gone.html": 410, "/forbidden.html": 403}


def answering_site(site: SiteServer) -> list[str]:
    """A seed linking to a page of each 4xx answer, a fine page, a not-HTML one, and
    one answering 408 once and one 429 once (Retry-After: 1) before their 200: the
    paths linked from the seed."""
    site.pages["/gone.html"] = Page(html(site.url("/never.html")).body, status=410)
    site.pages["/forbidden.html"] = Page(
        html(site.url("/behind-403.html")).body, content_type="text/html", status=403
    )  # its body is not parsed: /behind-403.html is never fetched
    site.pages["/fine.html"] = html()
    site.pages["/image.png"] = Page(b"PNG", content_type="image/png")
    site.behaviors["/slow-once.html"] = faults.failing_then(
        html(), failures=1, fail=faults.status(408)
    )
    site.behaviors["/busy-once.html"] = faults.failing_then(
        html(), failures=1, fail=faults.status(429, Retry_After="1")
    )
    linked = [*ANSWERS, "/fine.html", "/image.png", "/slow-once.html", "/busy-once.html"]
    site.pages["/"] = html(*(site.url(path) for path in linked))
    return linked


def summary_line(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith("Finished after ")]
    return line


def summed(line: str) -> int:
    """What the summary's counts of written records add up to: pages fetched (not-HTML
    ones among them), URLs answered, failed."""
    fetched = int(re.search(r": (\d+) pages? fetched", line).group(1))  # type: ignore[union-attr]
    answered = sum(int(n) for n in re.findall(r"(\d+) answered \d", line))
    failed = int(re.search(r"(\d+) failed\.", line).group(1))  # type: ignore[union-attr]
    return fetched + answered + failed


def check_records(site: SiteServer, records: list[dict[str, Any]]) -> None:
    by_url = {record["url"]: record for record in records}
    assert len(by_url) == len(records)  # one record a URL
    for path, status in ANSWERS.items():
        record = by_url[site.url(path)]
        assert record["outcome"] == ANSWERED and record["status"] == status, record
        assert record["links"] == [] and "error" not in record
    assert by_url[site.url("/gone.html")]["content_type"] == "text/html; charset=utf-8"
    assert by_url[site.url("/slow-once.html")]["outcome"] == CRAWLED
    assert by_url[site.url("/slow-once.html")]["status"] == 200
    assert by_url[site.url("/busy-once.html")]["outcome"] == CRAWLED
    assert by_url[site.url("/image.png")]["outcome"] == NOT_HTML
    assert site.url("/behind-403.html") not in by_url


def check_fetches(site: SiteServer) -> None:
    counts = site.fetch_counts()
    assert all(counts[path] == 1 for path in ANSWERS)  # an answer is not retried
    assert counts["/slow-once.html"] == 2 and counts["/busy-once.html"] == 2  # retried
    assert counts["/behind-403.html"] == 0 and counts["/never.html"] == 0  # bodies unparsed
    busy = [r.time for r in site.requests if r.path == "/busy-once.html"]
    assert busy[1] - busy[0] >= 1.0  # the server's Retry-After


def crawl_locally(site: SiteServer, output: Path) -> subprocess.CompletedProcess[str]:
    env = environment(MEMCACHED_SERVERS="127.0.0.1:9", **FAST_FAILURES)  # --local: no service
    return subprocess.run(
        [sys.executable, "-m", "crawler.example", "--local", site.url("/"), "-o", str(output)],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_fetch_says_a_4xx_is_an_answer_and_408_429_are_worth_a_retry(site: SiteServer) -> None:
    site.pages["/gone.html"] = Page(b"gone", content_type="text/plain", status=410)
    site.behaviors["/slow.html"] = faults.status(408, Retry_After="2")
    site.behaviors["/busy.html"] = faults.status(429)
    session = new_session()

    with pytest.raises(Answered) as answer:
        fetch(session, site.url("/gone.html"), Limits(), "test", via_public=False)
    assert answer.value.status == 410 and str(answer.value) == "HTTP 410 Gone"
    assert answer.value.content_type == "text/plain"
    with pytest.raises(TransientError) as slow:
        fetch(session, site.url("/slow.html"), Limits(), "test", via_public=False)
    assert slow.value.status == 408 and slow.value.delay == 2000  # Retry-After honoured
    with pytest.raises(TransientError) as busy:
        fetch(session, site.url("/busy.html"), Limits(), "test", via_public=False)
    # A 429 is the server's pace: its host waits a second when it did not say how long.
    assert isinstance(busy.value, ServerBusy)
    assert busy.value.status == 429 and busy.value.delay == PACE_MS


def test_the_summary_names_each_status_answered_when_it_knows_them() -> None:
    counts = {CRAWLED: 2, ANSWERED: 3}

    said = summary(counts, answers={410: 1, 404: 2})
    assert said.endswith("2 answered 404, 1 answered 410, 0 failed")
    assert summary(counts).endswith(", 3 answered 4xx, 0 failed")  # --status: the total only
    assert "answered" not in summary({CRAWLED: 2})

    progress = Progress(None)
    for status in (404, 404, 403):
        progress.record({"url": "u", "outcome": ANSWERED, "status": status})
    progress.record({"url": "v", "outcome": FAILED, "error": "HTTP 500"})
    assert "1 answered 403, 2 answered 404, 1 failed." in progress.summary()
    assert progress.failures == [{"url": "v", "outcome": FAILED, "error": "HTTP 500"}]


def test_a_local_crawl_records_4xx_answers_and_exits_0(site: SiteServer, tmp_path: Path) -> None:
    answering_site(site)
    output = tmp_path / "records.jsonl"

    result = crawl_locally(site, output)

    assert result.returncode == 0, result.stdout + result.stderr
    line = summary_line(result.stdout)
    assert "1 answered 403, 1 answered 404, 1 answered 410, 0 failed." in line, line
    assert ": 5 pages fetched" in line and "1 skipped as not HTML" in line
    assert "  failed:" not in result.stdout
    records = read_records(output)
    check_records(site, records)
    check_fetches(site)
    assert summed(line) == len(records) == 8
    assert "Giving up" not in result.stderr
    assert f"URL {site.url('/missing.html')!r} answered HTTP 404 Not Found." in result.stderr


def test_a_page_that_could_not_be_fetched_still_fails_beside_the_answers(
    site: SiteServer, tmp_path: Path
) -> None:
    answering_site(site)
    site.behaviors["/broken.html"] = faults.status(500)
    site.pages["/fine.html"] = html(site.url("/broken.html"))
    output = tmp_path / "records.jsonl"

    result = crawl_locally(site, output)

    assert result.returncode == 1, result.stdout + result.stderr  # the 500, given up
    line = summary_line(result.stdout)
    assert "1 answered 403, 1 answered 404, 1 answered 410, 1 failed." in line, line
    failed = [r for r in result.stdout.splitlines() if r.startswith("  failed: ")]
    assert failed == [f"  failed: {site.url('/broken.html')}: HTTP 500 Internal Server Error"]
    records = read_records(output)
    outcomes = Counter(record["outcome"] for record in records)
    assert outcomes == {CRAWLED: 4, NOT_HTML: 1, ANSWERED: 3, FAILED: 1}
    assert summed(line) == len(records) == 9


def test_workers_record_4xx_answers_and_dead_letter_nothing(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    answering_site(site)
    output = tmp_path / "records.jsonl"
    started = time.monotonic()

    waiting, stdout, stderr, workers = waited_crawl(env, site.url("/"), "--output", str(output))

    assert waiting.returncode == 0, stdout + stderr
    line = summary_line(stdout)
    assert "1 answered 403, 1 answered 404, 1 answered 410, 0 failed." in line, line
    records = read_records(output)
    check_records(site, records)
    check_fetches(site)
    assert summed(line) == len(records) == 8
    assert dead_letters(env) == 0
    crawl_id = crawl_id_of(stdout)
    listed = seed(env, "--dead-letters", crawl_id)
    assert listed.returncode == 0 and f"0 dead-lettered URL(s) of crawl {crawl_id}" in listed.stdout
    status = seed(env, "--status", crawl_id)
    assert status.returncode == 0, status.stderr
    assert ": finished: 5 pages fetched, " in status.stdout
    assert ", 3 answered 4xx, 0 failed;" in status.stdout and " 0 outstanding," in status.stdout
    assert workers.count("Giving up on URL") == 0
    assert workers.count("answered HTTP 4") == 3
    assert time.monotonic() - started < 60
