"""The crawl's feed (``-o FILE``): with a handler its items as the handler made them
(one JSON array for ``FILE.json``, whole even after ``kill -9``; JSON lines; CSV;
standard output), without one each page's record as before; ``--records`` keeps the
records of a crawl with a handler; a crawl carried on (``--state``) adds to its array."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest

from crawler.json_array import JsonArrayFile
from tests.item_handlers import PER_PAGE, three_items
from tests.postgres_server import PostgresProcess
from tests.site_server import SiteServer, page_path
from tests.support import running
from tests.test_items import CRAWLER, HANDLER, PAGES, chain, crawler, expected_items, rows
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment


def made(site: SiteServer, pages: int = PAGES) -> list[dict[str, Any]]:
    """The items the handler makes of the chain's pages, as it makes them."""

    class Page:
        def __init__(self, url: str) -> None:
            self.url = url

    return [
        item
        for i in range(pages)
        for item in three_items(Page(site.url(page_path(i)))).items  # type: ignore[arg-type]
    ]


def key(item: dict[str, Any]) -> str:
    return json.dumps(item, sort_keys=True)


def same_items(found: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """The same items, each once, in any order."""
    return sorted(map(key, found)) == sorted(map(key, expected))


def test_a_local_crawl_with_a_handler_writes_its_items_as_one_json_array(
    site: SiteServer, tmp_path: Path
) -> None:
    feed = tmp_path / "items.json"
    done = crawler(
        environment(), "crawl", "--local", chain(site), "--handler", HANDLER, "-o", str(feed)
    )
    assert done.returncode == 0, done.stderr
    items = json.loads(feed.read_text())
    assert isinstance(items, list) and same_items(items, made(site))
    assert f"{PAGES * PER_PAGE} items" in done.stdout


def test_json_lines_csv_and_standard_output_hold_the_items_as_made(
    site: SiteServer, tmp_path: Path
) -> None:
    lines, table = tmp_path / "items.jsonl", tmp_path / "items.csv"
    url = chain(site)
    for feed in (lines, table):
        done = crawler(
            environment(), "crawl", "--local", url, "--handler", HANDLER, "-o", str(feed)
        )
        assert done.returncode == 0, done.stderr
    out = crawler(environment(), "crawl", "--local", url, "--handler", HANDLER, "-o", "-")
    assert out.returncode == 0, out.stderr

    assert same_items([json.loads(line) for line in lines.read_text().splitlines()], made(site))
    assert same_items([json.loads(line) for line in out.stdout.splitlines()], made(site))
    assert f"{PAGES * PER_PAGE} items" in out.stderr  # the summary: out of the way
    with table.open(newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    assert rows[0] == ["path", "n", "tags", "_extra"]  # the first item's keys
    assert len(rows) == 1 + PAGES * PER_PAGE
    last = next(row for row in rows[1:] if row[1] == str(PER_PAGE - 1))
    assert json.loads(last[2]) == ["a", PER_PAGE - 1]
    assert json.loads(last[3]) == {"note": "the last, ä", "_url": "mine"}


def test_without_a_handler_the_feed_is_the_records_as_before(
    site: SiteServer, tmp_path: Path
) -> None:
    pages, records = tmp_path / "pages.jsonl", tmp_path / "records.jsonl"
    done = crawler(
        environment(), "crawl", "--local", chain(site), "-o", str(pages), "--records", str(records)
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in pages.read_text().splitlines()]
    assert {line["url"] for line in lines} == {site.url(page_path(i)) for i in range(PAGES)}
    assert {line["outcome"] for line in lines} == {"crawled"}
    assert "sent" not in lines[0] and "links" in lines[0]
    assert pages.read_text() == records.read_text()  # each record, written alike


def test_records_keeps_the_pages_of_a_crawl_with_a_handler(
    site: SiteServer, tmp_path: Path
) -> None:
    feed, records = tmp_path / "items.json", tmp_path / "records.json"
    done = crawler(
        environment(), "crawl", "--local", chain(site), "--handler", HANDLER,
        "-o", str(feed), "--records", str(records),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pages = json.loads(records.read_text())  # .json: one array of records
    assert {page["url"] for page in pages} == {site.url(page_path(i)) for i in range(PAGES)}
    assert all(len(page["items"]) == PER_PAGE for page in pages)
    assert same_items(json.loads(feed.read_text()), made(site))


def state_crawl(site: SiteServer, pages: int, tmp_path: Path) -> tuple[Path, list[str]]:
    """A ``--local --state`` crawl of a chain of ``pages`` with the items handler, its
    feed ``items.json``: the feed and the command."""
    feed = tmp_path / "items.json"
    command = [
        CRAWLER, "crawl", "--local", chain(site, pages), "--handler", HANDLER,
        "-o", str(feed), "--state", str(tmp_path / "state"),
    ]  # fmt: skip
    return feed, command


def items_in(feed: Path, before: int) -> int:
    """How many items the feed holds as the crawl writes it, or ``before`` when the read
    caught a write half done (a reader of a file being added to can: the file is whole
    between writes, which the kill below checks)."""
    try:
        return len(json.loads(feed.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return before


def test_a_json_feed_is_valid_json_after_a_kill_and_a_state_crawl_adds_to_its_array(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 30
    site.delay = 0.1  # a page at a time: the chain is fetched in order
    feed, command = state_crawl(site, pages, tmp_path)
    with running(command, env=environment(), stdout=subprocess.PIPE) as crawl:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 3 * PER_PAGE and time.monotonic() < deadline:
            seen = items_in(feed, seen)
            time.sleep(0.05)
        crawl.send_signal(signal.SIGKILL)
        crawl.communicate(timeout=30)
    assert crawl.returncode == -signal.SIGKILL
    before = json.loads(feed.read_text())  # killed: still one array
    assert len(before) < pages * PER_PAGE

    carried = subprocess.run(
        command, cwd=PROJECT_ROOT, env=environment(), capture_output=True, text=True, timeout=120
    )
    assert carried.returncode == 0, carried.stderr
    assert "Carrying on with the crawl kept in" in carried.stdout
    items = json.loads(feed.read_text())  # still one array, added to
    assert items[: len(before)] == before
    assert {key(item) for item in items} == {key(item) for item in made(site, pages)}
    assert len(items) - pages * PER_PAGE <= PER_PAGE  # the page in hand at most, again


def test_a_state_crawl_interrupted_by_ctrl_c_adds_each_item_once(
    site: SiteServer, tmp_path: Path
) -> None:
    pages = 20
    site.delay, site.hold_from = 0.1, 5  # the crawl cannot end before its Ctrl-C
    feed, command = state_crawl(site, pages, tmp_path)
    with running(command, env=environment(), stdout=subprocess.PIPE) as crawl:
        site.wait_for_requests(5, timeout=60)
        crawl.send_signal(signal.SIGINT)
        site.release()
        crawl.communicate(timeout=30)
    assert crawl.returncode == 130
    carried = subprocess.run(
        command, cwd=PROJECT_ROOT, env=environment(), capture_output=True, text=True, timeout=120
    )
    assert carried.returncode == 0, carried.stderr
    assert same_items(json.loads(feed.read_text()), made(site, pages))


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_workers_and_a_waiting_seeder_write_one_json_array_of_the_items(
    site: SiteServer, tmp_path: Path, broker: str, request: pytest.FixtureRequest
) -> None:
    env = environment(**request.getfixturevalue(f"{broker}_env"), CRAWLER_HANDLERS=HANDLER)
    feed, records = tmp_path / "items.json", tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = crawler(env, "crawl", "--workers", chain(site), "--handler", HANDLER, "--wait",
                       "-o", str(feed), "--records", str(records))  # fmt: skip
    finally:
        assert workers.stop() == 0
    assert done.returncode == 0, done.stderr[-2000:]
    assert same_items(json.loads(feed.read_text()), made(site))
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert {line["url"] for line in lines} == {site.url(page_path(i)) for i in range(PAGES)}


def test_the_python_api_writes_the_feed_and_still_yields_records(
    site: SiteServer, tmp_path: Path
) -> None:
    from crawler import Crawl

    feed = tmp_path / "items.json"
    crawl = Crawl([chain(site)], handler=three_items, output=feed)
    records = list(crawl)
    assert crawl.exit_status == 0
    assert sum(len(record.get("items", ())) for record in records) == PAGES * PER_PAGE
    assert same_items(json.loads(feed.read_text()), made(site))


def test_a_table_feed_needs_a_handler_and_a_database_url_is_no_records_file() -> None:
    done = crawler(environment(), "crawl", "--local", "https://example.com/",
                   "-o", "postgresql://u@127.0.0.1:1/db")  # fmt: skip
    assert done.returncode == 2
    assert "a table holds a handler's items (--handler)" in done.stderr


def test_a_json_array_file_is_whole_after_a_value_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    array = JsonArrayFile(path)
    array.write(['{"a": 1}', "2"])
    array.close()
    path.write_bytes(path.read_bytes()[:-3] + b',\n{"cut": [1')  # a write cut short
    array = JsonArrayFile(path, append=True)
    assert json.loads(path.read_text()) == [{"a": 1}, 2]
    array.write(["3"])
    array.close()
    assert json.loads(path.read_text()) == [{"a": 1}, 2, 3]
    path.write_text("not an array\n")
    with pytest.raises(ValueError, match="holds no JSON array"):
        JsonArrayFile(path, append=True)


def test_a_json_array_file_made_anew_is_never_seen_empty(tmp_path: Path) -> None:
    """A reader polling the file while a crawl makes it again (a crawl started over)
    finds the old array or the new one, never the empty file between creating the file
    and writing its first bytes."""
    import threading

    path = tmp_path / "a.json"
    JsonArrayFile(path).close()
    seen: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(path.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(300):
            JsonArrayFile(path).close()
    finally:
        done.set()
        reader.join()
    assert seen and all(json.loads(text) == [] for text in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # nothing left beside it


def test_a_recrawl_reads_the_records_of_a_json_array_as_of_json_lines(tmp_path: Path) -> None:
    from crawler.frontier.recrawl import read_records
    from crawler.records import Record, RecordFile

    url = "https://example.com/a"
    page: dict[str, Any] = {"url": url, "outcome": "crawled", "status": 200,
                            "content_type": "text/html", "links": [], "depth": 0,
                            "etag": '"x"', "last_modified": None}  # fmt: skip
    for name in ("records.json", "records.jsonl"):
        file = RecordFile(tmp_path / name)
        file.write(cast(Record, page))
        file.write(cast(Record, {**page, "url": url + "b"}))
        file.close()
    pages = [
        [found for found, _ in read_records(tmp_path / name, [url])]
        for name in ("records.json", "records.jsonl")
    ]
    assert pages[0] == pages[1] == [url, url + "b"]


def test_a_handler_that_made_no_item_leaves_an_empty_array_and_says_where_its_data_is(
    site: SiteServer, tmp_path: Path
) -> None:
    feed = tmp_path / "items.json"
    done = crawler(environment(), "crawl", "--local", chain(site), "--handler",
                   "tests.page_handlers:heading", "-o", str(feed))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(feed.read_text()) == []
    assert f"note: -o {feed} holds the handler's items" in done.stderr
    assert "--records FILE" in done.stderr


def test_a_table_feed_holds_each_item_once_with_its_key_in_columns_of_their_own(
    site: SiteServer, postgres: PostgresProcess
) -> None:
    done = crawler(environment(), "crawl", "--local", chain(site), "--handler", HANDLER,
                   "-o", f"{postgres.url}?table=feed")  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = rows(postgres, "feed")
    assert {(row[1], row[2]) for row in found} == expected_items(site)  # url, index
    assert same_items([row[3] for row in found], made(site))  # the item, as made
    assert len({row[0] for row in found}) == 1  # the crawl's id


def test_a_feed_that_cannot_be_made_is_one_line_before_anything_is_fetched(
    site: SiteServer, tmp_path: Path
) -> None:
    feed = tmp_path / "missing" / "items.json"
    done = crawler(environment(), "crawl", "--local", chain(site), "--handler", HANDLER,
                   "-o", str(feed))  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"crawler: cannot write items to {str(feed)!r}: No such file or directory;"
        " the crawl stopped"
    ]
    assert site.fetch_counts() == {}
