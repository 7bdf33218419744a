"""Logs as Scrapy and wget users expect (issue 57): ``-L LEVEL``, ``-q``, ``--log-file``;
at the default level a crawl here shows what needs a person, not upstream's "not HTML"
line for every PDF and image (workers keep upstream's lines: tests/test_crawl_actor.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.site_server import Page, SiteServer
from tests.workers import PROJECT_ROOT, environment

CRAWLER = str(Path(sys.executable).parent / "crawler")
NOT_HTML = "since it's not HTML."


def crawl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CRAWLER, "crawl", "--local", *args], cwd=PROJECT_ROOT, env=environment(),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def serve(site: SiteServer) -> str:
    site.pages["/"] = Page(b'<a href="/a.pdf">a</a> <a href="/b.png">b</a> <a href="/gone">c</a>')
    site.pages["/a.pdf"] = Page(b"%PDF-1.4", content_type="application/pdf")
    site.pages["/b.png"] = Page(b"\x89PNG", content_type="image/png")
    site.pages["/gone"] = Page(b"no", status=500)
    return site.url("/")


@pytest.mark.parametrize("processes", ["1", "2"])
def test_by_default_a_crawl_shows_failures_but_no_line_a_page(
    site: SiteServer, processes: str
) -> None:
    done = crawl(serve(site), "--processes", processes, "--retries", "0")
    assert done.returncode == 1, done.stderr  # /gone failed
    assert NOT_HTML not in done.stderr, done.stderr
    assert "Crawling" not in done.stderr
    assert "Giving up on URL" in done.stderr and "/gone" in done.stderr
    assert "2 skipped as not HTML" in done.stdout


@pytest.mark.parametrize("level", [["-v"], ["-L", "info"], ["--log-level", "DEBUG"]])
def test_verbose_and_the_info_level_show_every_page_s_lines(
    site: SiteServer, level: list[str]
) -> None:
    done = crawl(serve(site), *level, "--retries", "0")
    assert done.stderr.count(NOT_HTML) == 2, done.stderr
    assert "Crawling" in done.stderr


def test_quiet_shows_no_progress_and_only_errors_and_still_the_summary(
    site: SiteServer,
) -> None:
    done = crawl(serve(site), "-q", "--retries", "0")
    lines = done.stderr.splitlines()
    assert lines and all(" ERROR " in line for line in lines), lines  # giving up: an error
    assert any("Giving up on URL" in line for line in lines)
    assert "done /" not in done.stderr  # no progress line
    assert "Finished after" in done.stdout and "1 failed" in done.stdout
    assert done.returncode == 1


def test_log_file_takes_the_lines_and_is_added_to(site: SiteServer, tmp_path: Path) -> None:
    log = tmp_path / "crawl.log"
    log.write_text("an earlier line\n")
    done = crawl(serve(site), "-v", "--log-file", str(log), "--retries", "0")
    assert "Crawling" not in done.stderr and NOT_HTML not in done.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "an earlier line"
    assert sum(NOT_HTML in line for line in lines) == 2
    assert any("Giving up on URL" in line for line in lines)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["-v", "-L", "INFO"], "--verbose and --log-level: choose one"),
        (["-q", "-v"], "--quiet and --verbose: choose one"),
        (["-q", "-L", "ERROR"], "--quiet and --log-level: choose one"),
        (["-L", "LOUD"], "'LOUD' is not a log level: DEBUG, INFO, WARNING, ERROR or CRITICAL"),
    ],
)
def test_log_flags_that_cannot_go_together_are_refused_in_one_line(
    flags: list[str], said: str
) -> None:
    done = crawl("http://127.0.0.1:9/", *flags)
    assert done.returncode == 2
    assert said in done.stderr, done.stderr


def test_a_log_file_that_cannot_be_written_is_refused(tmp_path: Path, site: SiteServer) -> None:
    done = crawl(serve(site), "--log-file", str(tmp_path / "no" / "such" / "dir.log"))
    assert done.returncode == 2
    assert "--log-file" in done.stderr and "No such file or directory" in done.stderr
