"""``--render``: pages loaded in Debian's Chromium through Playwright, on workers and in
``--local``: every page of a site whose links are all made by script is reached (only
the seed without it); the browser keeps to the crawler's rules (the network guard,
media, the deadline); its failures are a fetch's; no browser outlives the crawl."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright
from warcio.archiveiterator import ArchiveIterator

from crawler import example
from crawler.errors import PermanentError, TransientError
from crawler.rendering import Renderer, RenderJob
from crawler.rendering.browser import MEDIA
from tests.scripted_site import PAGES, chromium, scripted, scripted_site, wait_until_none_marked
from tests.site_server import Page, SiteServer, html, send
from tests.support import FAST_FAILURES, free_port
from tests.test_network_guard import PUBLIC, public_addresses  # noqa: F401  (a fixture)
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed


@pytest.fixture(scope="module", autouse=True)
def system_chromium() -> str:
    return chromium()


def crawl_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "crawler.command", "crawl", *args]


def run_local(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``crawler crawl --local ARGS`` in a process of its own: no service needed."""
    return subprocess.run(
        crawl_command("--local", *args),
        cwd=PROJECT_ROOT,
        env=environment(**FAST_FAILURES, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def pages_reached(records: list[dict[str, Any]], site: SiteServer) -> list[str]:
    return sorted(
        record["url"].removeprefix(site.base_url)
        for record in records
        if record["outcome"] == "crawled"
    )


def test_local_render_reaches_every_page_made_by_script_and_without_it_only_the_seed(
    site: SiteServer, tmp_path: Path
) -> None:
    seed_url = scripted_site(site)
    plain = run_local(seed_url, "-o", str(tmp_path / "plain.jsonl"))
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert pages_reached(records_of(tmp_path / "plain.jsonl"), site) == ["/"]
    assert site.fetch_counts()["/app.js"] == 0  # nothing ran the page's script

    before = site.fetch_counts()
    rendered = run_local(seed_url, "--render", "-o", str(tmp_path / "rendered.jsonl"))
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    records = records_of(tmp_path / "rendered.jsonl")
    assert pages_reached(records, site) == sorted(PAGES)
    assert all(r["rendered"] is True and r["render_ms"] > 0 for r in records)
    counts = site.fetch_counts() - before
    assert all(counts[page] == 1 for page in PAGES)  # the crawler's fetch: the browser's none
    assert counts["/app.js"] == 1 and counts["/links.json"] == 1
    assert counts["/picture.png"] == 0  # images are not loaded unless asked for


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_render_every_page_made_by_script(
    broker_env: str, site: SiteServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seed_url = scripted_site(site)
    mark = f"CRAWLER_TEST_MARK={uuid.uuid4().hex}"
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    env["CRAWLER_TEST_MARK"] = mark
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        output = tmp_path / "records.jsonl"
        done = seed(env, seed_url, "--render", "--follow-relative", "--wait", "-o", str(output))
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        assert workers.stop() == 0
    records = records_of(output)
    assert pages_reached(records, site) == sorted(PAGES)
    assert all(record.get("rendered") for record in records)
    assert wait_until_none_marked(mark) == []  # the worker stopped: its browser with it


def test_a_crawl_without_render_starts_no_browser(site: SiteServer, stub_broker: Any) -> None:
    site.pages["/"] = html()
    before = example.renderer.launched
    example.crawl(site.url("/"), options={"follow_relative": True})
    assert example.renderer.launched == before


def test_a_public_page_never_makes_the_browser_reach_a_private_address(
    public_addresses: None,  # noqa: F811
    site: SiteServer,
    stub_broker: Any,
) -> None:
    public = SiteServer(host=PUBLIC).start()
    try:
        public.pages["/"] = scripted(
            b"<script src='/ok.js'></script>"
            + f"<script src='{site.url('/secret.js')}'></script>".encode()
            + f"<img src='{site.url('/secret.png')}'>".encode()
            + f"<script>fetch('{site.url('/secret.json')}')</script>".encode()
            + f"<iframe src='{site.url('/secret.html')}'></iframe>".encode()
            + b"<script>add('/next.html')</script>"
        )
        public.pages["/ok.js"] = Page(b"1;", content_type="text/javascript")
        for path in ("/secret.js", "/secret.png", "/secret.json", "/secret.html"):
            site.pages[path] = html()

        record = example.crawl(
            public.url("/"), via_public=True, options={"render": True, "follow_relative": True}
        )

        assert site.fetch_counts() == {}  # not one request reached the private site
        assert public.fetch_counts()["/ok.js"] == 1
        assert record["links"] == [public.url("/next.html")]
    finally:
        public.stop()


def test_media_is_loaded_only_when_asked_for(site: SiteServer, stub_broker: Any) -> None:
    site.pages["/"] = html(extra="<img src='/a.png'><video src='/a.mp4'></video>")
    site.pages["/a.png"] = Page(b"\x89PNG\r\n\x1a\n", content_type="image/png")
    site.pages["/a.mp4"] = Page(b"", content_type="video/mp4")
    example.crawl(site.url("/"), options={"render": True})
    assert site.fetch_counts()["/a.png"] == 0
    example.crawl(site.url("/"), options={"render": True, "render_media": True, "crawl_id": "m"})
    assert site.fetch_counts()["/a.png"] == 1
    assert {"image", "font", "media"} == MEDIA


def job(site: SiteServer, path: str, seconds: float = 20.0, **rules: Any) -> RenderJob:
    page = site.pages[path]
    return RenderJob(
        url=site.url(path),
        status=page.status,
        headers=(("Content-Type", page.content_type),),
        body=page.body,
        deadline=time.monotonic() + seconds,
        **rules,
    )


@pytest.fixture
def renderer() -> Iterator[Renderer]:
    own = Renderer(pages=2, restart_after=3)
    yield own
    own.close()


def test_a_page_that_never_settles_fails_its_attempt_within_the_deadline(
    site: SiteServer, renderer: Renderer
) -> None:
    site.pages["/busy.html"] = scripted(b"<script>setInterval(() => fetch('/poll'), 100)</script>")
    site.pages["/poll"] = Page(b"{}", content_type="application/json")
    site.pages["/calm.html"] = html()
    renderer.render(job(site, "/calm.html", wait=0.01))  # the browser up: its start not timed
    started = time.monotonic()
    with pytest.raises(
        TransientError, match=r"did not settle within 2\.0s \(the network never went idle\)"
    ):
        renderer.render(job(site, "/busy.html", seconds=2.0))
    assert time.monotonic() - started < 2.0 + 1.0
    # A fixed wait instead of the network's idle: the same page settles.
    rendered = renderer.render(job(site, "/busy.html", seconds=3.0, wait=0.3))
    assert "setInterval" in rendered.html


def test_the_browser_is_replaced_after_its_pages_and_after_a_crash(
    site: SiteServer, renderer: Renderer
) -> None:
    site.pages["/"] = scripted(b"<script>add('/a.html')</script>")
    for _ in range(4):  # restart_after=3: a second browser for the fourth page
        assert renderer.render(job(site, "/", wait=0.01)).links == (site.url("/a.html"),)
    assert renderer.launched == 2

    # A browser that crashes with a page in hand (killed while the site answers the
    # page's script) fails that page (a retry will do it), and the next page gets a new
    # one.
    def crash(handler: BaseHTTPRequestHandler, nth: int) -> None:
        os.kill(_browser_pid(os.getpid()), signal.SIGKILL)
        send(handler, Page(b"{}", content_type="application/json"))

    site.pages["/crashing.html"] = scripted(b"<script>fetch('/crash')</script>")
    site.behaviors["/crash"] = crash
    with pytest.raises(TransientError, match=r"the browser failed|Chromium"):
        renderer.render(job(site, "/crashing.html", seconds=20.0))
    assert renderer.render(job(site, "/", wait=0.01)).links == (site.url("/a.html"),)
    assert renderer.launched == 3


def _browser_pid(parent: int) -> int:
    """The newest Chromium started under ``parent`` (by way of Playwright's driver)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rpartition(")")[2].split()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        browser = b"chromium" in command[0] and b"--type=" not in b" ".join(command)
        if browser and _descends_from(int(entry.name), parent):
            found.append((int(stat[19]), int(entry.name)))  # its start time
    assert found, "no Chromium under this process"
    return max(found)[1]


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int((Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[1])
        except OSError:
            return False
    return False


def test_a_dom_over_the_cap_is_refused(site: SiteServer, renderer: Renderer) -> None:
    site.pages["/big.html"] = scripted(b"<script>document.body.append('x'.repeat(5000))</script>")
    with pytest.raises(PermanentError, match="over 1000 characters"):
        renderer.render(job(site, "/big.html", wait=0.01, max_chars=1000))


def test_the_browser_carries_the_crawl_s_headers_and_user_agent(
    site: SiteServer, stub_broker: Any
) -> None:
    site.pages["/"] = html(extra="<script src='/s.js'></script>")
    site.pages["/s.js"] = Page(b"1;", content_type="text/javascript")
    example.crawl(
        site.url("/"),
        options={"render": True, "headers": ["X-Tenant: A"], "user_agent": "agent-r"},
    )
    script = next(r for r in site.requests if r.path == "/s.js")
    assert script.headers.get("x-tenant") == "A" and script.user_agent == "agent-r"


def test_warc_keeps_the_rendered_dom_as_a_conversion_of_the_response(
    site: SiteServer, tmp_path: Path
) -> None:
    seed_url = scripted_site(site)
    done = run_local(seed_url, "--render", "--max-pages", "1", "--warc", str(tmp_path / "warc"))
    assert done.returncode == 0, done.stderr[-2000:]
    records = []
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            records += [
                (r.rec_type, r.rec_headers, r.content_stream().read())
                for r in ArchiveIterator(stream)
            ]
    responses = {h.get_header("WARC-Record-ID"): h for t, h, _ in records if t == "response"}
    conversions = [(h, body) for t, h, body in records if t == "conversion"]
    assert len(conversions) == 1
    headers, body = conversions[0]
    assert headers.get_header("WARC-Refers-To") in responses
    assert headers.get_header("WARC-Target-URI") == seed_url
    assert b'<a href="/p/1.html">' in body  # the script's link, in the DOM kept


def test_a_handler_reads_the_rendered_page(site: SiteServer, tmp_path: Path) -> None:
    seed_url = scripted_site(site)
    output = tmp_path / "records.jsonl"
    done = run_local(
        seed_url, "--render", "--max-pages", "1", "--handler", "tests.page_handlers:links_seen",
        "-o", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = records_of(output)
    assert record["data"] == {"rendered": True, "links": ["/p/1.html", "/p/2.html"]}


def test_no_chromium_is_refused_at_start_up_in_one_line(site: SiteServer) -> None:
    missing = {"CRAWLER_CHROMIUM": "/nonexistent/chromium"}
    local = run_local(site.url("/"), "--render", env=missing)
    assert (
        local.returncode == 2 and "--render: the Chromium '/nonexistent/chromium'" in local.stderr
    )
    worker = subprocess.run(
        [sys.executable, "-m", "crawler.command", "worker", "--render"],
        cwd=PROJECT_ROOT, env=environment(**missing), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert worker.returncode == 2
    assert worker.stderr.count("\n") == 1 and "install Chromium" in worker.stderr


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_no_browser_outlives_a_local_crawl_however_it_ends(how: str, site: SiteServer) -> None:
    seed_url = scripted_site(site)
    site.hold_from = 4  # robots.txt, the seed and its script answered; the next page held
    mark = f"CRAWLER_TEST_MARK={uuid.uuid4().hex}"
    env = environment(**FAST_FAILURES)
    env["CRAWLER_TEST_MARK"] = mark
    crawl = subprocess.Popen(
        crawl_command("--local", "--render", seed_url),
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        site.wait_for_requests(4)  # the seed rendered: its browser is up
        os.kill(crawl.pid, getattr(signal, how))
        crawl.wait(timeout=30)
    finally:
        site.release()
        if crawl.poll() is None:
            crawl.kill()
            crawl.wait()
        assert crawl.stderr is not None
        crawl.stderr.close()
    assert wait_until_none_marked(mark) == []


def test_no_browser_outlives_workers_killed_with_kill_9(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    seed_url = scripted_site(site)
    site.hold_from = 3
    mark = f"CRAWLER_TEST_MARK={uuid.uuid4().hex}"
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    env["CRAWLER_TEST_MARK"] = mark
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        sent = seed(env, seed_url, "--render", "--follow-relative")
        assert sent.returncode == 0, sent.stderr[-2000:]
        site.wait_for_requests(3)
        workers.kill()
    finally:
        site.release()
        workers.stop()
    assert wait_until_none_marked(mark) == []


def test_a_renderer_closed_renders_again_on_a_loop_of_its_own(
    site: SiteServer, renderer: Renderer
) -> None:
    site.pages["/"] = scripted(b"<script>add('/a.html')</script>")
    for _ in range(2):  # as two crawls from Python, one after another, in one process
        assert renderer.render(job(site, "/", wait=0.01)).links == (site.url("/a.html"),)
        renderer.close()
    assert renderer.launched == 2


def test_the_dashboard_says_the_crawl_renders(site: SiteServer, system_chromium: str) -> None:
    seed_url = scripted_site(site)
    site.hold_from = 4  # robots.txt, the seed, its script: then the crawl waits on the site
    port = free_port()
    crawl = subprocess.Popen(
        crawl_command("--local", "--render", seed_url, "--dashboard", str(port)),
        cwd=PROJECT_ROOT, env=environment(**FAST_FAILURES), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert crawl.stdout is not None
        line = crawl.stdout.readline()
        assert line.startswith(f"dashboard: http://127.0.0.1:{port}/crawl/"), line
        with sync_playwright() as playwright:  # the page, in a real browser
            browser = playwright.chromium.launch(executable_path=system_chromium)
            page = browser.new_page()
            page.goto(line.split()[1])
            page.wait_for_function(
                "document.getElementById('limits').textContent.includes('--render')"
            )
            said = page.inner_text("#limits")
            browser.close()
    finally:
        site.release()
        crawl.send_signal(signal.SIGINT)
        crawl.communicate(timeout=60)
    assert "--render: pages loaded in headless Chromium" in said


def test_a_render_that_never_settles_ends_before_the_actor_s_time_limit(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    """On a real worker: the render gives up within the 10 s time limit (Dramatiq never
    has to interrupt it), the page fails as a fetch does, and the worker goes on."""
    site.pages["/"] = html(
        site.url("/next.html"), extra="<script>setInterval(() => fetch('/poll'), 100)</script>"
    )
    site.pages["/next.html"] = html()
    site.pages["/poll"] = Page(b"{}", content_type="application/json")
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        output = tmp_path / "records.jsonl"
        done = seed(env, site.url("/"), "--render", "--retries", "0", "--wait", "-o", str(output))
    finally:
        assert workers.stop() == 0
    assert done.returncode == 1, done.stderr[-2000:]
    (record,) = records_of(output)
    assert record["outcome"] == "failed" and "did not settle" in record["error"]
    assert 8000 < record["elapsed_ms"] < 10000
    assert not workers.logged_any("Time limit exceeded")
