"""Statistics at the end, as Scrapy's stats dump and Crawlee's final table (issue 57):
``--stats FILE`` on ``--local`` (one process and several) and ``--wait``, and ``crawler
status --json`` for a workers' crawl, read from the store: the same document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import faults
from tests.site_server import Page, SiteServer
from tests.support import FAST_FAILURES, crawl_id_of
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment

CRAWLER = str(Path(sys.executable).parent / "crawler")
ROUTER = "tests.item_pipelines:router"
KEYS = {
    "version", "crawl_id", "elapsed_s", "pages", "discovered", "outcomes", "retried",
    "deferred", "status_codes", "bytes", "rendered", "browser_requests", "items",
    "items_dropped", "fetch_ms", "hosts",
    "busiest_hosts",
}  # fmt: skip


def crawler(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CRAWLER, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def serve(site: SiteServer) -> str:
    links = "".join(f'<a href="{site.url(f"/{n}.html")}">{n}</a>' for n in range(5))
    site.pages["/"] = Page((links + f'<a href="{site.url("/gone")}">x</a>').encode())
    for n in range(5):
        site.pages[f"/{n}.html"] = Page(f"<p>page {n}</p>".encode())
    # One page's server asks the crawl to wait once: a rate-limit deferral, no retry.
    site.behaviors["/4.html"] = faults.failing_then(
        site.pages.pop("/4.html"), failures=1, fail=faults.status(429, Retry_After="0")
    )
    site.pages["/gone"] = Page(b"gone", status=404)
    return site.url("/")


def check(document: dict[str, Any], site: SiteServer, *, codes: bool = True) -> None:
    assert set(document) == KEYS
    assert document["pages"] == 6 and document["outcomes"]["crawled"] == 6
    # The 429 deferred its page and made the host wait: those in flight deferred too.
    assert document["deferred"] >= 1 and document["retried"] == 0
    assert document["outcomes"]["answered"] == 1 and document["discovered"] == 7
    if codes:
        assert document["status_codes"] == {"200": 6, "404": 1}
    assert document["bytes"] > 0
    assert document["items"] == 18 and document["items_dropped"] == 18  # 3 kept, 3 dropped
    assert document["hosts"] == 1
    (host,) = document["busiest_hosts"]
    assert host["host"] == site.url("/").split("/")[2] and host["pages"] == 6
    assert document["fetch_ms"]["median"] is not None
    assert host["median_ms"] is not None


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_local_crawl_writes_its_statistics(
    site: SiteServer, tmp_path: Path, processes: str
) -> None:
    stats = tmp_path / "stats.json"
    done = crawler(
        environment(), "crawl", "--local", serve(site), "--processes", processes,
        "--handler", ROUTER, "--stats", str(stats),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    check(json.loads(stats.read_text()), site)


def test_stats_need_a_crawl_that_ends_here() -> None:
    done = crawler(environment(), "crawl", "--workers", "http://127.0.0.1:9/", "--stats", "s.json")
    assert done.returncode == 2
    assert "--stats works with --local or --wait" in done.stderr


def test_a_stats_file_that_cannot_be_written_is_said_and_exits_1(
    site: SiteServer, tmp_path: Path
) -> None:
    done = crawler(
        environment(), "crawl", "--local", serve(site), "--stats", str(tmp_path / "no" / "s.json")
    )
    assert done.returncode == 1
    assert "cannot write --stats" in done.stderr and "Finished after" in done.stdout


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_wait_writes_the_statistics_crawler_status_json_reads_from_the_store(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    memcached: object,
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_HANDLERS=ROUTER
    )
    stats = tmp_path / "stats.json"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = crawler(
            env,
            "crawl",
            "--workers",
            serve(site),
            "--handler",
            ROUTER,
            "--wait",
            "--stats",
            str(stats),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        status = crawler(env, "status", crawl_id_of(done.stdout), "--json")
        assert status.returncode == 0, status.stderr
    finally:
        assert workers.stop() == 0
    written, read = json.loads(stats.read_text()), json.loads(status.stdout)
    check(written, site)
    check(read, site, codes=False)
    assert read["status_codes"] is None  # the store keeps none
    same = KEYS - {"elapsed_s", "status_codes", "busiest_hosts", "fetch_ms"}
    assert {k: written[k] for k in same} == {k: read[k] for k in same}
