"""``--files DIR``: the files a handler's items name (``file_urls``, ``crawler.File``)
downloaded once a crawl, kept by their content's SHA-256, and each item written once
its files' fetches have ended, with what became of each; on ``--local`` and on workers
of both brokers; no item lost to a file that fails."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest

from crawler.archiving.files import FileStore, extension
from crawler.items.files import FILE_REQUEST_KEY, PENDING, FileJoin
from crawler.records import Record
from tests.site_server import Page, SiteServer
from tests.support import FAST_FAILURES, running, waited_crawl
from tests.test_items import CRAWLER, chain
from tests.workers import PROJECT_ROOT, environment, seed

HANDLER = "examples.documents:documents"
PDF_A, PDF_B, ZIP = b"%PDF-1.4 a", b"%PDF-1.4 b", b"PK zip"


def serve(site: SiteServer) -> str:
    """Two pages naming one PDF each, a PDF only the first names, a PDF that is not
    there, one out of the crawl's scope, and a ZIP archive (a ``crawler.File``)."""
    far = "http://127.0.0.2:9/far.pdf"

    def links(*targets: str) -> str:  # as upstream's pattern finds them: absolute
        return " ".join(f'<a href="{t if "://" in t else site.url(t)}">x</a>' for t in targets)

    home = links("/a.pdf", "/docs/b.pdf", "/missing.pdf", "/sub.html", "/pack.zip")
    site.pages["/"] = Page(f"<title>Home</title>{home}".encode())
    site.pages["/sub.html"] = Page(f"<title>Sub</title>{links('/a.pdf', far)}".encode())
    site.pages["/a.pdf"] = Page(PDF_A, content_type="application/pdf")
    site.pages["/docs/b.pdf"] = Page(PDF_B, content_type="application/pdf")
    site.pages["/pack.zip"] = Page(ZIP, content_type="application/zip")
    return site.url("/")


def stored(content: bytes, suffix: str) -> str:
    return f"full/{hashlib.sha256(content).hexdigest()}{suffix}"


def check(site: SiteServer, items: list[dict[str, Any]], directory: Path) -> None:
    """The items and files :func:`serve`'s site gives, each file fetched once."""
    by_title = {str(item.get("title") or item.get("kind")): item for item in items}
    assert sorted(by_title) == ["Home", "Sub", "archive"]
    home = [
        (e["url"].rpartition("/")[2], e["status"], e.get("path")) for e in by_title["Home"]["files"]
    ]
    assert home == [
        ("a.pdf", "downloaded", stored(PDF_A, ".pdf")),
        ("b.pdf", "downloaded", stored(PDF_B, ".pdf")),
        ("missing.pdf", "failed: HTTP 404", None),
    ]
    sub = by_title["Sub"]["files"]
    assert sub[0]["path"] == stored(PDF_A, ".pdf") and sub[0]["type"] == "application/pdf"
    assert sub[1] == {
        "url": "http://127.0.0.2:9/far.pdf",
        "status": "not downloaded: out of the crawl's scope",
    }
    archive = by_title["archive"]
    assert archive["file_urls"] == [site.url("/pack.zip")] and archive["page"] == site.url("/")
    assert archive["files"][0]["digest"] == "sha256:" + hashlib.sha256(ZIP).hexdigest()
    for content, suffix in ((PDF_A, ".pdf"), (PDF_B, ".pdf"), (ZIP, ".zip")):
        assert (directory / stored(content, suffix)).read_bytes() == content
    assert sorted(p.name for p in (directory / "full").iterdir()) == sorted(
        Path(stored(c, s)).name for c, s in ((PDF_A, ".pdf"), (PDF_B, ".pdf"), (ZIP, ".zip"))
    )  # nothing half written beside them
    counts = site.fetch_counts()
    assert counts["/a.pdf"] == 1 and counts["/docs/b.pdf"] == 1 and counts["/pack.zip"] == 1


def test_a_local_crawl_downloads_each_file_once_and_writes_every_item(
    site: SiteServer, tmp_path: Path
) -> None:
    feed, directory = tmp_path / "documents.jsonl", tmp_path / "downloads"
    done = seed(
        environment(), serve(site), "--local", "--same-domain", "--handler", HANDLER,
        "--files", str(directory),
        "-o", str(feed),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    check(site, [json.loads(line) for line in feed.read_text().splitlines()], directory)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_download_each_file_once_under_their_files_dir(
    site: SiteServer, tmp_path: Path, broker_env: str, request: pytest.FixtureRequest
) -> None:
    root, feed = tmp_path / "files", tmp_path / "documents.json"
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_FILES_DIR=str(root),
        CRAWLER_HANDLERS=HANDLER,
    )  # fmt: skip
    waiting, stdout, stderr, _ = waited_crawl(
        env,
        serve(site),
        "--same-domain",
        "--handler",
        HANDLER,
        "--files",
        "site",
        "-o",
        str(feed),
        threads=4,
    )
    assert waiting.returncode == 0, stdout + stderr
    check(site, json.loads(feed.read_text()), root / "site")


def test_workers_refuse_a_files_directory_outside_their_root_or_without_one(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    root, elsewhere = tmp_path / "files", tmp_path / "elsewhere"
    env = environment(
        **rabbitmq_env, **FAST_FAILURES, CRAWLER_FILES_DIR=str(root), CRAWLER_HANDLERS=HANDLER
    )
    without_root = {key: value for key, value in env.items() if key != "CRAWLER_FILES_DIR"}
    for worker_env, name, words in (
        (env, str(elsewhere), "is outside this worker's CRAWLER_FILES_DIR"),
        (without_root, "mine", "only under its CRAWLER_FILES_DIR, which is not set"),
    ):
        waiting, stdout, _, workers = waited_crawl(
            worker_env, serve(site), "--handler", HANDLER, "--files", name, threads=2
        )
        assert waiting.returncode == 1  # given up at once, said to the seeder: never lost
        assert words in stdout and workers.count(words) == 1
    assert site.requests == [] and not elsewhere.exists() and not root.exists()


def test_files_need_a_handler() -> None:
    done = seed(environment(), "http://127.0.0.1:9/", "--local", "--files", "x")
    assert done.returncode == 2
    assert "--files works with --handler only" in done.stderr and "Traceback" not in done.stderr


def test_items_wait_for_their_files_whichever_record_comes_first() -> None:
    join = FileJoin()
    a, b = "http://x/a.pdf", "http://x/b.pdf"

    def pending(*urls: str) -> list[dict[str, Any]]:
        return [{"n": 1, "files": [{"url": url, "status": PENDING} for url in urls]}]

    def record(url: str, **fields: Any) -> Record:
        return cast(Record, {"url": url, "request_key": FILE_REQUEST_KEY, **fields})

    kept = {"url": a, "path": "full/1.pdf", "status": "downloaded"}
    assert join.arrived(record(a, outcome="crawled", file=kept)) == []  # before its page
    assert join.hold("page1", pending(a, b)) is None  # b not yet
    assert join.arrived(record(b, outcome="retrying")) == []  # not final
    assert join.arrived(cast(Record, {"url": b, "outcome": "crawled"})) == []  # a page
    whole = join.arrived(record(b, outcome="answered", status=404))
    assert whole == [
        ("page1", [{"n": 1, "files": [kept, {"url": b, "status": "failed: HTTP 404"}]}])
    ]
    assert join.hold("page2", pending(a)) == [{"n": 1, "files": [kept]}]  # known: at once
    assert join.hold("page3", [{"plain": True}]) == [{"plain": True}]
    assert join.hold("page4", pending("http://x/never.pdf")) is None
    ((page, items),) = join.rest()
    assert page == "page4" and items[0]["files"][0]["status"].startswith("not downloaded")
    assert join.rest() == []


def test_a_file_is_kept_once_by_its_content_whatever_its_url(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    first = store.keep("http://x/report.PDF", b"same", "application/pdf")
    again = store.keep("http://y/copy?id=2", b"same", "application/pdf; charset=binary")
    assert first["path"] == "full/" + hashlib.sha256(b"same").hexdigest() + ".pdf"
    assert again["path"].endswith(".pdf") and again["size"] == 4
    assert again["path"] == first["path"]  # .pdf from the URL, and from the type
    assert len(list((tmp_path / "full").iterdir())) == 1
    assert extension("http://x/a/archive.tar.gz", None) == ".gz"
    assert extension("http://x/download?id=1", "image/png") == ".png"
    assert extension("http://x/download", None) == ""


def test_a_state_crawl_killed_while_items_wait_for_their_files_loses_none(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 24
    site.delay = 0.05  # a file a little slow: its item waits while the crawl is killed
    for i in range(pages):
        site.pages[f"/files/{i}.txt"] = Page(f"file {i}".encode(), content_type="text/plain")
    feed, state, directory = tmp_path / "items.jsonl", tmp_path / "state", tmp_path / "files"
    command = [
        CRAWLER, "crawl", "--local", chain(site, pages), "--handler",
        "tests.item_handlers:one_file_each", "--files", str(directory), "-o", str(feed),
        "--state", str(state),
    ]  # fmt: skip
    with running(command, env=environment(), stdout=subprocess.PIPE) as crawl:
        site.wait_for_requests(pages // 2, timeout=60)
        crawl.send_signal(signal.SIGKILL)
        crawl.communicate(timeout=30)
    carried = subprocess.run(
        command, cwd=PROJECT_ROOT, env=environment(), capture_output=True, text=True, timeout=120
    )
    assert carried.returncode == 0, carried.stderr
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    assert {item["page"] for item in items} == {str(i) for i in range(pages)}
    assert len(items) <= pages + 2  # the pages in hand at the kill, at most, again
    for item in items:
        (entry,) = item["files"]
        assert entry["status"] == "downloaded", item
        assert (directory / entry["path"]).read_text() == f"file {item['page']}"
