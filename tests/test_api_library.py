"""The Python API behaves as a library: a :class:`Crawl` leaves the host program's
logging and streams alone, says its summary through values, and no crawl rebinds an
actor's broker (``--local``'s actors are its own, on its own broker)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest

from crawler import Crawl, Page
from crawler.brokers.local import PriorityStubBroker
from crawler.middleware import CurrentBroker, actor_for, parts_for
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer, generate_site, page_path


class Kept(logging.Handler):
    """The host program's own handler: what it was handed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def host_logging() -> Iterator[Kept]:
    """The root logger as a host program configures it (``basicConfig(level=INFO)``),
    as it was again afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    kept = Kept()
    root.addHandler(kept)
    root.setLevel(logging.INFO)
    yield kept
    root.handlers[:] = handlers
    root.setLevel(level)


def the_process_s_actors() -> tuple[Any, Any, Any]:
    from crawler import example

    return example.crawl.broker, example.crawl_sitemap.broker, dramatiq.get_broker()


def test_a_crawl_leaves_the_host_s_logging_and_streams_alone(
    site: SiteServer, host_logging: Kept, capfd: pytest.CaptureFixture[str]
) -> None:
    site.pages.update(generate_site(site.base_url, pages=5, links_per_page=2))
    root = logging.getLogger()
    handlers = list(root.handlers)
    before = the_process_s_actors()

    crawl = Crawl([site.url(page_path(0))], threads=2)
    assert crawl.run() == 0

    assert root.handlers == handlers and root.level == logging.INFO
    assert all(not isinstance(h, logging.StreamHandler) or h in handlers for h in root.handlers)
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # no summary, no progress, no log line of its own
    assert any("Crawling" in r.getMessage() for r in host_logging.records)  # logged to the host
    assert crawl.summary is not None and crawl.summary.startswith("Finished after")
    assert "5 pages fetched" in crawl.summary
    assert crawl.progress.done >= 5
    assert the_process_s_actors() == before  # nothing rebound


def test_crawls_run_one_after_another_and_the_actors_are_never_rebound(
    site: SiteServer, host_logging: Kept, capfd: pytest.CaptureFixture[str]
) -> None:
    from crawler import example

    site.pages.update(generate_site(site.base_url, pages=6, links_per_page=2))
    before = the_process_s_actors()
    seen: list[Any] = []

    def looking(page: Page) -> dict[str, Any]:
        seen.append(the_process_s_actors())
        return {}

    for _ in range(2):
        crawl = Crawl([site.url(page_path(0))], threads=2, handler=looking)
        assert crawl.run() == 0
        assert crawl.summary is not None and "Finished" in crawl.summary
    assert len(seen) == 12 and all(during == before for during in seen)
    assert the_process_s_actors() == before
    assert example.crawl.broker is example.broker
    assert capfd.readouterr() == ("", "")


def test_a_second_crawl_runs_while_the_first_holds_a_page_and_neither_waits(
    site: SiteServer, host_logging: Kept, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawler import example

    site.pages.update(generate_site(site.base_url, pages=2, links_per_page=1))
    monkeypatch.setattr(example.page_handlers, "timeout", 30.0)
    entered, gate = threading.Event(), threading.Event()

    def holding(page: Page) -> dict[str, Any]:
        entered.set()
        gate.wait(30)
        return {}

    first = Crawl([site.url(page_path(0))], threads=1, handler=holding)
    ended: list[int] = []
    runner = threading.Thread(target=lambda: ended.append(first.run()), daemon=True)
    runner.start()
    try:
        assert entered.wait(30)
        second = Crawl([site.url(page_path(1))], max_pages=1)
        assert second.run() == 0  # to its end, the first still held
        assert runner.is_alive() and ended == []
    finally:
        gate.set()
        runner.join(timeout=60)
    assert ended == [0]
    assert second.progress.counts["crawled"] == 1


def test_sitemaps_run_on_the_local_broker_s_own_actors(
    site: SiteServer, host_logging: Kept
) -> None:
    base = site.base_url
    listed = [f"{base}/listed/{i}.html" for i in range(3)]
    site.pages["/robots.txt"] = SitePage(
        f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n".encode(), "text/plain"
    )
    site.pages["/sitemap.xml"] = SitePage(
        (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{url}</loc></url>" for url in listed)
            + "</urlset>"
        ).encode(),
        "application/xml",
    )
    site.pages["/"] = SitePage(b"<html><body>home</body></html>")
    for url in listed:
        site.pages[url.removeprefix(base)] = SitePage(b"<html><body>listed</body></html>")
    before = the_process_s_actors()
    crawl = Crawl([f"{base}/"], threads=2, sitemaps=True)
    crawled = sorted(r["url"] for r in crawl if r["outcome"] == "crawled")

    assert crawl.exit_status == 0
    assert crawled == sorted([f"{base}/", *listed])  # linked from nowhere: the sitemap's
    assert the_process_s_actors() == before


def test_actor_for_finds_the_current_broker_s_actor_and_falls_back() -> None:
    from crawler import example

    assert actor_for(example.crawl) is example.crawl  # no message processed here
    broker = PriorityStubBroker()
    broker.add_middleware(CurrentBroker())
    own = dramatiq.Actor(
        example.crawl.fn,
        broker=broker,
        actor_name=example.crawl.actor_name,
        queue_name=example.crawl.queue_name,
        priority=example.crawl.priority,
        options=dict(example.crawl.options),
    )
    found: list[Any] = []
    probe = dramatiq.Actor(
        lambda: found.extend([actor_for(example.crawl), actor_for(example.crawl_sitemap)]),
        broker=broker,
        actor_name="probe",
        queue_name="probe",
        priority=0,
        options={},
    )
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=1)
    worker.start()
    try:
        probe.send()
        broker.join("probe", fail_fast=True)
        worker.join()
    finally:
        worker.stop()
        broker.close()
    # crawl: the broker's own; crawl_sitemap, not declared there: the process's
    assert found == [own, example.crawl_sitemap]
    assert own.broker is broker and example.crawl.broker is not broker
    assert actor_for(example.crawl) is example.crawl  # cleared after the message


def test_parts_for_finds_the_current_broker_s_parts_and_falls_back() -> None:
    worker_s, crawl_s = object(), object()  # stand-ins: parts_for only hands them over
    assert parts_for(worker_s) is worker_s  # no message processed here
    found: list[Any] = []
    brokers = []
    for parts in (crawl_s, None):  # a --local crawl's broker, and one without parts
        broker = PriorityStubBroker()
        broker.add_middleware(CurrentBroker())
        broker.crawl_parts = parts
        dramatiq.Actor(
            lambda: found.append(parts_for(worker_s)),
            broker=broker,
            actor_name="probe",
            queue_name="probe",
            priority=0,
            options={},
        ).send()
        brokers.append(broker)
    for broker in brokers:
        worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=1)
        worker.start()
        try:
            broker.join("probe", fail_fast=True)
            worker.join()
        finally:
            worker.stop()
            broker.close()
    assert found == [crawl_s, worker_s]
    assert parts_for(worker_s) is worker_s  # cleared after the message


def test_a_program_that_used_the_workers_stores_crawls_here_then_has_them_back(
    site: SiteServer, memcached: object
) -> None:
    from crawler import example

    stores = example.parts.stores
    with stores.reserve():  # opened from the environment, as seed() or status() open them
        before = stores.memcache_pool
    site.pages.update(generate_site(site.base_url, pages=3, links_per_page=1))
    assert Crawl([site.url(page_path(0))], threads=1).run() == 0
    assert stores.memcache_pool is before  # the process's own stores, back
