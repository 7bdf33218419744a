"""The Python API: ``from crawler import Crawl`` (a crawl in this process) and ``seed``
(a crawl of workers, followed from code)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from crawler import Crawl, CrawlError, Page, seed
from crawler.records import PageRecord
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment

PAGES = 30


def pages_fetched(site: SiteServer) -> dict[str, int]:
    """What the site served, robots.txt aside (``crawler crawl`` obeys it by default)."""
    return {path: n for path, n in site.fetch_counts().items() if path != "/robots.txt"}


def body_size(page: Page) -> dict[str, Any]:
    return {"bytes": len(page.body), "final": page.final_url}


def test_a_local_crawl_from_code_yields_each_record_with_its_handler_s_data(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=4))
    output = tmp_path / "records.jsonl"
    crawl = Crawl([site.url(page_path(0))], threads=4, handler=body_size, records=output)

    records = list(crawl)

    crawled = [r for r in records if r["outcome"] == "crawled"]
    assert crawl.exit_status == 0
    assert len(crawled) == PAGES and sum(pages_fetched(site).values()) == PAGES
    for record in crawled:
        path = record["url"].removeprefix(site.base_url)
        assert record["data"] == {"bytes": len(site.pages[path].body), "final": record["url"]}
    assert len(output.read_text().splitlines()) == PAGES  # --records, as the command writes it


def test_options_are_the_command_s_and_a_wrong_one_says_so(site: SiteServer) -> None:
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=4))
    assert Crawl([site.url(page_path(0))], max_pages=5, follow_relative=False).run() == 0
    assert sum(pages_fetched(site).values()) == 5
    with pytest.raises(CrawlError, match="unrecognized arguments: --max-pagez=5"):
        Crawl([site.url(page_path(0))], max_pagez=5)  # type: ignore[call-arg]
    with pytest.raises(CrawlError, match="--max-pages: '0' is not a whole number above zero"):
        Crawl([site.url(page_path(0))], max_pages=0)
    with pytest.raises(CrawlError, match="not one string"):
        Crawl(site.url(page_path(0)))


def test_options_the_command_line_treats_specially_raise_crawl_error_not_system_exit(
    site: SiteServer,
) -> None:
    url = site.url(page_path(0))
    for special in ("help", "version"):
        option: dict[str, Any] = {special: True}
        with pytest.raises(CrawlError, match=f"{special}: --{special} is the command line's"):
            Crawl([url], **option)
        with pytest.raises(CrawlError, match=f"--{special} is the command line's"):
            seed([url], **option)
    with pytest.raises(CrawlError, match="'-h' is not an http"):  # a URL, not an option
        Crawl(["-h"])
    with pytest.raises(CrawlError, match="'--help' is not a whole number"):  # a value
        Crawl([url], max_pages="--help")  # type: ignore[arg-type]
    assert site.fetch_counts() == {}


def test_two_crawls_run_side_by_side_in_one_process_and_never_mix_their_records(
    site: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawler import example

    site.pages.update(generate_site(site.base_url, pages=6, links_per_page=2))
    monkeypatch.setattr(example.page_handlers, "timeout", 30.0)  # holds the first crawl open
    entered, gate = threading.Event(), threading.Event()

    def holding(page: Page) -> dict[str, Any]:
        entered.set()
        gate.wait(30)
        return {"crawl": "first"}

    def second_handler(page: Page) -> dict[str, Any]:
        return {"crawl": "second"}

    first = Crawl([site.url(page_path(0))], threads=2, handler=holding)
    first_records: list[PageRecord] = []
    runner = threading.Thread(target=lambda: first_records.extend(first), daemon=True)
    runner.start()
    try:
        assert entered.wait(30)  # the first crawl has a page in hand, held there
        second = Crawl([site.url(page_path(0))], threads=2, handler=second_handler)
        second_records = list(second)  # the whole second crawl, while the first is held
        assert not gate.is_set() and runner.is_alive()
    finally:
        gate.set()
        runner.join(timeout=60)
    assert (first.exit_status, second.exit_status) == (0, 0)
    every_page = {site.url(page_path(i)) for i in range(6)}
    for records, name in ((first_records, "first"), (second_records, "second")):
        crawled = [r for r in records if r["outcome"] == "crawled"]
        assert sorted(r["url"] for r in crawled) == sorted(every_page)  # each page once
        assert all(r["data"] == {"crawl": name} for r in crawled)  # its own handler's
        assert all(r["outcome"] in ("crawled", "duplicate") for r in records)
    # Claims kept apart: each crawl fetched each page once, neither took the other's.
    assert pages_fetched(site) == {page_path(i): 2 for i in range(6)}

    after = Crawl([site.url(page_path(0))], max_pages=2, handler=body_size)
    crawled = [r for r in after if r["outcome"] == "crawled"]
    assert after.exit_status == 0 and len(crawled) == 2
    assert all(r["data"] is not None and r["data"]["bytes"] > 0 for r in crawled)


def test_stop_ends_a_local_crawl_early(site: SiteServer) -> None:
    site.pages.update(generate_site(site.base_url, pages=200, links_per_page=4))
    site.delay = 0.01
    crawl = Crawl([site.url(page_path(0))], threads=2)
    for seen, _ in enumerate(crawl):
        if seen == 5:
            crawl.stop()
    assert crawl.exit_status == 130
    assert sum(pages_fetched(site).values()) < 200


#: Run in a process of its own with the test's services (the API seeds through
#: ``crawler.example``'s broker, made from the environment).
WORKERS_SCRIPT = """
import json, sys
from crawler import seed
crawl = seed([sys.argv[1]], records=True, handler="tests.page_handlers:heading")
urls = sorted(r["url"] for r in crawl.records() if r["outcome"] == "crawled")
crawl.close()
figures = crawl.status()
crawl.pause()
paused = crawl.status()["pause-requested"]
crawl.resume()
resumed = crawl.status()["pause-requested"]
print(json.dumps({"urls": urls, "outstanding": figures["outstanding"],
                  "paused": paused, "resumed": resumed, "id": crawl.crawl_id}))
"""


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_crawl_of_workers_is_seeded_and_followed_from_code(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, memcached: object
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env),
        **FAST_FAILURES,
        CRAWLER_HANDLERS="tests.page_handlers:heading",
    )
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=4))
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        ran = subprocess.run(
            [sys.executable, "-c", WORKERS_SCRIPT, site.url(page_path(0))],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        assert workers.stop() == 0
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads(ran.stdout)
    assert result["urls"] == sorted(site.url(page_path(i)) for i in range(PAGES))
    assert result["outstanding"] == 0
    assert (result["paused"], result["resumed"]) == (1, 0)


def test_records_end_once_the_counters_say_finished_as_workers_count_after_the_record(
    memcached: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker sends a message's record before it counts the message's ending, so the
    last record arrives before ``outstanding`` is 0: ``settled`` (which ``records()``
    ends with) waits for the count, and gives up past ``SETTLE_WAIT``."""
    from crawler import api, example
    from crawler.frontier import counters
    from crawler.outcomes import CRAWLED

    crawl_id = f"settle-{uuid.uuid4().hex[:8]}"
    with example.parts.stores.reserve() as client:
        counters.start(client, crawl_id, 1, 60)

    def count_the_ending() -> None:
        with example.parts.stores.reserve() as client:
            counters.add_to(client, counters.crawl_key(crawl_id, CRAWLED), 1, 60)

    counted = threading.Timer(0.3, count_the_ending)
    counted.start()
    assert api.status(crawl_id)["outstanding"] == 1  # type: ignore[index]
    assert api.settled(crawl_id)
    assert api.status(crawl_id)["outstanding"] == 0  # type: ignore[index]
    counted.join()

    never = f"never-{uuid.uuid4().hex[:8]}"
    with example.parts.stores.reserve() as client:
        counters.start(client, never, 1, 60)
    monkeypatch.setattr(api, "SETTLE_WAIT", 0.2)
    assert not api.settled(never)
