"""``--recrawl-from``: a recrawl downloads only what changed, and still reaches every
page a full crawl reaches; tested on nginx (which answers ``304`` from ``ETag`` and
``Last-Modified``) with pages changed, added and removed between the two crawls, in
``--local`` and on both brokers; WARC revisits; bad records files; faults."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from benchmarks.measuring.generated_site import serve
from tests.site_server import Page, SiteServer, html
from tests.support import FAST_FAILURES, free_port
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment

PAGES = 30


class Site:
    """A static site on nginx: ``p<i>.html``, page i linking to i+1 and i+7; its access
    log read back as (path, status) pairs."""

    def __init__(self, root: Path) -> None:
        self.root, self.files = root, root / "site"
        self.files.mkdir()
        self.log = root / "access.log"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        for i in range(PAGES):
            self.write(i, f"page {i}", (i + 1) % PAGES, (i + 7) % PAGES)

    def url(self, i: int | str) -> str:
        return f"{self.base}/p{i}.html"

    def write(self, i: int | str, text: str, *links: int | str) -> None:
        anchors = "".join(f'<a href="{self.url(link)}">{link}</a>\n' for link in links)
        path = self.files / f"p{i}.html"
        path.write_text(f"<html><body><p>{text}</p>\n{anchors}</body></html>\n")
        later = time.time() + 10  # a new Last-Modified and ETag, within the same second too
        os.utime(path, (later, later))

    def answers(self) -> Counter[tuple[str, str]]:
        """Each (path, status) nginx answered since the last call."""
        lines = self.log.read_text().splitlines()
        self.log.write_text("")
        return Counter((line.split()[1], line.split()[2]) for line in lines)

    def change(self) -> None:
        """Between the crawls: p3 and p4 changed (p4 now links to a new page, p30), p5
        removed (p4 and p28 still link to it), p30 added."""
        self.write(3, "page 3, changed", 4, 10)
        self.write(4, "page 4, changed", 5, 11, 30)
        (self.files / "p5.html").unlink()
        self.write(30, "page 30, new")


@pytest.fixture
def nginx() -> Iterator[Site]:
    """The site, served by nginx from a directory its workers (``nobody``) can read."""
    root = Path(tempfile.mkdtemp(prefix="crawler-recrawl-"))
    try:
        root.chmod(0o755)
        site = Site(root)
        with serve(site.files, site.port, access_log=site.log, state=root):
            yield site
    finally:
        shutil.rmtree(root, ignore_errors=True)


def crawler_crawl(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # a crawl followed with --wait is the workers'
        [
            sys.executable,
            "-m",
            "crawler.command",
            "crawl",
            *(["--workers"] if "--wait" in args else []),
            *args,
        ],
        cwd=PROJECT_ROOT,
        env=env or environment(**FAST_FAILURES),
        capture_output=True,
        text=True,
        timeout=120,
    )


def records_of(path: Path) -> dict[str, dict[str, Any]]:
    return {r["url"]: r for r in map(json.loads, path.read_text().splitlines())}


def reached(records: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each URL and what became of it, as far as a full crawl and a recrawl agree:
    fetched (downloaded or unchanged) or answered with its status."""
    return {
        url: "answered " + str(r["status"]) if r["outcome"] == "answered" else "fetched"
        for url, r in records.items()
    }


def check_recrawl(site: Site, first: Path, again: Path, full: Path) -> None:
    """``again`` (the recrawl) reached what ``full`` (a full crawl of the changed site)
    reached, downloading only the changed and new pages."""
    before, records = records_of(first), records_of(again)
    assert reached(records) == reached(records_of(full))
    assert len(records) == PAGES + 1  # p30 found through the changed p4; p5 answered 404
    changed = {site.url(3), site.url(4), site.url(30)}
    for url, record in records.items():
        if url in changed:
            assert record["outcome"] == "crawled" and record["status"] == 200, record
        elif url == site.url(5):
            assert record["outcome"] == "answered" and record["status"] == 404
        else:
            assert record["outcome"] == "unchanged" and record["status"] == 304, record
            assert record["links"] == before[url]["links"]
            assert record["etag"] == before[url]["etag"]
            assert "bytes" not in record


def test_local_recrawl_downloads_only_what_changed_and_reaches_every_page(
    nginx: Site, tmp_path: Path
) -> None:
    first, again, full = tmp_path / "first.jsonl", tmp_path / "again.jsonl", tmp_path / "full.jsonl"
    done = crawler_crawl("--local", nginx.url(0), "-o", str(first))
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(r["etag"] and r["last_modified"] for r in records_of(first).values())
    assert sum(n for (path, status), n in nginx.answers().items() if status == "200") == PAGES

    nginx.change()
    done = crawler_crawl("--local", nginx.url(0), "--recrawl-from", str(first), "-o", str(again))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{PAGES - 3} unchanged since the earlier crawl, 1 answered 404" in done.stdout
    answers = nginx.answers()
    assert answers[("/p3.html", "200")] == answers[("/p30.html", "200")] == 1
    assert sum(n for (_, status), n in answers.items() if status == "304") == PAGES - 3
    assert sum(n for (_, status), n in answers.items() if status == "200") == 3

    done = crawler_crawl("--local", nginx.url(0), "-o", str(full))
    assert done.returncode == 0, done.stderr[-2000:]
    check_recrawl(nginx, first, again, full)

    # The recrawl's records serve the next recrawl: unchanged pages keep their links.
    twice = tmp_path / "twice.jsonl"
    done = crawler_crawl("--local", nginx.url(0), "--recrawl-from", str(again), "-o", str(twice))
    assert done.returncode == 0, done.stderr[-2000:]
    assert reached(records_of(twice)) == reached(records_of(full))
    assert [r["outcome"] for r in records_of(twice).values()].count("unchanged") == PAGES


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_recrawl_downloads_only_what_changed(
    broker_env: str, nginx: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    first, again, full = tmp_path / "first.jsonl", tmp_path / "again.jsonl", tmp_path / "full.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        done = crawler_crawl(nginx.url(0), "--wait", "-o", str(first), env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        nginx.change()
        nginx.answers()
        done = crawler_crawl(
            nginx.url(0), "--wait", "--recrawl-from", str(first), "-o", str(again), env=env
        )
        assert done.returncode == 0, done.stderr[-2000:]
        answers = nginx.answers()
        done = crawler_crawl(nginx.url(0), "--wait", "-o", str(full), env=env)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        assert workers.stop() == 0
    assert sum(n for (_, status), n in answers.items() if status == "200") == 3
    check_recrawl(nginx, first, again, full)


def test_warc_keeps_a_304_as_a_revisit_of_the_earlier_capture(nginx: Site, tmp_path: Path) -> None:
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    warc1, warc2 = tmp_path / "warc1", tmp_path / "warc2"
    done = crawler_crawl("--local", nginx.url(0), "-o", str(first), "--warc", str(warc1))
    assert done.returncode == 0, done.stderr[-2000:]
    nginx.change()
    done = crawler_crawl(
        "--local", nginx.url(0), "-o", str(again), "--warc", str(warc2),
        "--recrawl-from", str(first), "--recrawl-warc", str(warc1),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]

    responses = {
        h.get_header("WARC-Record-ID"): h for t, h in warc_records(warc1) if t == "response"
    }
    revisits = [h for t, h in warc_records(warc2) if t == "revisit"]
    assert len(revisits) == PAGES - 3
    before = records_of(first)
    for headers in revisits:
        target = headers.get_header("WARC-Target-URI")
        earlier = responses[headers.get_header("WARC-Refers-To")]
        assert headers.get_header("WARC-Profile").endswith("/revisit/server-not-modified")
        assert earlier.get_header("WARC-Target-URI") == target
        assert headers.get_header("WARC-Refers-To-Date") == earlier.get_header("WARC-Date")
        assert headers.get_header("WARC-Payload-Digest") == before[target]["payload_digest"]
    for record in records_of(again).values():
        if record["outcome"] == "unchanged":
            assert record["payload_digest"] == before[record["url"]]["payload_digest"]
    check = subprocess.run(
        [str(Path(sys.executable).parent / "warcio"), "check", *map(str, warc2.glob("*.warc.gz"))],
        capture_output=True, text=True,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def warc_records(directory: Path) -> list[tuple[str, Any]]:
    found = []
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as stream:
            found += [(record.rec_type, record.rec_headers) for record in ArchiveIterator(stream)]
    return found


def test_a_file_that_is_no_earlier_crawl_s_records_is_refused_naming_the_line(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = html()
    good = json.dumps({"url": site.url("/"), "outcome": "crawled", "links": [], "etag": '"1"'})
    for lines, said in [
        ([good, good, "{not json"], "line 3: not JSON"),
        ([good, good.replace("crawled", "crawled\udcff")], "line 2: not UTF-8 (byte 0xff at"),
        ([good, '{"name": "a row of something else"}'], "line 2: not a crawler record"),
        ([json.dumps({"url": "ftp://x/", "outcome": "crawled"})], "line 1: its url is not an"),
        (
            [json.dumps({"url": site.url("/"), "outcome": "crawled", "links": "x"})],
            "line 1: its links",
        ),
        ([good.replace("127.0.0.1", "127.0.0.2")], "none of its 1 records is of the seeds' hosts"),
    ]:
        path = tmp_path / "earlier.jsonl"
        path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        refused = crawler_crawl("--local", site.url("/"), "--recrawl-from", str(path))
        assert refused.returncode == 2, refused.stderr
        assert said in refused.stderr and "--recrawl-from" in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 2  # the error, and where --help is
    assert site.fetch_counts() == {}  # nothing was sent, nothing fetched
    missing = crawler_crawl("--local", site.url("/"), "--recrawl-from", str(tmp_path / "none"))
    assert missing.returncode == 2 and "No such file" in missing.stderr
    # A byte-order mark first, as some editors save a file, is no part of line 1.
    marked = earlier_records(tmp_path / "marked.jsonl", {"url": site.url("/")}, bom="\ufeff")
    assert crawler_crawl("--local", site.url("/"), "--recrawl-from", str(marked)).returncode == 0


def earlier_records(path: Path, *records: dict[str, Any], bom: str = "") -> Path:
    """``records`` as an earlier crawl's ``-o`` file at ``path`` (after ``bom``), each
    record of outcome ``crawled`` unless it says."""
    lines = [json.dumps({"outcome": "crawled", "links": []} | record) for record in records]
    path.write_text(bom + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_validator_no_request_can_carry_is_left_out_and_its_page_fetched_in_full(
    site: SiteServer, tmp_path: Path
) -> None:
    """An ETag holding CR LF (a header injected), one outside Latin-1, a Last-Modified
    holding a NUL: each left out with one warning; their pages fetched in full, none
    given up, no header injected; a good validator of the same file still asks 304."""
    site.pages["/"] = html(*(site.url(f"/{i}.html") for i in range(4)))
    for i in range(4):
        site.pages[f"/{i}.html"] = Page(html().body, headers=(("ETag", f'"v{i}"'),))
    earlier = earlier_records(
        tmp_path / "earlier.jsonl",
        {"url": site.url("/0.html"), "etag": '"v0"\r\nX-Injected: 1'},
        {"url": site.url("/1.html"), "etag": '"v1€"'},
        {"url": site.url("/2.html"), "last_modified": "Mon, 01 Jan 2024 00:00:00\x00 GMT"},
        {"url": site.url("/3.html"), "etag": '"v3"'},
    )
    done = crawler_crawl(
        "--local", site.url("/"), "--recrawl-from", str(earlier), "-o", str(tmp_path / "r.jsonl")
    )
    assert done.returncode == 0, done.stderr[-2000:]
    warned = [line for line in done.stderr.splitlines() if "no request can carry" in line]
    assert len(warned) == 1, done.stderr
    assert "3 validator(s)" in warned[0] and "line 1's etag first" in warned[0]
    records = records_of(tmp_path / "r.jsonl")
    outcomes = {url: (r["outcome"], r["status"]) for url, r in records.items()}
    assert outcomes == {site.url("/"): ("crawled", 200)} | {
        site.url(f"/{i}.html"): ("crawled", 200) for i in range(3)
    } | {site.url("/3.html"): ("unchanged", 304)}
    assert not any("X-Injected" in request.headers for request in site.requests)
    assert site.fetch_counts()["/0.html"] == 1  # fetched once, in full, not retried


def test_an_earlier_record_s_links_are_capped_as_a_page_s(site: SiteServer, tmp_path: Path) -> None:
    """A record listing 300 links, its page unchanged: the first
    ``CRAWLER_MAX_LINKS_PER_PAGE`` (50 here) followed, as a page's, not all 300."""
    links = [site.url(f"/l{i}.html") for i in range(300)]
    site.pages["/"] = Page(html(*links).body, headers=(("ETag", '"v"'),))
    earlier = earlier_records(
        tmp_path / "earlier.jsonl", {"url": site.url("/"), "etag": '"v"', "links": links}
    )
    done = crawler_crawl(
        "--local", site.url("/"), "--recrawl-from", str(earlier), "-o", str(tmp_path / "r.jsonl"),
        env=environment(**FAST_FAILURES, CRAWLER_MAX_LINKS_PER_PAGE="50"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = records_of(tmp_path / "r.jsonl")[site.url("/")]
    assert record["outcome"] == "unchanged" and record["links"] == links[:50]
    fetched = set(site.fetch_counts()) - {"/robots.txt"}
    assert fetched == {"/", *(f"/l{i}.html" for i in range(50))}
    assert "Taking only the first 50 links of" in done.stderr


def test_an_earlier_entry_too_large_for_memcached_costs_a_download_not_the_crawl(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    """100,000 long links in one record: over Memcached's 1 MiB even compressed; the
    entry is not kept, its page is fetched in full, the recrawl ends."""
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    rng = random.Random(52)
    links = [
        site.url("/" + "".join(rng.choices(string.ascii_lowercase, k=60))) for _ in range(100_000)
    ]
    site.pages["/"] = Page(html().body, headers=(("ETag", '"v"'),))
    earlier = earlier_records(
        tmp_path / "earlier.jsonl", {"url": site.url("/"), "etag": '"v"', "links": links}
    )
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = crawler_crawl(
            site.url("/"), "--wait", "--recrawl-from", str(earlier), "-o",
            str(tmp_path / "r.jsonl"), env=env,
        )  # fmt: skip
    finally:
        assert workers.stop() == 0
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 page(s) of the earlier crawl list too many links to keep" in done.stderr
    record = records_of(tmp_path / "r.jsonl")[site.url("/")]
    assert (record["outcome"], record["status"]) == ("crawled", 200)


def versioned_site(site: SiteServer, pages: int) -> None:
    """``pages`` pages with ETags, each linking to the next two: the Python site
    answers 304 to a matching If-None-Match."""
    for i in range(pages):
        body = html(site.url(f"/{(i + 1) % pages}.html"), site.url(f"/{(i + 2) % pages}.html"))
        site.pages[f"/{i}.html"] = Page(body.body, headers=(("ETag", f'"v{i}"'),))


def test_a_recrawl_killed_and_carried_on_with_state_loses_nothing(
    site: SiteServer, tmp_path: Path
) -> None:
    versioned_site(site, 60)
    first = tmp_path / "first.jsonl"
    assert crawler_crawl("--local", site.url("/0.html"), "-o", str(first)).returncode == 0
    site.pages["/7.html"] = html(site.url("/8.html"), site.url("/new.html"))  # changed
    site.pages["/new.html"] = html()
    site.delay = 0.02
    args = [
        sys.executable, "-m", "crawler.command", "crawl", "--local", site.url("/0.html"),
        "--threads", "2", "--recrawl-from", str(first), "--state", str(tmp_path / "state"),
        "-o", str(tmp_path / "again.jsonl"),
    ]  # fmt: skip
    env = environment(**FAST_FAILURES)
    for _ in range(2):
        seen = len(site.requests)
        crawl = subprocess.Popen(args, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL)
        site.wait_for_requests(seen + 15)
        os.kill(crawl.pid, signal.SIGKILL)
        crawl.wait()
    done = subprocess.run(args, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    records = records_of(tmp_path / "again.jsonl")
    assert set(records) == {site.url(f"/{i}.html") for i in range(60)} | {site.url("/new.html")}
    assert records[site.url("/7.html")]["outcome"] == "crawled"
    assert all(
        r["outcome"] == "unchanged"
        for url, r in records.items()
        if url.endswith(("/9.html", "/0.html"))
    )


def test_a_recrawl_through_a_worker_killed_with_kill_9_reaches_every_page(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    versioned_site(site, 80)
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        done = crawler_crawl(site.url("/0.html"), "--wait", "-o", str(first), env=env)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        workers.stop()
    site.delay = 0.05
    doomed = WorkerProcesses(env, processes=1, threads=4)
    recrawl = subprocess.Popen(
        [sys.executable, "-m", "crawler.command", "crawl", "--workers", site.url("/0.html"),
         "--wait", "--recrawl-from", str(first), "-o", str(again)],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = len(site.requests)
    site.wait_for_requests(seen + 20)
    doomed.kill()
    fresh = WorkerProcesses(env, processes=1, threads=4)
    try:
        _, stderr = recrawl.communicate(timeout=120)
    finally:
        assert fresh.stop() == 0
    assert recrawl.returncode == 0, stderr[-2000:]
    records = records_of(again)
    assert set(records) == {site.url(f"/{i}.html") for i in range(80)}
    assert all(r["outcome"] == "unchanged" for r in records.values())
