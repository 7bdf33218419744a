"""``python -m crawler.example --local``: a whole crawl in one process, no services."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.site_server import Page, SiteServer, generate_site, html, page_path
from tests.support import read_records
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, queued_messages, seed

PAGES = 200


class ListeningTrap:
    """Listens on a port where a service would be and counts who connects."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0.2)
        self.port: int = self.socket.getsockname()[1]
        self.connections = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join()
        self.socket.close()


@contextmanager
def services_trapped() -> Iterator[tuple[dict[str, str], list[ListeningTrap]]]:
    """Service variables pointing at traps, so any connection to them is seen."""
    traps = [ListeningTrap() for _ in range(3)]
    rabbitmq, redis, memcached = (trap.port for trap in traps)
    env = {
        "RABBITMQ_URL": f"amqp://guest:guest@127.0.0.1:{rabbitmq}",
        "REDIS_URL": f"redis://127.0.0.1:{redis}/0",
        "MEMCACHED_SERVERS": f"127.0.0.1:{memcached}",
    }
    try:
        yield env, traps
    finally:
        for trap in traps:
            trap.close()


def crawl_locally(
    env: dict[str, str], *args: str, stderr: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "crawler.example", "--local", *args],
        cwd=PROJECT_ROOT,
        env=environment(**env),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


@pytest.mark.parametrize("redis", ["0", "1"])
def test_local_crawl_fetches_every_page_once_and_touches_no_service(
    redis: str, site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=10))
    output = tmp_path / "records.jsonl"
    with services_trapped() as (env, traps):
        crawl = crawl_locally(
            {**env, "REDIS": redis}, site.url(page_path(0)), "--output", str(output)
        )
        stdout, stderr = crawl.communicate(timeout=120)
        connections = sum(trap.connections for trap in traps)

    assert crawl.returncode == 0, stderr
    assert connections == 0
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)}
    records = read_records(output)
    assert sorted(r["url"] for r in records) == sorted(site.url(page_path(i)) for i in range(PAGES))
    assert all(r["status"] == 200 and r["outcome"] == "crawled" for r in records)
    assert all(len(r["links"]) == 10 for r in records)
    assert all(r["content_type"] == "text/html; charset=utf-8" for r in records)
    assert all(isinstance(r["elapsed_ms"], float) for r in records)
    assert "Finished after " in stdout
    assert f": {PAGES} pages fetched" in stdout
    assert "0 failed." in stdout


def test_local_crawl_lists_failures_in_its_summary_and_exits_1(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = html(site.url("/gone.html"), site.url("/image.png"), site.url("/broken.html"))
    site.pages["/image.png"] = Page(b"PNG", content_type="image/png")
    site.behaviors["/broken.html"] = lambda handler, nth: handler.send_error(500)
    output = tmp_path / "records.jsonl"
    with services_trapped() as (env, _):
        crawl = crawl_locally(env, site.url("/"), "--output", str(output))
        stdout, _ = crawl.communicate(timeout=60)

    assert crawl.returncode == 1  # /broken.html could not be fetched; the 404 is an answer
    assert "1 pages fetched" not in stdout
    assert "2 pages fetched" in stdout
    assert "1 skipped as not HTML" in stdout
    assert "1 answered 404, 1 failed." in stdout
    assert f"  failed: {site.url('/broken.html')}: HTTP 500" in stdout
    assert f"  failed: {site.url('/gone.html')}" not in stdout
    outcomes = {r["url"]: r["outcome"] for r in read_records(output)}
    assert outcomes == {
        site.url("/"): "crawled",
        site.url("/image.png"): "not-html",
        site.url("/gone.html"): "answered",
        site.url("/broken.html"): "failed",
    }


def test_local_and_distributed_crawls_reach_the_same_pages(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=4, seed=7))
    site.pages[page_path(5)] = html(site.url("/skip.png"), site.url("/gone.html"))
    site.pages["/skip.png"] = Page(b"x", content_type="image/png")
    seed_url = site.url(page_path(0))

    with services_trapped() as (env, _):
        local = crawl_locally(env, seed_url)
        local.communicate(timeout=60)
    assert local.returncode == 0  # /gone.html answered 404: an answer, not a failure
    local_pages = set(site.fetch_counts())
    site.requests.clear()

    env = environment(**rabbitmq_env)
    workers = WorkerProcesses(env, processes=1, threads=8)
    try:
        assert seed(env, seed_url).returncode == 0
        workers.wait_until(lambda: site.fetched(local_pages) and queued_messages(env) == 0)
    finally:
        assert workers.stop() == 0

    assert set(site.fetch_counts()) == local_pages
    assert "/gone.html" in local_pages and "/skip.png" in local_pages


def test_ctrl_c_stops_within_seconds_keeping_the_summary_and_valid_records(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=5))
    site.delay, site.hold_from = 0.05, 20  # the crawl cannot end before its Ctrl-C
    output = tmp_path / "records.jsonl"
    with services_trapped() as (env, _):
        crawl = crawl_locally(
            env, site.url(page_path(0)), "--output", str(output), "--threads", "4"
        )
        site.wait_for_requests(20)
        interrupted_at = time.monotonic()
        crawl.send_signal(signal.SIGINT)
        site.release()
        stdout, _ = crawl.communicate(timeout=10)
        took = time.monotonic() - interrupted_at

    assert took < 5
    assert crawl.returncode == 130
    assert "Interrupted after" in stdout
    records = read_records(output)
    assert 0 < len(records) < PAGES
    assert len(site.fetch_counts()) < PAGES


def test_progress_bar_is_drawn_on_a_terminal(site: SiteServer) -> None:
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=3))
    site.delay = 0.02
    controller, terminal = os.openpty()
    with services_trapped() as (env, _):
        crawl = crawl_locally(env, site.url(page_path(0)), "--threads", "2", stderr=terminal)
        os.close(terminal)
        shown = b""
        while True:
            ready, _, _ = select.select([controller], [], [], 30)
            try:
                chunk = os.read(controller, 4096) if ready else b""
            except OSError:  # the crawl closed the terminal
                chunk = b""
            if not chunk:
                break
            shown += chunk
        crawl.communicate(timeout=30)
    os.close(controller)

    assert crawl.returncode == 0
    assert b"\r\x1b[K" in shown
    assert b" discovered, " in shown and b" pages/s, 0 errors" in shown


def test_an_xhtml_page_is_html_and_its_links_are_followed(site: SiteServer, tmp_path: Path) -> None:
    site.pages["/"] = Page(
        html(site.url("/next.html")).body, content_type="application/xhtml+xml; charset=utf-8"
    )
    site.pages["/next.html"] = html()
    output = tmp_path / "records.jsonl"
    with services_trapped() as (env, _):
        crawl = crawl_locally(env, site.url("/"), "--output", str(output))
        stdout, _ = crawl.communicate(timeout=60)

    assert crawl.returncode == 0, stdout
    assert {r["url"]: r["outcome"] for r in read_records(output)} == {
        site.url("/"): "crawled",
        site.url("/next.html"): "crawled",
    }
