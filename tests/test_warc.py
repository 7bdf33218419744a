"""``--warc``: every response kept in WARC files, read back by real readers (warcio and a
replay tool's indexer), on both brokers and ``--local``, through a worker killed mid-crawl."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from benchmarks.measuring import free_port, serve
from benchmarks.measuring.real_sites import docs_directory
from tests.site_server import Page, SiteServer, generate_site, html, page_path, send
from tests.support import FAST_FAILURES, read_records, waited_crawl
from tests.workers import (
    BIN,
    PROJECT_ROOT,
    WorkerProcesses,
    environment,
    queued_messages,
    seed,
)

PAGES = 30
DATA = bytes(range(256)) * 40  # not HTML: kept all the same
COMPRESSED = html(extra="<p>" + "sent gzip-compressed " * 200 + "</p>").body


def build_site(site: SiteServer) -> dict[str, bytes]:
    """The test site, and what a reader must find stored for each path: the bytes the
    page is, decoded (``/gz.html`` travels gzip-compressed).  ``/copy.html`` has the
    payload of page 5, which alone links to it (so it comes second, a revisit);
    ``/closing.html`` closes its connection; ``/moved.html`` redirects to
    ``/target.html``, linked from nowhere else."""
    site.pages.update(generate_site(site.base_url, pages=PAGES, links_per_page=3))
    extra = [site.url(p) for p in ("/data.bin", "/gz.html", "/closing.html", "/moved.html")]
    site.pages[page_path(0)] = html(site.url(page_path(1)), *extra)
    site.pages[page_path(5)] = html(site.url(page_path(6)), site.url("/copy.html"))
    site.pages["/copy.html"] = site.pages[page_path(5)]  # the same payload at another URL
    site.pages["/data.bin"] = Page(DATA, content_type="application/octet-stream")
    site.pages["/closing.html"] = html(extra="<p>the server closes after this</p>")
    site.pages["/target.html"] = html(extra="<p>where /moved.html leads</p>")

    def compressed(handler: BaseHTTPRequestHandler, nth: int) -> None:
        send(handler, Page(gzip.compress(COMPRESSED)), Content_Encoding="gzip")

    def closing(handler: BaseHTTPRequestHandler, nth: int) -> None:
        send(handler, site.pages["/closing.html"], Connection="close")

    def moved(handler: BaseHTTPRequestHandler, nth: int) -> None:
        send(handler, Page(b"moved", "text/plain", 301), Location=site.url("/target.html"))

    site.behaviors.update({"/gz.html": compressed, "/closing.html": closing, "/moved.html": moved})
    expected = {path: page.body for path, page in site.pages.items()}
    expected["/gz.html"] = COMPRESSED
    return expected


def records_by_url(directory: Path, *, cut_tails: list[str] | None = None) -> dict[str, list[Any]]:
    """Every record of every file, by target URI: (type, headers, http headers, payload,
    file, offset); each file read to its very end (warcio reads a file cut short
    silently: its last record must end where the file does).  With ``cut_tails``, a
    file whose last record was cut short (its writer killed mid-write) is named there
    and that record left out; a broken record anywhere else fails."""
    found: dict[Any, list[Any]] = defaultdict(list)  # None: a warcinfo record's URI
    for path in sorted(directory.glob("*.warc.gz")):
        end, last_uri = 0, ""
        with path.open("rb") as stream:
            iterator = ArchiveIterator(stream)
            for record in iterator:
                uri = record.rec_headers.get_header("WARC-Target-URI")
                payload = record.content_stream().read()
                offset = iterator.get_record_offset()
                found[uri].append(
                    (record.rec_type, record.rec_headers, record.http_headers, payload,
                     path.name, offset)
                )  # fmt: skip
                iterator.read_to_end()
                end, last_uri = offset + iterator.get_record_length(), uri
        if end != path.stat().st_size and cut_tails is not None:
            cut_tails.append(path.name)
            found[last_uri].pop()
            continue
        assert end == path.stat().st_size, f"{path.name} ends in a broken record"
    return found


def crawl(mode: str, site: SiteServer, warc: Path, output: Path, env: dict[str, str]) -> None:
    """Crawl the site into ``warc``: ``--local`` names it; workers get its parent as their
    ``CRAWLER_WARC_DIR`` and the crawl names it relative to that."""
    arguments = [site.url(page_path(0)), "--output", str(output)]
    if mode == "local":
        result = seed(env, "--local", *arguments, "--warc", str(warc))
        assert result.returncode == 0, result.stdout + result.stderr
        return
    env = {**env, "CRAWLER_WARC_DIR": str(warc.parent)}
    waiting, stdout, stderr, _ = waited_crawl(
        env, *arguments, "--warc", warc.name, processes=2, timeout=120
    )
    assert waiting.returncode == 0, stdout + stderr


@pytest.fixture
def mode_env(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    if request.param == "local":
        yield "local", environment(MEMCACHED_SERVERS="127.0.0.1:9")
    else:
        broker = request.getfixturevalue(f"{request.param}_env")
        yield request.param, environment(**broker, **FAST_FAILURES)


@pytest.mark.parametrize("mode_env", ["rabbitmq", "redis", "local"], indirect=True)
def test_every_response_is_stored_byte_equal_and_read_back_by_warcio_and_a_replay_index(
    mode_env: tuple[str, dict[str, str]], site: SiteServer, tmp_path: Path
) -> None:
    mode, env = mode_env
    expected = build_site(site)
    warc, output = tmp_path / "warc", tmp_path / "records.jsonl"

    crawl(mode, site, warc, output, env)

    stored = records_by_url(warc)
    records = {record["url"]: record for record in read_records(output)}
    target = site.url("/target.html")
    assert set(records) == {site.url(p) for p in expected} - {target} | {site.url("/moved.html")}
    for path, body in expected.items():
        url = site.url(path)
        kinds = sorted(kind for kind, *_ in stored[url])
        assert kinds in (["request", "response"], ["request", "revisit"]), (path, kinds)
        kind, headers, http_headers, payload, name, offset = next(
            entry for entry in stored[url] if entry[0] != "request"
        )
        if kind == "response":
            assert payload == body, path  # byte-equal to the page, decoded
        assert http_headers.get_statuscode() == "200"
        assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
        record = records[url if url != target else site.url("/moved.html")]
        assert headers.get_header("WARC-Payload-Digest") == record["payload_digest"]
        assert headers.get_header("WARC-Block-Digest") or kind == "revisit"
        assert (record["warc_file"], record["warc_offset"]) == (name, offset)
        # Its request: the line as sent, the Host, and the response it goes with.
        [(_, request_headers, request_line, *_)] = [e for e in stored[url] if e[0] == "request"]
        line = f"{request_line.protocol} {request_line.statusline}"  # warcio splits it so
        assert line == f"GET {path} HTTP/1.1"
        assert request_line.get_header("Host") == site.base_url.removeprefix("http://")
        concurrent = request_headers.get_header("WARC-Concurrent-To")
        assert concurrent == headers.get_header("WARC-Record-ID")
    # The redirect is kept too: the record's URL is in the files, as a 301.
    [(_, _, moved, *_)] = [e for e in stored[site.url("/moved.html")] if e[0] == "response"]
    assert moved.get_statuscode() == "301"
    assert moved.get_header("Location") == target
    # The gzip page is stored decoded, its encoding named as the original's.
    _, _, gz_headers, *_ = next(e for e in stored[site.url("/gz.html")] if e[0] == "response")
    assert gz_headers.get_header("Content-Encoding") is None
    assert gz_headers.get_header("X-Crawler-Original-Content-Encoding") == "gzip"
    assert gz_headers.get_header("Content-Length") == str(len(COMPRESSED))
    # One copy of a payload: the second URL to bring it is a revisit naming the first.
    first_url, revisit_url = site.url(page_path(5)), site.url("/copy.html")
    assert [e[0] for e in stored[first_url] if e[0] != "request"] == ["response"]
    [revisit] = [e[1] for e in stored[revisit_url] if e[0] == "revisit"]
    assert revisit.get_header("WARC-Refers-To-Target-URI") == first_url
    assert revisit.get_header("WARC-Profile").endswith("/revisit/identical-payload-digest")
    assert records[revisit_url]["outcome"] == "duplicate-content"
    assert records[site.url("/data.bin")]["outcome"] == "not-html"
    # Each file opens with its warcinfo, passes warcio's own check, and a replay
    # tool's indexer (pywb's cdxj-indexer) finds every URL crawled.
    for file in warc.glob("*.warc.gz"):
        with file.open("rb") as stream:
            assert next(iter(ArchiveIterator(stream))).rec_type == "warcinfo"
    files = [str(file) for file in warc.glob("*.warc.gz")]
    check = subprocess.run([str(BIN / "warcio"), "check", *files], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    index = subprocess.run(
        [str(BIN / "cdxj-indexer"), *files], capture_output=True, text=True, check=True
    )
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in index.stdout.splitlines()}
    assert indexed == set(records) | {target}


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_a_worker_killed_mid_crawl_leaves_readable_files_whose_union_holds_every_page(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_WARC_DIR=str(tmp_path)
    )
    site.pages.update(generate_site(site.base_url, pages=120, links_per_page=4))
    site.delay, site.hold_from = 0.02, 40  # the crawl cannot end before the kill
    every_page = {site.url(page_path(i)) for i in range(120)}
    warc = tmp_path / "warc"  # named by its absolute path, inside the workers' root

    doomed = WorkerProcesses(env, processes=2, threads=4)
    try:
        assert seed(env, site.url(page_path(0)), "--warc", str(warc)).returncode == 0
        doomed.wait_until(lambda: doomed.count("Done crawling") >= 30)
    finally:
        doomed.kill()  # kill -9, mid-page for some of its threads (and never left running)
        site.release()
    assert set(records_by_url(warc, cut_tails=[])) < every_page | {None}

    fresh = WorkerProcesses(env, processes=2, threads=4)
    try:
        fresh.wait_until(
            lambda: site.fetched([page_path(i) for i in range(120)]) and queued_messages(env) == 0,
            timeout=90,
        )
    finally:
        assert fresh.stop() == 0

    # Every file read to its end: only a killed worker's may end in a record cut short.
    cut_tails: list[str] = []
    stored = records_by_url(warc, cut_tails=cut_tails)
    assert len(cut_tails) <= 2  # the two killed processes' files at most
    assert every_page <= set(stored)
    for url in every_page:
        assert any(kind in ("response", "revisit") for kind, *_ in stored[url])
    assert len(list(warc.glob("*.warc.gz"))) >= 3  # the killed workers' and the fresh ones'


def test_a_warc_directory_that_cannot_be_written_is_refused_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")

    result = subprocess.run(
        [sys.executable, "-m", "crawler.example", "--local", "http://127.0.0.1:9/",
         "--warc", str(blocker / "warc")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert result.returncode == 2
    assert "cannot write WARC files in" in result.stderr and "a-file" in result.stderr


def test_a_url_given_up_keeps_the_response_of_its_last_attempt_only(
    site: SiteServer, tmp_path: Path
) -> None:
    env = environment(MEMCACHED_SERVERS="127.0.0.1:9", **FAST_FAILURES)
    site.pages[page_path(0)] = html(site.url("/gone.html"), site.url("/down.html"))
    site.pages["/gone.html"] = Page(b"gone for good", content_type="text/plain", status=404)
    site.pages["/down.html"] = Page(b"try later", content_type="text/plain", status=503)
    warc, output = tmp_path / "warc", tmp_path / "records.jsonl"

    result = seed(env, "--local", site.url(page_path(0)), "--warc", str(warc), "-o", str(output))

    assert result.returncode == 1, result.stdout + result.stderr  # /down.html failed
    gone = {record["url"]: record for record in read_records(output)}[site.url("/gone.html")]
    assert gone["outcome"] == "answered" and gone["status"] == 404  # an answer, kept too
    assert gone["warc_file"] and gone["payload_digest"].startswith("sha1:")
    assert site.fetch_counts()["/down.html"] == 4  # upstream's max_retries=3
    stored = records_by_url(warc)
    for path, status, body in (
        ("/gone.html", "404", b"gone for good"),
        ("/down.html", "503", b"try later"),
    ):
        [response] = [e for e in stored[site.url(path)] if e[0] == "response"]
        assert response[2].get_statuscode() == status and response[3] == body
        assert [e[0] for e in stored[site.url(path)]].count("request") == 1


def test_the_python_docs_crawled_with_warc_have_one_stored_response_per_record_and_all_index(
    tmp_path: Path,
) -> None:
    # A real site nobody here wrote (the benchmark's); installed with apt-get if missing.
    directory = docs_directory()
    assert directory is not None, "python3-doc is not installed and could not be"
    warc, output = tmp_path / "warc", tmp_path / "records.jsonl"
    tmp_path.chmod(0o755)
    port = free_port()
    env = environment(MEMCACHED_SERVERS="127.0.0.1:9")

    with serve(directory, port, state=tmp_path):
        result = seed(
            env, "--local", f"http://127.0.0.1:{port}/index.html", "--follow-relative",
            "--same-domain", "--warc", str(warc), "--output", str(output),
        )  # fmt: skip

    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: its one broken link
    records = read_records(output)
    answered = [record for record in records if record.get("status")]
    assert len(answered) > 500
    stored = records_by_url(warc)
    kept = {
        url: [kind for kind, *_ in entries if kind in ("response", "revisit")]
        for url, entries in stored.items()
        if url is not None
    }
    assert sorted(kept) == sorted(record["url"] for record in answered)
    assert all(len(kinds) == 1 for kinds in kept.values())  # one response (or revisit) each
    files = [str(file) for file in warc.glob("*.warc.gz")]
    index = subprocess.run(
        [str(BIN / "cdxj-indexer"), *files], capture_output=True, text=True, check=True
    )
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in index.stdout.splitlines()}
    assert indexed == set(kept)


def test_workers_write_under_their_warc_dir_refuse_a_place_outside_and_fail_one_they_cannot_write(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=2))
    root, elsewhere = tmp_path / "worker-warc", tmp_path / "elsewhere"
    env = environment(**rabbitmq_env, **FAST_FAILURES, CRAWLER_WARC_DIR=str(root))
    waiting, stdout, stderr, _ = waited_crawl(env, site.url(page_path(0)), "--warc", "crawl-1")
    assert waiting.returncode == 0, stdout + stderr
    assert {site.url(page_path(i)) for i in range(10)} <= set(records_by_url(root / "crawl-1"))

    # A directory outside the root, or any without one: refused, nothing fetched or made.
    site.pages["/alone.html"] = html()
    without_root = {key: value for key, value in env.items() if key != "CRAWLER_WARC_DIR"}
    for worker_env, warc, words in (
        (env, str(elsewhere), "is outside this worker's CRAWLER_WARC_DIR"),
        (without_root, "crawl-2", "only under its CRAWLER_WARC_DIR, which is not set"),
    ):
        waiting, stdout, _, workers = waited_crawl(
            worker_env, site.url("/alone.html"), "--warc", warc, threads=2
        )
        assert waiting.returncode == 1  # given up at once, said to the seeder: never lost
        assert words in stdout and workers.count(words) == 1
    assert "/alone.html" not in site.fetch_counts()
    assert not elsewhere.exists() and not (PROJECT_ROOT / "crawl-2").exists()

    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    env = environment(**rabbitmq_env, **FAST_FAILURES, CRAWLER_WARC_DIR=str(blocked / "warc"))
    waiting, stdout, _, workers = waited_crawl(
        env, site.url("/alone.html"), "--warc", "crawl-3", threads=2
    )
    assert waiting.returncode == 1  # given up, after its retries: never lost silently
    assert "cannot write WARC files in" in stdout and "a-file" in stdout
    assert workers.count("cannot write WARC files in") == 4  # each attempt says why


def test_files_past_the_size_limit_are_closed_and_the_next_ones_each_open_with_warcinfo(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=40, links_per_page=3))
    warc = tmp_path / "warc"
    env = environment(MEMCACHED_SERVERS="127.0.0.1:9", CRAWLER_WARC_MAX_BYTES="4000")

    result = seed(
        env, "--local", site.url(page_path(0)), "--warc", str(warc), "--threads", "1",
        "--processes", "1",
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    files = sorted(warc.glob("*.warc.gz"))
    assert len(files) >= 5
    # <crawl id>-<UTC start>-<host>-<pid>-<sequence>: one process, sequences 0, 1, 2...
    names = [file.name.removesuffix(".warc.gz").rsplit("-", 1) for file in files]
    assert len({prefix for prefix, _ in names}) == 1
    assert sorted(int(sequence) for _, sequence in names) == list(range(len(files)))
    for file in files:
        assert file.stat().st_size < 4000 + 2000  # closed once past the limit: one page over
        with file.open("rb") as stream:
            assert next(iter(ArchiveIterator(stream))).rec_type == "warcinfo"
    assert {site.url(page_path(i)) for i in range(40)} <= set(records_by_url(warc))
