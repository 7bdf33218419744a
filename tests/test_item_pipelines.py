"""Item pipelines, as Scrapy's: each item a handler yields passes through the router's
own pipelines, then those the crawl names (``--pipeline``), which may change it or drop
it (``DropItem``, or None); one that fails loses nothing.  Unit tests, then ``--local``
and workers of both brokers, their figures in the summary and ``crawler status``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.handlers import Handled, Handlers, Page
from crawler.items.pipelines import DropItem, as_pipeline, handler_pipelines, name_of
from crawler.outcomes import summary
from tests import item_pipelines
from tests.item_pipelines import PER_PAGE
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer
from tests.support import FAST_FAILURES, crawl_id_of, read_records
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

PAGE = Page("http://h/a.html", "http://h/a.html", 200, {}, b"<p>")
ROUTER = "tests.item_pipelines:router"
NAMED = ("tests.item_pipelines:with_url", "tests.item_pipelines:breaks_on_four")


def crawler(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "crawler"), *args], cwd=PROJECT_ROOT, env=env,
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def run(items: list[dict[str, Any]], *pipelines: Any) -> Any:
    chosen = [as_pipeline(p) for p in pipelines]
    return Handlers(timeout=5).run(lambda page: Handled(items=items), PAGE, None, chosen)


def test_pipelines_change_drop_and_keep_an_item_whose_pipeline_failed() -> None:
    def upper(item: dict[str, Any], page: Page) -> dict[str, Any]:
        return {**item, "name": item["name"].upper(), "page": page.url}

    def no_b(item: dict[str, Any], page: Page) -> dict[str, Any]:
        if item["name"] == "B":
            raise DropItem("no b")
        return item

    def none_for_c(item: dict[str, Any], page: Page) -> dict[str, Any] | None:
        return None if item["name"] == "C" else item

    def fails_on_d(item: dict[str, Any], page: Page) -> dict[str, Any]:
        if item["name"] == "D":
            item["half"] = "changed"
            raise ValueError("cannot")
        return item

    outcome = run(
        [{"name": n} for n in "abcd"], upper, no_b, none_for_c, fails_on_d,
    )  # fmt: skip
    assert outcome.items == [
        {"name": "A", "page": PAGE.url},
        {"name": "D", "page": PAGE.url},  # as before fails_on_d: its change not kept
    ]
    assert outcome.dropped == 2
    assert outcome.item_errors == [f"pipeline-failed: {name_of(fails_on_d)}: ValueError: cannot"]
    assert outcome.error is None


def test_a_pipeline_s_item_is_checked_as_a_handler_s_is() -> None:
    def not_a_dict(item: dict[str, Any], page: Page) -> Any:
        return ["x"]

    def not_json(item: dict[str, Any], page: Page) -> Any:
        return {"x": float("nan")}

    outcome = run([{"n": 1}], not_a_dict, not_json)
    assert outcome.items == [{"n": 1}] and outcome.dropped == 0
    returned, nan = [line.split(": ", 2)[2] for line in outcome.item_errors]
    assert returned == "ValueError: returned list, not a dict"
    assert nan.startswith("ValueError: an item is not strict JSON: Out of range float")


def test_async_pipelines_and_scrapy_s_classes_are_pipelines() -> None:
    class Counted:
        made = 0

        def __init__(self) -> None:
            Counted.made += 1

        def process_item(self, item: dict[str, Any], spider: Any) -> dict[str, Any]:
            return {**item, "counted": True}

    outcome = run([{"n": 1}, {"n": 2}], Counted, item_pipelines.drops_all)
    assert outcome.items == [] and outcome.dropped == 2
    assert Counted.made == 1
    assert run([{"n": 1}], Counted).items == [{"n": 1, "counted": True}]


def test_a_pipeline_past_the_handler_s_timeout_fails_the_handler_step() -> None:
    def slow(item: dict[str, Any], page: Page) -> dict[str, Any]:
        time.sleep(0.5)
        return item

    outcome = Handlers(timeout=0.1).run(lambda page: Handled(items=[{"n": 1}]), PAGE, None, [slow])
    assert outcome.error == "handler-failed: took longer than 0.1s"


def test_a_pipeline_s_errors_are_said_twenty_lines_at_most() -> None:
    def fails(item: dict[str, Any], page: Page) -> dict[str, Any]:
        raise RuntimeError("no")

    outcome = run([{"n": n} for n in range(30)], fails)
    assert len(outcome.items) == 30 and len(outcome.item_errors) == 20
    assert outcome.item_errors[-1] == "pipeline-failed: 11 more"


def test_the_summary_says_the_items_dropped() -> None:
    said = summary({"crawled": 3}, items=9, dropped=9)
    assert said.startswith("3 pages fetched, 9 items, 9 items dropped, ")


def serve_three_pages(site: SiteServer) -> None:
    links = f'<a href="{site.url("/a.html")}">a</a> <a href="{site.url("/b.html")}">b</a>'
    site.pages["/"] = SitePage(links.encode())
    site.pages["/a.html"] = SitePage(b"<p>a</p>")
    site.pages["/b.html"] = SitePage(b"<p>b</p>")


def check_items(site: SiteServer, records: Path, items: Path) -> None:
    pages = {r["url"]: r for r in read_records(records)}
    assert len(pages) == 3
    for url, record in pages.items():
        assert record["dropped_items"] == PER_PAGE // 2, record
        assert record["item_errors"] == [
            "pipeline-failed: tests.item_pipelines:breaks_on_four: RuntimeError: four"
        ]
        assert record["items"] == [{"n": n, "title": f"item {n}", "url": url} for n in (0, 2, 4)]
    written = [json.loads(line)["item"] for line in items.read_text().splitlines()]
    assert len(written) == 9 and all("broken" not in item for item in written)


def test_a_local_crawl_s_items_pass_through_the_router_s_and_the_named_pipelines(
    site: SiteServer, tmp_path: Path
) -> None:
    serve_three_pages(site)
    records, items = tmp_path / "records.jsonl", tmp_path / "items.jsonl"
    done = seed(
        environment(), site.url("/"), "--local", "--handler", ROUTER,
        *(f"--pipeline={name}" for name in NAMED), "--records", str(records), "--items", str(items),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    check_items(site, records, items)
    assert "9 items, 9 items dropped" in done.stdout + done.stderr, done.stdout
    said = [line for line in done.stderr.splitlines() if "pipeline-failed" in line]
    assert len(said) == 3, done.stderr[-2000:]


def test_a_pipeline_that_cannot_be_loaded_or_has_no_handler_is_refused_in_one_line(
    site: SiteServer, tmp_path: Path
) -> None:
    env = environment()
    bad = seed(env, site.url("/"), "--local", "--handler", ROUTER, "--pipeline", "nowhere:f")
    assert bad.returncode != 0
    assert "--pipeline nowhere:f: cannot import 'nowhere'" in bad.stderr, bad.stderr
    alone = seed(env, site.url("/"), "--local", "--pipeline", NAMED[0])
    assert alone.returncode == 2
    assert "--pipeline works with --handler only" in alone.stderr, alone.stderr


def test_crawler_worker_refuses_a_pipeline_it_cannot_load() -> None:
    done = crawler(environment(), "worker", "--pipeline", "nowhere:f")
    assert done.returncode == 2
    assert "--pipeline nowhere:f: cannot import 'nowhere'" in done.stderr, done.stderr


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_pass_items_through_the_pipelines_and_count_those_dropped(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    memcached: object,
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES,
        CRAWLER_HANDLERS=",".join((ROUTER, *NAMED)),
    )  # fmt: skip
    serve_three_pages(site)
    records, items = tmp_path / "records.jsonl", tmp_path / "items.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = seed(
            env, site.url("/"), "--handler", ROUTER, *(f"--pipeline={name}" for name in NAMED),
            "--wait", "--records", str(records), "--items", str(items),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        check_items(site, records, items)
        crawl_id = crawl_id_of(done.stdout)
        said = crawler(env, "status", crawl_id)
        assert "9 items, 9 items dropped" in said.stdout, said.stdout + said.stderr
        # A crawl naming a pipeline these workers did not load is dead-lettered.
        unknown = seed(
            env, site.url("/other"), "--handler", ROUTER, "--pipeline",
            "tests.item_pipelines:drops_all", "--wait",
        )  # fmt: skip
        assert unknown.returncode != 0
    finally:
        assert workers.stop() == 0
    refused = "pipeline 'tests.item_pipelines:drops_all' is not one this worker loaded"
    assert any(refused in line for line in workers.lines)


def test_the_api_runs_a_router_s_pipelines_and_those_it_names(site: SiteServer) -> None:
    from crawler import Crawl, Router

    router = Router()

    @router.default
    def two(page: Page) -> Any:
        yield {"n": 1}
        yield {"n": 2}

    @router.item_pipeline
    def no_one(item: dict[str, Any], page: Page) -> dict[str, Any] | None:
        return None if item["n"] == 1 else item

    site.pages["/"] = SitePage(b"<p>one page</p>")
    crawl = Crawl([site.url("/")], handler=router, pipeline=NAMED[0])
    records = list(crawl)
    assert [r["items"] for r in records] == [[{"n": 2, "url": site.url("/")}]]
    assert records[0]["dropped_items"] == 1


def test_crawler_parse_shows_the_items_after_the_pipelines(site: SiteServer) -> None:
    site.pages["/"] = SitePage(b"<p>one page</p>")
    done = crawler(
        environment(), "parse", site.url("/"), "--handler", ROUTER, "--pipeline", NAMED[0],
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    assert parsed["items"] == [
        {"n": n, "title": f"item {n}", "url": site.url("/")} for n in (0, 2, 4)
    ]
    assert parsed["items_dropped"] == 3 and parsed["item_errors"] == []
    bad = crawler(environment(), "parse", site.url("/"), "--handler", ROUTER, "--pipeline", "x:y")
    assert bad.returncode == 2 and "--pipeline x:y: cannot import 'x'" in bad.stderr


class Counted:
    """A pipeline class that counts how often it is made."""

    made = 0

    def __init__(self) -> None:
        Counted.made += 1

    def process_item(self, item: dict[str, Any], spider: Any) -> dict[str, Any]:
        return item


def test_a_named_pipeline_class_is_made_once_a_process_and_never_on_a_page() -> None:
    Counted.made = 0
    spec = "tests.test_item_pipelines:Counted"
    handlers = Handlers().with_pipelines([spec])
    for _ in range(3):  # a page's each
        (pipeline,) = handlers.pipelines([spec])
        assert pipeline({"n": 1}, PAGE) == {"n": 1}
    assert Counted.made == 1


def test_a_handler_function_s_own_pipelines_are_made_already() -> None:
    def handler(page: Page) -> None:
        return None

    handler.item_pipelines = [Counted(), item_pipelines.drops_all]  # type: ignore[attr-defined]
    assert len(handler_pipelines(handler)) == 2
    handler.item_pipelines = [Counted]  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="not the class"):
        handler_pipelines(handler)  # it would be made on every page
