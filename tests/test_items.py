"""Items reach a sink (``--items``): JSON lines, CSV, a PostgreSQL table of the tests'
own; each item once, with its page's URL and the crawl's id; a sink that fails stops
the crawl in one line; the summary, ``crawler status`` and the records count them."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crawler.items.sinks import INSTALL, ItemSinkError, open_sink
from tests.item_handlers import NUL_ITEM, NUL_ITEM_STORED, PER_PAGE
from tests.postgres_server import PostgresProcess
from tests.site_server import SiteServer, html, page_path
from tests.support import read_records
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment

CRAWLER = str(Path(sys.executable).parent / "crawler")
HANDLER = "tests.item_handlers:three_items"
PAGES = 4


def chain(site: SiteServer, pages: int = PAGES) -> str:
    """``pages`` pages, each linking to the next; the first one's URL."""
    for i in range(pages):
        site.pages[page_path(i)] = html(*([site.url(page_path(i + 1))] if i + 1 < pages else []))
    return site.url(page_path(0))


def crawler(
    env: dict[str, str], *args: str, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CRAWLER, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def expected_items(site: SiteServer, pages: int = PAGES) -> set[tuple[str, int]]:
    return {(site.url(page_path(i)), n) for i in range(pages) for n in range(PER_PAGE)}


def crawl_id_of(stdout: str) -> str:
    found = re.search(r"crawl ([0-9a-f]{32})", stdout)
    assert found, stdout
    return found.group(1)


def rows(postgres: PostgresProcess, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(postgres.url) as connection:
        return connection.execute(
            f'SELECT crawl_id, url, "index", item, fetched_at FROM {table}'
        ).fetchall()


def test_a_local_crawl_writes_every_item_once_as_json_lines(
    site: SiteServer, tmp_path: Path
) -> None:
    items, records = tmp_path / "items.jsonl", tmp_path / "records.jsonl"
    done = crawler(
        environment(), "crawl", "--local", chain(site), "--handler", HANDLER,
        "--items", str(items), "--records", str(records),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{PAGES * PER_PAGE} items" in done.stdout
    lines = [json.loads(line) for line in items.read_text().splitlines()]
    assert len(lines) == PAGES * PER_PAGE
    assert {(line["url"], line["item"]["n"]) for line in lines} == expected_items(site)
    assert {line["index"] == line["item"]["n"] for line in lines} == {True}
    assert len({line["crawl_id"] for line in lines}) == 1
    assert set(lines[0]) == {"crawl_id", "url", "index", "item"}
    # the records carry them too
    by_url = {record["url"]: record for record in read_records(records)}
    assert [item["n"] for item in by_url[site.url(page_path(0))]["items"]] == [0, 1, 2]


def test_a_csv_sink_has_the_first_items_keys_as_columns_and_the_rest_in_extra(
    site: SiteServer, tmp_path: Path
) -> None:
    items = tmp_path / "items.csv"
    done = crawler(
        environment(), "crawl", "--local", chain(site), "--handler", HANDLER,
        "--items", str(items),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with items.open(newline="", encoding="utf-8") as file:
        header, *table = list(csv.reader(file))
    assert header == ["_crawl_id", "_url", "_index", "path", "n", "tags", "_extra"]
    assert len(table) == PAGES * PER_PAGE
    assert {(row[1], int(row[4])) for row in table} == expected_items(site)
    last = next(row for row in table if row[2] == str(PER_PAGE - 1))
    assert json.loads(last[5]) == ["a", PER_PAGE - 1]
    assert json.loads(last[6]) == {"note": "the last, ä", "_url": "mine"}
    assert {row[6] for row in table if row[2] != str(PER_PAGE - 1)} == {""}


def test_a_postgresql_sink_has_a_row_an_item_exactly_once(
    site: SiteServer, postgres: PostgresProcess
) -> None:
    url = chain(site)
    done = crawler(
        environment(), "crawl", "--local", url, "--handler", HANDLER,
        "--items", f"{postgres.url}?table=once",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = rows(postgres, "once")
    assert len(found) == PAGES * PER_PAGE
    assert {(row[1], row[3]["n"]) for row in found} == expected_items(site)
    assert {row[2] == row[3]["n"] for row in found} == {True}
    crawl_id = found[0][0]
    assert {row[0] for row in found} == {crawl_id}
    assert all(row[4] is not None for row in found)
    # Pages fetched twice (a crash before their message was acknowledged): no row more.
    sink = open_sink(f"{postgres.url}?table=once", crawl_id)
    try:
        for i in range(PAGES):
            sink.write(site.url(page_path(i)), [{"n": n} for n in range(PER_PAGE)])
    finally:
        sink.close()
    assert len(rows(postgres, "once")) == PAGES * PER_PAGE
    assert {row[3].get("path") for row in rows(postgres, "once")} != {None}  # the first kept


NUL_HANDLER = "tests.item_handlers:nul_items"


def nul_items_expected(site: SiteServer, pages: int) -> set[tuple[str, int]]:
    return expected_items(site, pages) | {(site.url(page_path(1)), PER_PAGE)}


def stored_items(postgres: PostgresProcess, table: str) -> dict[tuple[str, int], Any]:
    """Each row's item by its URL and index, none twice."""
    found = rows(postgres, table)
    by_place = {(row[1], row[2]): row[3] for row in found}
    assert len(by_place) == len(found)
    return by_place


def test_an_item_holding_u0000_is_stored_in_postgresql_and_the_crawl_goes_on(
    site: SiteServer, postgres: PostgresProcess, tmp_path: Path
) -> None:
    """PostgreSQL's jsonb refuses U+0000: the item is stored with U+FFFD in its place,
    every page is crawled and every other item stored; the record keeps it as it was."""
    pages, records = 12, tmp_path / "records.jsonl"
    done = crawler(
        environment(), "crawl", "--local", chain(site, pages), "--handler", NUL_HANDLER,
        "--items", f"{postgres.url}?table=nul", "--records", str(records),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"{pages * PER_PAGE + 1} items" in done.stdout
    stored = stored_items(postgres, "nul")
    assert set(stored) == nul_items_expected(site, pages)
    assert stored[(site.url(page_path(1)), PER_PAGE)] == NUL_ITEM_STORED
    assert len({path for path in site.fetch_counts() if path.startswith("/page/")}) == pages
    by_url = {record["url"]: record for record in read_records(records)}
    assert by_url[site.url(page_path(1))]["items"][-1] == NUL_ITEM


def test_a_local_state_crawl_with_an_item_holding_u0000_carries_on_to_the_end(
    site: SiteServer, postgres: PostgresProcess, tmp_path: Path
) -> None:
    """Stopped by Ctrl-C after the page of the U+0000 item, then carried on: it ends,
    every item stored once."""
    pages, hold_from = 8, 5  # robots.txt, pages 0 to 2 answered; page 3 held
    site.hold_from = hold_from
    command = [
        CRAWLER, "crawl", "--local", chain(site, pages), "--threads", "1", "--handler",
        NUL_HANDLER, "--items", f"{postgres.url}?table=nul_state", "--state",
        str(tmp_path / "state"),
    ]  # fmt: skip
    first = subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=environment(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(site.requests) < hold_from and first.poll() is None:
            assert time.monotonic() < deadline, "the crawl never reached the held page"
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
    finally:
        site.release()
        first.communicate(timeout=60)
    again = subprocess.run(
        command, cwd=PROJECT_ROOT, env=environment(), capture_output=True, text=True, timeout=90
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert first.returncode == 130
    assert "Carrying on with the crawl kept in" in again.stdout
    assert "Traceback" not in again.stderr
    stored = stored_items(postgres, "nul_state")
    assert set(stored) == nul_items_expected(site, pages)
    assert stored[(site.url(page_path(1)), PER_PAGE)] == NUL_ITEM_STORED


def test_postgresql_going_down_mid_crawl_stops_it_in_one_line(
    site: SiteServer, tmp_path: Path
) -> None:
    server = PostgresProcess()
    try:
        site.delay = 0.2
        process = subprocess.Popen(
            [CRAWLER, "crawl", "--local", chain(site, 40), "--threads", "1", "--handler",
             HANDLER, "--items", f"{server.url}?table=down"],
            cwd=PROJECT_ROOT, env=environment(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if len(rows(server, "down")) >= 2 * PER_PAGE:
                    break
            except psycopg.Error:
                pass
            time.sleep(0.1)
        server.stop()
        _, stderr = process.communicate(timeout=60)
    finally:
        server.remove()
    assert process.returncode == 1, stderr
    said = [line for line in stderr.splitlines() if "cannot write items" in line]
    assert len(said) == 1, stderr
    assert said[0].startswith(f"crawler: cannot write items to {server.url}?table=down: ")
    assert "the crawl stopped" in said[0]
    assert "Traceback" not in stderr
    assert len(site.requests) < 40  # stopped, not crawled to the end


def test_postgresql_going_down_under_a_waiting_seeder_loses_no_item(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    """The sink fails with records in hand and pages in flight: the crawl is paused, and
    every item of every page fetched is in the table or in the file the line names."""
    env = environment(**rabbitmq_env, CRAWLER_HANDLERS=HANDLER)
    pages, hold_from = 30, 6
    site.pages[page_path(0)] = html(*(site.url(page_path(i)) for i in range(1, pages)))
    site.pages.update({page_path(i): html() for i in range(1, pages)})
    site.delay, site.hold_from = 0.05, hold_from
    records = tmp_path / "records.jsonl"
    server = PostgresProcess()
    workers = WorkerProcesses(env, processes=1, threads=2)
    process = None
    try:
        process = subprocess.Popen(
            [CRAWLER, "crawl", "--workers", site.url(page_path(0)), "--handler", HANDLER, "--wait",
             "--items", f"{server.url}?table=unsent", "--records", str(records)],
            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        site.wait_for_requests(hold_from + 1)  # both threads wait on the site
        answered = {r.path for r in site.requests[: hold_from - 1] if r.path.startswith("/page/")}
        deadline = time.monotonic() + 30
        while len(rows(server, "unsent")) < PER_PAGE * len(answered):
            assert time.monotonic() < deadline, "the answered pages' items never reached the table"
            time.sleep(0.1)
        server.stop()
        site.release()  # the held pages end: their records find the sink gone
        stdout, stderr = process.communicate(timeout=90)
        server.start()
        in_table = {(row[1], row[3]["n"]) for row in rows(server, "unsent")}
    finally:
        site.release()
        if process is not None and process.poll() is None:
            process.kill()
            process.communicate()
        stopped = workers.stop()
        server.remove()
    assert stopped == 0 and process is not None
    assert process.returncode == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    crawl_id = crawl_id_of(stdout)
    unsent = tmp_path / f"items-{crawl_id}-unsent.jsonl"
    said = [line for line in stderr.splitlines() if "cannot write items" in line]
    assert len(said) == 1, stderr
    assert said[0].startswith(f"crawler: cannot write items to {server.url}?table=unsent: ")
    assert repr(str(unsent)) in said[0]
    assert f"'crawler resume {crawl_id}'" in said[0]
    lines = [json.loads(line) for line in unsent.read_text().splitlines()]
    assert f"the {len(lines)} item(s) not written are in" in said[0]
    assert {line["crawl_id"] for line in lines} == {crawl_id}
    assert {line["index"] == line["item"]["n"] for line in lines} == {True}
    in_file = {(line["url"], line["item"]["n"]) for line in lines}
    held = {
        site.url(r.path)
        for r in site.requests[hold_from - 1 : hold_from + 1]
        if r.path.startswith("/page/")
    }
    assert {(url, n) for url in held for n in range(PER_PAGE)} <= in_file
    # None missing: every page fetched has its record, and its items in one place or the other.
    fetched = {site.url(path) for path in site.fetch_counts() if path.startswith("/page/")}
    crawled = {record["url"] for record in read_records(records) if record["outcome"] == "crawled"}
    assert crawled == fetched
    assert {(url, n) for url in fetched for n in range(PER_PAGE)} <= in_table | in_file
    assert len(fetched) < pages  # paused, not crawled to the end


def test_a_missing_psycopg_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ItemSinkError, match=re.escape(INSTALL)) as raised:
        open_sink("postgresql://someone:secret@127.0.0.1:1/db", "c")
    assert "secret" not in str(raised.value)


def test_items_are_refused_without_local_or_wait(tmp_path: Path) -> None:
    done = crawler(
        environment(), "crawl", "--workers", "https://example.com/", "--items", "x.jsonl"
    )
    assert done.returncode == 2
    assert "--items works with --local or --wait" in done.stderr
    bad = crawler(environment(), "crawl", "--local", "https://example.com/", "--items", "ftp://x")
    assert bad.returncode == 2
    assert "is not an item sink" in bad.stderr


def test_workers_and_a_waiting_seeder_write_every_item_and_status_counts_them(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, CRAWLER_HANDLERS=HANDLER)
    items = tmp_path / "items.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = crawler(env, "crawl", "--workers", chain(site), "--handler", HANDLER, "--wait",
                       "--items", str(items))  # fmt: skip
    finally:
        assert workers.stop() == 0
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{PAGES * PER_PAGE} items" in done.stdout
    lines = [json.loads(line) for line in items.read_text().splitlines()]
    assert len(lines) == PAGES * PER_PAGE
    assert {(line["url"], line["item"]["n"]) for line in lines} == expected_items(site)
    crawl_id = crawl_id_of(done.stdout)
    assert {line["crawl_id"] for line in lines} == {crawl_id}
    status = crawler(env, "status", crawl_id)
    assert status.returncode == 0, status.stderr
    assert f"{PAGES * PER_PAGE} items" in status.stdout


def test_the_python_api_writes_items_and_its_records_carry_them(
    site: SiteServer, tmp_path: Path
) -> None:
    from crawler import Crawl
    from tests.item_handlers import three_items

    items = tmp_path / "items.jsonl"
    crawl = Crawl([chain(site)], handler=three_items, items=str(items))
    records = list(crawl)
    assert crawl.exit_status == 0
    assert sum(len(record.get("items", ())) for record in records) == PAGES * PER_PAGE
    assert crawl.summary is not None and f"{PAGES * PER_PAGE} items" in crawl.summary
    lines = [json.loads(line) for line in items.read_text().splitlines()]
    assert {(line["url"], line["item"]["n"]) for line in lines} == expected_items(site)
