"""``--local --state DIR``: a local crawl that carries on after Ctrl-C, ``kill -9`` or a
power cut, fetching again only the pages that were in hand."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from crawler.archiving.warc import cut_partial_records
from crawler.records import cut_partial_line
from tests.site_server import SiteServer, generate_site, page_path
from tests.workers import PROJECT_ROOT, environment, seed

THREADS = 4


def local_crawl(site: SiteServer, state: Path, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crawler.example",
            site.url(page_path(0)),
            "--local",
            "--threads",
            str(THREADS),
            "--state",
            str(state),
            "--output",
            str(tmp_path / "records.jsonl"),
            "--warc",
            str(tmp_path / "warc"),
        ],
        cwd=PROJECT_ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_and_three_kills_lose_no_page_and_fetch_again_only_those_in_hand(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 150
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=5))
    site.delay = 0.02
    state = tmp_path / "state"
    interrupted = []
    # Ctrl-C, then kill -9 three times, each after some more pages were served.
    stops = ((20, signal.SIGINT), (45, signal.SIGKILL), (75, signal.SIGKILL), (105, signal.SIGKILL))
    for after, how in stops:
        site.hold(after)  # this round cannot end before its stop
        crawl = local_crawl(site, state, tmp_path)
        site.wait_for_requests(after, timeout=60)
        crawl.send_signal(how)
        site.release()
        stdout, _ = crawl.communicate(timeout=30)
        interrupted.append((crawl.returncode, stdout))
    last = local_crawl(site, state, tmp_path)
    stdout, stderr = last.communicate(timeout=120)

    assert interrupted[0][0] == 130 and "run the same command again" in interrupted[0][1]
    assert [code for code, _ in interrupted[1:]] == [-signal.SIGKILL] * 3
    assert last.returncode == 0, stderr[-2000:]
    assert "Carrying on with the crawl kept in" in stdout
    counts = site.fetch_counts()
    assert set(counts) == {page_path(i) for i in range(pages)}  # none lost
    twice = sum(n - 1 for n in counts.values())
    assert twice <= len(stops) * THREADS  # only those in hand, again
    assert f"{pages} pages fetched" in stdout  # the crawl's figures carried on
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line whole
    assert {r["url"] for r in records} == {site.url(page_path(i)) for i in range(pages)}
    assert len(records) - pages <= len(stops) * THREADS
    responses = set()
    for path in sorted((tmp_path / "warc").rglob("*.warc.gz")):
        with path.open("rb") as file:  # every file reads to its end
            responses |= {
                r.rec_headers.get_header("WARC-Target-URI")
                for r in ArchiveIterator(file)
                if r.rec_type == "response"
            }
    assert responses == {site.url(page_path(i)) for i in range(pages)}


def test_another_command_on_the_same_state_is_refused_and_a_finished_crawl_ends_at_once(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    state = str(tmp_path / "state")
    first = seed(environment(), site.url(page_path(0)), "--local", "--state", state)
    again = seed(environment(), site.url(page_path(0)), "--local", "--state", state)
    other = seed(environment(), site.url(page_path(1)), "--local", "--state", state)

    assert first.returncode == 0 and "10 pages fetched" in first.stdout
    assert again.returncode == 0 and "0 URL(s) queued or in hand" in again.stdout
    assert "10 pages fetched" in again.stdout
    assert sum(site.fetch_counts().values()) == 10  # nothing fetched again
    assert other.returncode == 2
    assert "holds the state of another crawl" in other.stderr
    wrong = seed(environment(), site.url(page_path(0)), "--state", state)
    assert wrong.returncode == 2 and "--state works with --local only" in wrong.stderr


def test_a_record_cut_short_at_the_end_of_a_file_is_cut_off(tmp_path: Path) -> None:
    lines = tmp_path / "records.jsonl"
    lines.write_text('{"url": "a"}\n{"url": "b"}\n{"url": "c", "sta')
    assert cut_partial_line(lines) == len('{"url": "a"}\n{"url": "b"}\n')
    assert lines.read_text().splitlines() == ['{"url": "a"}', '{"url": "b"}']

    warc = tmp_path / "warc" / "one.warc.gz"
    warc.parent.mkdir()
    record = "WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 1\r\n\r\n{}\r\n\r\n"
    members = [gzip.compress(record.format(i).encode()) for i in range(3)]
    whole = b"".join(members[:2])
    warc.write_bytes(whole + members[2][: len(members[2]) // 2])
    untouched = tmp_path / "warc" / "two.warc.gz"
    untouched.write_bytes(whole)

    assert cut_partial_records(tmp_path / "warc") == [warc]
    assert warc.read_bytes() == whole and untouched.read_bytes() == whole
    with warc.open("rb") as file:
        assert len(list(ArchiveIterator(file))) == 2
