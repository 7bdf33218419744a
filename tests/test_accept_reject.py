"""``-A``/``--accept`` and ``-R``/``--reject``, wget's lists of file-name suffixes: on
``--local`` and on workers (the lists travel in every message), with wget's spellings
(comma-separated, wildcard patterns) and a clear error for a bad list."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.crawl_spec import CrawlError, CrawlSpec
from crawler.options import CrawlOptions, file_name_allowed
from tests.site_server import Page, SiteServer
from tests.support import FAST_FAILURES, read_records
from tests.workers import WorkerProcesses, environment, seed

LEAVES = (
    "/docs/report.pdf", "/docs/data.ZIP", "/docs/photo.jpg", "/docs/icon.png",
    "/docs/notes-draft.pdf", "/docs/more.php?page=2", "/docs/sub/", "/docs/style.css",
)  # fmt: skip


def serve(site: SiteServer) -> str:
    links = "".join(f'<a href="{site.url(path)}">x</a>' for path in LEAVES)
    site.pages["/docs/index.html"] = Page(links.encode())
    for path in LEAVES:
        site.pages[path.partition("?")[0]] = Page(b"<p>leaf</p>")
    return site.url("/docs/index.html")


#: What ``-A pdf,zip -R '*-draft.*'`` fetches: the seed, the accepted files and the pages.
ACCEPTED = {
    "/docs/index.html", "/docs/report.pdf", "/docs/data.ZIP", "/docs/more.php?page=2",
    "/docs/sub/",
}  # fmt: skip


def test_the_lists_read_as_wget_reads_them() -> None:
    accept, reject = ("pdf,zip",), ("jpg, png", "*-draft.*")
    allowed = {path for path in LEAVES if file_name_allowed("http://a" + path, accept, reject)}
    assert allowed == ACCEPTED - {"/docs/index.html"}
    assert file_name_allowed("http://a/%52eport.PDF", accept, ())  # decoded, any case
    assert not file_name_allowed("http://a/x.gif", accept, ())
    assert file_name_allowed("http://a/x.gif", (), ())
    spec = CrawlSpec.from_options(
        ["http://a.example/"], {"accept": ["PDF, zip"], "reject": ["jpg"]}
    )
    assert spec.options.accept == ("pdf,zip",) and spec.options.reject == ("jpg",)
    assert CrawlOptions.from_message(spec.options.to_message()) == spec.options
    with pytest.raises(CrawlError, match="suffixes"):
        CrawlSpec.from_options(["http://a.example/"], {"accept": ["pdf,,zip"]})


def test_a_bad_list_is_one_line_and_exit_2() -> None:
    done = seed(environment(), "http://127.0.0.1:9/", "--local", "-R", "a/b")
    assert done.returncode == 2
    assert "-R" in done.stderr or "--reject" in done.stderr
    assert "has no /" in done.stderr and "Traceback" not in done.stderr


def test_a_local_crawl_follows_only_what_the_lists_accept(site: SiteServer, tmp_path: Path) -> None:
    output = tmp_path / "pages.jsonl"
    done = seed(
        environment(), serve(site), "--local", "-A", "pdf,zip", "-R", "*-draft.*",
        "-o", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(site.fetch_counts()) == ACCEPTED
    assert len(read_records(output)) == len(ACCEPTED)


def test_workers_follow_only_what_the_lists_accept(
    site: SiteServer, rabbitmq_env: dict[str, str], memcached: object
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = seed(
            env, serve(site), "--accept", "pdf", "-A", "zip", "--reject=*-draft.*", "--wait"
        )
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        assert workers.stop() == 0
    assert set(site.fetch_counts()) == ACCEPTED
