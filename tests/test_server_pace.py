"""A server that defends itself: it answers 429 with ``Retry-After: 1`` above 4 requests
in flight or 20 a second, as servers and CDNs do.  That is the server's pace, not the
pages' failure: the host waits for the whole crawl, the pages come back without
spending their retries, and none is given up, on workers and ``--local`` alike."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import faults
from tests.defending_servers import Defending, Loaded
from tests.site_server import Page, SiteServer, generate_site, html, page_path
from tests.support import FAST_FAILURES, read_records, waited_crawl
from tests.test_local_mode import crawl_locally, services_trapped
from tests.workers import environment

#: The pages of the site the pace is measured on (serial), and of the one the other
#: tests crawl: big enough that the server refuses some, small enough for the suite.
PAGES, FEWER = 200, 100


def defend(site: SiteServer, pages: int) -> Defending:
    served = generate_site(site.base_url, pages=pages, links_per_page=5)
    served["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", content_type="text/plain")
    server = Defending(served)
    site.behaviors.update(dict.fromkeys(served, server))
    return server


@pytest.fixture
def defending(site: SiteServer) -> Iterator[Defending]:
    yield defend(site, PAGES)


@pytest.fixture
def defending_fewer(site: SiteServer) -> Iterator[Defending]:
    yield defend(site, FEWER)


def every_page_once(defending: Defending, pages: int = PAGES) -> bool:
    return all(defending.served[page_path(i)] == 1 for i in range(pages))


@pytest.mark.serial  # the share refused follows the pace the crawl keeps: no other test's load
@pytest.mark.parametrize("where", ["workers", "local"])
def test_auto_throttle_keeps_to_a_defending_server_s_pace(
    where: str, site: SiteServer, defending: Defending, tmp_path: Path,
    rabbitmq_env: dict[str, str],
) -> None:  # fmt: skip
    """``--auto-throttle`` finds the server's pace: every page once, and after the
    first seconds at most 5% of the requests refused (without it, over a third are)."""
    output = tmp_path / "pages.jsonl"
    seed_url = site.url(page_path(0))
    if where == "workers":
        env = environment(**rabbitmq_env, **FAST_FAILURES)
        crawl, stdout, stderr, _ = waited_crawl(
            env, seed_url, "--auto-throttle", "--output", str(output), processes=2, threads=8,
            timeout=240,
        )  # fmt: skip
    else:
        with services_trapped() as (env, _):
            crawl = crawl_locally(
                {**env, "CRAWLER_LOCAL_BUSY": "inf"}, seed_url, "--auto-throttle", "--threads",
                "16", "--output", str(output),
            )  # fmt: skip
            stdout, stderr = crawl.communicate(timeout=240)

    assert crawl.returncode == 0, stdout + stderr
    assert every_page_once(defending), defending.served
    refused = defending.refused_share_after(3.0)
    print(f"{where}: {len(defending.answers)} requests, {defending.refused} refused,"
          f" {refused:.1%} of those after 3 s")  # fmt: skip
    assert refused <= 0.05
    assert f": {PAGES} pages fetched" in stdout


def test_workers_fetch_every_page_of_a_server_that_answers_429(
    site: SiteServer, defending_fewer: Defending, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    output = tmp_path / "pages.jsonl"
    seed_url = site.url(page_path(0))
    waiting, stdout, stderr, workers = waited_crawl(
        env, seed_url, "--output", str(output), processes=2, threads=8, timeout=240
    )

    assert waiting.returncode == 0, stdout + stderr
    assert defending_fewer.refused > 0  # the server did defend itself
    assert every_page_once(defending_fewer, FEWER), defending_fewer.served
    assert not workers.logged_any("Giving up on URL")
    assert not workers.logged_any("It will be retried")  # no retry was spent on a 429
    assert f": {FEWER} pages fetched" in stdout
    crawled = [r for r in read_records(output) if r["outcome"] == "crawled"]
    assert sorted(r["url"] for r in crawled) == sorted(site.url(page_path(i)) for i in range(FEWER))


def test_local_fetches_every_page_of_a_server_that_answers_429(
    site: SiteServer, defending_fewer: Defending, tmp_path: Path
) -> None:
    output = tmp_path / "pages.jsonl"
    with services_trapped() as (env, _):
        crawl = crawl_locally(
            {**env, "CRAWLER_LOCAL_BUSY": "inf"}, site.url(page_path(0)), "--output", str(output)
        )
        stdout, stderr = crawl.communicate(timeout=240)

    assert crawl.returncode == 0, stdout + stderr
    assert defending_fewer.refused > 0
    assert every_page_once(defending_fewer, FEWER), defending_fewer.served
    assert "Giving up on URL" not in stderr
    assert "It will be retried" not in stderr
    assert f": {FEWER} pages fetched" in stdout
    assert len([r for r in read_records(output) if r["outcome"] == "crawled"]) == FEWER


def test_the_host_waits_for_every_worker_after_a_429(site: SiteServer, tmp_path: Path) -> None:
    """One page's 429 (``Retry-After: 2``) makes the whole host wait: no request of
    the host's other pages reaches the server within the wait."""
    hub = html(*(site.url(f"/after/{i}.html") for i in range(8)))
    site.pages["/"] = html(site.url("/busy.html"))
    site.behaviors["/busy.html"] = faults.failing_then(
        hub, failures=1, fail=faults.status(429, Retry_After="2")
    )
    for i in range(8):
        site.pages[f"/after/{i}.html"] = html()
    with services_trapped() as (env, _):
        crawl = crawl_locally(env, site.url("/"), "--output", str(tmp_path / "pages.jsonl"))
        stdout, stderr = crawl.communicate(timeout=60)

    assert crawl.returncode == 0, stdout + stderr
    busy = [r.time for r in site.requests if r.path == "/busy.html"]
    assert len(busy) == 2 and busy[1] - busy[0] >= 2.0
    assert "It will be retried" not in stderr
    assert re.search(r"Host of '.*/busy.html' asked the crawl to wait; waiting 2.0s", stderr)


def test_a_server_that_never_stops_answering_429_gets_its_pages_given_up_in_the_end(
    site: SiteServer, tmp_path: Path
) -> None:
    """The wait is bounded: past ``CRAWLER_MAX_PACED`` waits a 429 is a failed attempt,
    retried as any, and then given up loudly (exit 1), never waited for for ever."""
    site.behaviors["/"] = faults.status(429, Retry_After="0")
    with services_trapped() as (env, _):
        crawl = crawl_locally(
            {**env, "CRAWLER_MAX_PACED": "2"}, site.url("/"), "--output", str(tmp_path / "p")
        )
        stdout, stderr = crawl.communicate(timeout=60)

    assert crawl.returncode == 1, stdout + stderr
    assert site.fetch_counts()["/"] == 2 + 4  # 2 waits, then the first try and 3 retries
    assert "Giving up on URL" in stderr and "HTTP 429 Too Many Requests" in stderr


def test_a_503_with_retry_after_is_the_servers_pace_and_without_it_a_failure(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = html(site.url("/paced.html"), site.url("/failing.html"))
    site.behaviors["/paced.html"] = faults.failing_then(
        html(), failures=1, fail=faults.status(503, Retry_After="1")
    )
    site.behaviors["/failing.html"] = faults.failing_then(
        html(), failures=1, fail=faults.status(503)
    )
    with services_trapped() as (env, _):
        crawl = crawl_locally(env, site.url("/"), "--output", str(tmp_path / "pages.jsonl"))
        stdout, stderr = crawl.communicate(timeout=60)

    assert crawl.returncode == 0, stdout + stderr
    assert site.fetch_counts()["/paced.html"] == 2 and site.fetch_counts()["/failing.html"] == 2
    retried = [line for line in stderr.splitlines() if "It will be retried" in line]
    assert len(retried) == 1 and "/failing.html" in retried[0], stderr


@pytest.mark.serial  # a pace measured: no other test's load may move it
@pytest.mark.parametrize("where", ["workers", "local"])
def test_auto_throttle_holds_a_server_that_slows_under_load_to_its_pace(
    where: str, site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    """16 threads, one host whose answers take twice as long for each request more in
    flight: ``--auto-throttle`` (with its 2 requests in flight a host) keeps it
    answering at about its unloaded speed, every page once."""
    pages = generate_site(site.base_url, pages=100, links_per_page=5)
    pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", content_type="text/plain")
    server = Loaded(pages)
    site.behaviors.update(dict.fromkeys(pages, server))
    seed_url = site.url(page_path(0))
    if where == "workers":
        env = environment(**rabbitmq_env, **FAST_FAILURES)
        crawl, stdout, stderr, _ = waited_crawl(
            env, seed_url, "--auto-throttle", processes=2, threads=8, timeout=240
        )
    else:
        with services_trapped() as (env, _):
            crawl = crawl_locally(env, seed_url, "--auto-throttle", "--threads", "16")
            stdout, stderr = crawl.communicate(timeout=240)

    assert crawl.returncode == 0, stdout + stderr
    assert all(server.served[page_path(i)] == 1 for i in range(100)), server.served
    median = server.median_answer_time()
    print(f"{where}: peak {server.peak} in flight, median answer {median:.3f}s")
    assert server.peak <= 2  # the polite default, held across the workers
    assert median <= 2 * server.base  # mostly unloaded
