"""``crawler dashboard``: a live page of a crawl on workers, read in a real browser
(Debian's chromium, driven by Selenium through chromium-driver), its figures equal to
``--status``'s; ``--local --dashboard``'s page, kept after the crawl's end until the
command is stopped, its elapsed time stopped and its page times the fetches' alone; and
a dedup store that does not answer, a 503 that says why."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from scripts.services import apt_install
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import (
    FAST_FAILURES,
    crawl_id_of,
    free_port,
    wait_for_crawl,
    wait_for_port,
    wait_until,
)
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
  elapsed: text("elapsed"),
  replay: document.getElementById("dead-lettered").hidden ? null : text("replay"),
  failed_locally: !document.getElementById("failed-locally").hidden,
  note: document.getElementById("note").hidden ? null : text("note"),
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
    assert finished["replay"] == f"crawler replay {crawl_id}" and not finished["failed_locally"]
    assert finished["note"] is None  # `crawler dashboard` serves on: nothing to say
    assert int(finished["workers"]) >= 1  # a worker process (Redis: until its heartbeat is old)
    assert (ARTEFACTS / f"dashboard-finished-{broker_env}.png").stat().st_size > 10_000


def staying_line(stderr: IO[str]) -> str:
    """The line ``--local --dashboard`` says once its crawl ended, after the progress
    lines (one every 5 s)."""
    for line in stderr:
        if line.startswith("dashboard still at"):
            return line
    return ""


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
        assert local.stderr is not None
        assert staying_line(local.stderr).startswith("dashboard still at")  # the crawl ended
        local.send_signal(signal.SIGINT)  # the page stays until then
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


def test_local_dashboard_stays_after_the_crawl_until_ctrl_c(
    site: SiteServer, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    """Once the crawl ended, ``--local --dashboard``'s page stays (and says so) until
    SIGINT, its elapsed time stopped at the end, no ``crawler replay`` offered (no
    broker), and its hosts' page times the fetches' (5 ms pages): the ``--max-rate 2``
    wait is the broker's, held by no worker thread, so the records' ``elapsed_ms`` are
    short too."""
    pages = 8
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=2))
    site.delay = 0.005
    port = free_port()
    output = tmp_path / "pages.jsonl"
    command = [sys.executable, "-m", "crawler.example", site.url(page_path(0)), "--local"]
    local = subprocess.Popen(
        [
            *command,
            "--threads",
            "2",
            "--max-rate",
            "2",
            "-o",
            str(output),
            "--dashboard",
            str(port),
        ],
        cwd=PROJECT_ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert local.stdout is not None and local.stderr is not None
        line = local.stdout.readline()
        assert line.startswith(f"dashboard: http://127.0.0.1:{port}/crawl/"), line
        crawl_id = line.strip().rpartition("/")[2]
        staying = staying_line(local.stderr)  # once the crawl ended
        api = f"http://127.0.0.1:{port}/api/crawls/{crawl_id}"
        ended = read_json(api)
        browser.get(f"http://127.0.0.1:{port}/crawl/{crawl_id}")
        wait_until(lambda: snapshot(browser)["note"] is not None, timeout=10)
        time.sleep(2)  # the crawl's page stays, and its elapsed time stays still
        later = read_json(api)
        shown = snapshot(browser)
        ARTEFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTEFACTS / "dashboard-local-finished.png"))
        assert local.poll() is None
        local.send_signal(signal.SIGINT)
        stdout, stderr = local.communicate(timeout=20)
    finally:
        if local.poll() is None:
            local.kill()
            local.communicate()
    assert staying == f"dashboard still at http://127.0.0.1:{port}/ — Ctrl-C to stop\n"
    assert local.returncode == 0, stderr[-2000:]
    assert f"{pages} pages fetched" in stdout and "Traceback" not in stderr
    assert "dashboard still at" not in stderr  # said once, read above
    with pytest.raises(OSError):  # nothing serves the page any longer
        socket.create_connection(("127.0.0.1", port), timeout=1).close()

    took = float(re.search(r"Finished after ([\d.]+)s", stdout).group(1))  # type: ignore[union-attr]
    assert ended["state"] == "finished" and ended["note"] == later["note"]
    assert later["note"] == "crawl finished; this page stays until you stop the command"
    assert later["elapsed_s"] == ended["elapsed_s"] <= took + 1
    assert ended["elapsed_s"] >= 2  # 8 pages at 2 a second
    assert shown["note"] == later["note"] and shown["state"] == "finished"
    assert shown["elapsed"] == f"{ended['elapsed_s']:.1f} s"
    assert later["replay"] is None and shown["replay"] is None and shown["failed_locally"]

    (host,) = later["hosts"]
    assert host["pages"] == pages and host["median_ms"] is not None
    # p95 is a bucket's bound, of 8 fetches the slowest: one fetch slowed by a loaded
    # machine moves it a bucket or two, the --max-rate wait (500 ms a page) never
    assert host["median_ms"] < 100 and host["p95_ms"] is not None and host["p95_ms"] <= 1600
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(records) == pages
    assert statistics.median(r["fetch_ms"] for r in records) < 100
    # The --max-rate wait (half a second a page) spent in the broker, not in a thread:
    assert statistics.median(r["elapsed_ms"] for r in records) < 400


def test_dashboard_says_the_store_is_unreachable(browser: webdriver.Chrome) -> None:
    """``crawler dashboard`` with Memcached down: a 503 naming it, why and what to do,
    on the API and the pages; one log line, no traceback."""
    down = f"127.0.0.1:{free_port()}"  # nothing listens there
    port = free_port()
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "crawler.command", "dashboard", "--port", str(port)],
        cwd=PROJECT_ROOT,
        env=environment(MEMCACHED_SERVERS=down),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    answers = []
    try:
        assert dashboard.stdout is not None
        assert dashboard.stdout.readline().startswith("dashboard: http://127.0.0.1:")
        wait_for_port(port)
        for path in ("/api/crawls", "/api/crawls/some-crawl", "/api/crawls"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}")
            answers.append((refused.value.code, json.load(refused.value)["error"]))
        browser.get(f"http://127.0.0.1:{port}/")
        error = "const e = document.getElementById('error'); return e.hidden ? null : e.textContent"
        wait_until(lambda: browser.execute_script(error) is not None, timeout=10)
        listed = browser.execute_script(error)
        browser.get(f"http://127.0.0.1:{port}/crawl/some-crawl")
        wait_until(lambda: browser.execute_script(error) is not None, timeout=10)
        shown = browser.execute_script(error)
    finally:
        dashboard.terminate()
        _, stderr = dashboard.communicate(timeout=10)
    said = f"cannot reach Memcached at {down}: "
    for code, message in answers:
        assert code == 503
        assert message.startswith(said) and "Connection refused" in message, message
        assert message.endswith("start it or set MEMCACHED_SERVERS (or DEDUP_URL for Redis)")
    assert listed == shown == answers[0][1]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert [line for line in stderr.splitlines() if said in line] == [f"dashboard: {answers[0][1]}"]


def test_the_apis_dashboard_stops_with_the_crawl(site: SiteServer) -> None:
    """``Crawl(..., dashboard=PORT)``: the page is served while the crawl runs and stops
    with it, for the caller goes on (the command line's stays until Ctrl-C)."""
    site.pages.update(generate_site(site.base_url, pages=5, links_per_page=2))
    port = free_port()
    script = (
        "import sys\nfrom crawler import Crawl\n"
        f"sys.exit(Crawl([{site.url(page_path(0))!r}], threads=2, dashboard={port}).run())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script],
        cwd=PROJECT_ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "dashboard still at" not in ran.stderr + ran.stdout
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
