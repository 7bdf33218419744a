"""``crawler dashboard``: a live page of a crawl on workers, read in a real browser
(Debian's chromium, driven by Selenium through chromium-driver), its figures equal to
``--status``'s."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from scripts.services import apt_install
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, crawl_id_of, wait_for_crawl, wait_until
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

#: Where the test keeps its screenshots: an artefact of the run.
ARTEFACTS = PROJECT_ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """Headless chromium, installed from Debian when missing (as Memcached is)."""
    for package, command in (("chromium", "chromium"), ("chromium-driver", "chromedriver")):
        if not shutil.which(command):
            apt_install(package)
    driver_path, chromium = shutil.which("chromedriver"), shutil.which("chromium")
    assert driver_path and chromium, "chromium and chromium-driver are needed"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1200,1400")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: What the test reads of the page, in one go (its rows are redrawn every second).
SNAPSHOT = """
const text = (id) => document.getElementById(id).textContent;
const rows = (selector) => [...document.querySelectorAll(selector)].map(
    (row) => [...row.cells].map((cell) => cell.textContent));
const crawled = document.getElementById("outcome-crawled");
return {
  state: text("state"), discovered: text("discovered"), outstanding: text("outstanding"),
  pages: text("pages"), workers: text("workers"), dead_letters: text("dead-letters"),
  hosts: rows("#hosts tbody tr"), failures: rows("#failures tbody tr"),
  crawled: crawled ? crawled.dataset.count : null,
  points: Number(document.getElementById("chart").dataset.points),
  canvas: document.querySelectorAll("#chart canvas").length,
};
"""


def snapshot(browser: webdriver.Chrome) -> dict[str, Any]:
    return dict(browser.execute_script(SNAPSHOT))


def status_figures(env: dict[str, str], crawl_id: str) -> dict[str, int]:
    line = seed(env, "--status", crawl_id).stdout
    return {
        "discovered": int(re.search(r"(\d+) discovered", line).group(1)),  # type: ignore[union-attr]
        "outstanding": int(re.search(r"(\d+) outstanding", line).group(1)),  # type: ignore[union-attr]
        "pages": int(re.search(r"(\d+) pages? fetched", line).group(1)),  # type: ignore[union-attr]
    }


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_the_dashboard_shows_a_live_crawl_on_workers_as_status_counts_it(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    browser: webdriver.Chrome,
    memcached: object,
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    pages = 120
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=4))
    first = site.pages[page_path(0)]  # it links to a page that fails: errors, a failure
    broken = site.url("/broken.html")
    site.pages[page_path(0)] = SitePage(
        first.body.replace(b"</body>", f'<a href="{broken}">x</a></body>'.encode())
    )
    site.pages["/broken.html"] = SitePage(b"down", status=500)
    site.delay = 0.05
    port = free_port()
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "crawler.command", "dashboard", "--port", str(port)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        assert dashboard.stdout is not None
        assert dashboard.stdout.readline().startswith("dashboard: http://127.0.0.1:")
        waiting = wait_for_crawl(env, site.url(page_path(0)))
        assert waiting.stdout is not None
        crawl_id = crawl_id_of(waiting.stdout.readline())
        browser.get(f"http://127.0.0.1:{port}/")
        wait_until(lambda: bool(browser.find_elements(By.LINK_TEXT, crawl_id)), timeout=10)
        browser.find_element(By.LINK_TEXT, crawl_id).click()
        wait_until(lambda: snapshot(browser)["state"] == "running", timeout=10)
        points = snapshot(browser)["points"]
        wait_until(lambda: snapshot(browser)["points"] >= points + 3, timeout=15)
        running = snapshot(browser)  # the chart grew, a point a second
        ARTEFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTEFACTS / f"dashboard-running-{broker_env}.png"))
        _, stderr = waiting.communicate(timeout=120)
        # Finished: the page's figures are --status's, once the page refreshed.
        status = status_figures(env, crawl_id)
        wait_until(lambda: snapshot(browser)["state"] == "finished", timeout=10)
        finished = snapshot(browser)
        browser.save_screenshot(str(ARTEFACTS / f"dashboard-finished-{broker_env}.png"))
    finally:
        assert workers.stop() == 0
        dashboard.terminate()
        dashboard.communicate(timeout=10)  # its pipes closed

    assert waiting.returncode == 1, stderr[-2000:]  # /broken.html failed for good
    assert running["canvas"] == 1
    names = ("discovered", "outstanding", "pages")
    assert {name: int(finished[name]) for name in names} == status
    assert status == {"discovered": pages + 1, "outstanding": 0, "pages": pages}
    host, fetched, errors = finished["hosts"][0][:3]
    assert host == site.base_url.removeprefix("http://")
    assert (int(fetched), int(errors)) == (pages, 4)  # 3 failed attempts retried, 1 given up
    assert finished["failures"][0][0] == broken
    assert int(finished["crawled"]) == pages
    assert finished["dead_letters"] == "1"
    assert int(finished["workers"]) >= 1  # a worker process (Redis: until its heartbeat is old)
    assert (ARTEFACTS / f"dashboard-finished-{broker_env}.png").stat().st_size > 10_000


def read_json(url: str) -> Any:
    with urllib.request.urlopen(url) as answer:
        return json.load(answer)


def test_local_dashboard_serves_the_crawl_being_run(site: SiteServer) -> None:
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=3))
    site.delay = 0.05
    port = free_port()
    command = [sys.executable, "-m", "crawler.example", site.url(page_path(0)), "--local"]
    local = subprocess.Popen(
        [*command, "--threads", "2", "--dashboard", str(port)],
        cwd=PROJECT_ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert local.stdout is not None
        line = local.stdout.readline()
        assert line.startswith(f"dashboard: http://127.0.0.1:{port}/crawl/"), line
        crawl_id = line.strip().rpartition("/")[2]
        wait_until(lambda: read_json(f"http://127.0.0.1:{port}/api/crawls") != [], timeout=10)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/crawls") as answer:
            listed = json.load(answer)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/crawls/{crawl_id}") as answer:
            shown = json.load(answer)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/crawl/{crawl_id}") as answer:
            page = answer.read().decode()
        stdout, _ = local.communicate(timeout=60)
    finally:
        if local.poll() is None:
            local.kill()
            local.communicate()
    assert [crawl["crawl_id"] for crawl in listed] == [crawl_id]
    assert listed[0]["where"] == "local" and listed[0]["seeds"] == [site.url(page_path(0))]
    assert shown["state"] == "running" and shown["queue"]["broker"] == "local"
    assert shown["discovered"] > 0 and shown["done"] < 60
    assert "uPlot.iife.min.js" in page
    assert local.returncode == 0 and "60 pages fetched" in stdout
