"""``--cancel CRAWL_ID``: a crawl's queued and retrying messages end without a fetch."""

from __future__ import annotations

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, HELD_FETCHES, crawl_id_of, read_records, wait_for_crawl
from tests.workers import WorkerProcesses, environment, queued_messages, seed


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_cancel_mid_crawl_ends_wait_drains_the_queues_and_fetches_nothing_more(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: object,
    dedup_env: dict[str, str],
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **dedup_env, **{**FAST_FAILURES, **HELD_FETCHES}
    )
    pages = 300
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    # From the 12th request the site holds its answers: when the crawl is cancelled both
    # threads are in a fetch, none between its claim check and its request, so that
    # no request at all may come after the cancel (not even one checked just before it).
    site.delay, site.hold_from = 0.05, 12
    output = tmp_path / "records.jsonl"  # type: ignore[operator]
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        waiting = wait_for_crawl(env, site.url(page_path(0)), "--output", str(output))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        site.wait_for_held(2)
        cancelled = seed(env, "--cancel", crawl_id)
        requested = len(site.requests)
        site.release()
        stdout, stderr = waiting.communicate(timeout=90)
        workers.wait_until(lambda: queued_messages(env) == 0, timeout=60)
        status = seed(env, "--status", crawl_id)
        unknown = seed(env, "--cancel", "0" * 32)
    finally:
        assert workers.stop() == 0

    assert cancelled.returncode == 0
    assert cancelled.stdout.startswith(f"crawl {crawl_id} cancelled: ")
    late = [r.path for r in site.requests[requested:]]
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
