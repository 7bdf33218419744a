"""``--cancel CRAWL_ID``: a crawl's queued and retrying messages end without a fetch."""

from __future__ import annotations

import time

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, crawl_id_of, read_records, wait_for_crawl
from tests.workers import WorkerProcesses, environment, queued_messages, seed

#: Seconds after ``--cancel`` returns by which no new fetch of the crawl may start:
#: only messages already past their claim check when the flag was set go on.
LAG = 0.5


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_cancel_mid_crawl_ends_wait_drains_the_queues_and_fetches_nothing_more(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: object,
    dedup_env: dict[str, str],
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **dedup_env, **FAST_FAILURES)
    pages = 300
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    site.delay = 0.05
    output = tmp_path / "records.jsonl"  # type: ignore[operator]
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)), "--output", str(output))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        workers.wait_until(lambda: workers.count("Done crawling") >= 10)
        cancelled = seed(env, "--cancel", crawl_id)
        cancelled_at = time.monotonic()
        stdout, stderr = waiting.communicate(timeout=90)
        workers.wait_until(lambda: queued_messages(env) == 0, timeout=60)
        status = seed(env, "--status", crawl_id)
        unknown = seed(env, "--cancel", "0" * 32)
    finally:
        assert workers.stop() == 0

    assert cancelled.returncode == 0
    assert cancelled.stdout.startswith(f"crawl {crawl_id} cancelled: ")
    late = [r.path for r in site.requests if r.time > cancelled_at + LAG]
    assert late == []
    fetched = len(site.fetch_counts())
    assert fetched < pages
    assert waiting.returncode == 3, stderr[-2000:]
    assert " cancelled, 0 failed." in stdout
    assert len(read_records(output)) == fetched
    assert f"crawl {crawl_id}: cancelled (finished): " in status.stdout
    assert " 0 outstanding," in status.stdout
    assert workers.logged_any("since its crawl was cancelled")
    assert unknown.returncode == 2
