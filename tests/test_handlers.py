"""Page handlers (``--handler``): on workers and ``--local``, what they return goes into
each page's record; a handler that fails fails that page's handler step only."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.errors import InvalidMessage
from crawler.handlers import MAX_DEPTH, MAX_STUCK, Handlers, Page, stuck
from tests import page_handlers
from tests.site_server import Page as SitePage
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, read_records
from tests.workers import WorkerProcesses, dead_letters, environment, seed

PAGES = 12


def titled_site(site: SiteServer, pages: int = PAGES) -> None:
    for path, page in generate_site(site.base_url, pages=pages, links_per_page=3).items():
        head = f"<head><title>Title of {path}</title>"
        head += f'<meta name="description" content="About {path}"></head>'
        body = page.body.replace(b"<body>", f"{head}<body><h1>{path}</h1>".encode())
        site.pages[path] = SitePage(body)


def page(html: str, url: str = "http://127.0.0.1:1/a.html") -> Page:
    return Page(url, url, 200, {}, html.encode())


def test_a_handler_that_raises_runs_too_long_or_returns_no_dict_fails_its_step_in_one_line() -> (
    None
):
    handlers = Handlers(["tests.page_handlers:failing"], timeout=0.2)
    failing = handlers.chosen("tests.page_handlers:failing")
    assert failing is not None

    assert handlers.run(failing, page("<p>", "http://h/1.html")).data == {"ok": True}
    raised = handlers.run(failing, page("<p>", "http://h/3.html"))
    assert raised.error == "handler-failed: ValueError: no price on http://h/3.html"
    slow = handlers.run(failing, page("<p>", "http://h/5.html"))
    assert slow.error == "handler-failed: took longer than 0.2s"
    assert handlers.run(lambda p: [1], page("<p>")).error == (
        "handler-failed: returned list, not a dict"
    )
    assert "data is not strict JSON: Object of type object" in str(
        handlers.run(lambda p: {"x": object()}, page("<p>")).error
    )
    with pytest.raises(InvalidMessage, match="not one this worker loaded"):
        handlers.chosen("tests.page_handlers:heading")
    assert handlers.chosen(None) is None
    with pytest.raises(ValueError, match="has no function 'nope'"):
        Handlers(["tests.page_handlers:nope"])


STRICT_JSON = "handler-failed: data is not strict JSON: "


def misbehaviour_errors(timeout: float, url: Any = "http://h/{}") -> dict[str, str]:
    """What the step of ``tests.page_handlers:misbehaving`` says on each page it fails."""
    return {
        url.format("1.html"): "handler-failed: SystemExit: 3",
        url.format("2.html"): "handler-failed: KeyboardInterrupt",
        url.format("3.html"): f"{STRICT_JSON}nested deeper than {MAX_DEPTH} levels",
        url.format("4.html"): f"{STRICT_JSON}Out of range float values are not JSON compliant",
        url.format("5.html"): f"{STRICT_JSON}Out of range float values are not JSON compliant",
        url.format("6.html"): f"{STRICT_JSON}'utf-8' codec can't encode character '\\udce9'"
        " in position 14: surrogates not allowed",
        url.format("7.html"): f"handler-failed: took longer than {timeout:g}s",
        url.format("8.html"): "handler-failed: RecursionError: maximum recursion depth exceeded",
        url.format("9.html"): f"handler-failed: took longer than {timeout:g}s",
    }


def test_a_handler_that_exits_recurses_or_returns_what_json_cannot_carry_fails_its_step() -> None:
    handlers = Handlers(["tests.page_handlers:misbehaving"], timeout=1.0)
    misbehaving = handlers.chosen("tests.page_handlers:misbehaving")
    assert misbehaving is not None
    expected = misbehaviour_errors(1.0)
    for name in ("1.html", "2.html", "3.html", "4.html", "5.html", "6.html", "8.html"):
        url = f"http://h/{name}"
        error = handlers.run(misbehaving, page("<p>", url)).error
        assert error is not None and error.startswith(expected[url]), (name, error)
    assert handlers.run(misbehaving, page("<p>", "http://h/0.html")).data == {"ok": True}

    deepest: dict[str, Any] = {}
    for _ in range(MAX_DEPTH - 1):
        deepest = {"a": deepest}
    kept = handlers.run(lambda p: deepest, page("<p>"))
    assert kept.error is None and kept.data == deepest  # MAX_DEPTH levels pass
    circular: dict[str, Any] = {}
    circular["me"] = circular
    assert handlers.run(lambda p: circular, page("<p>")).error == (
        f"{STRICT_JSON}Circular reference detected"
    )


def test_a_handler_blocked_in_c_is_abandoned_at_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = threading.Event()
    monkeypatch.setattr(page_handlers, "STUCK", held)
    handlers = Handlers(["tests.page_handlers:misbehaving"], timeout=0.2)
    misbehaving = handlers.chosen("tests.page_handlers:misbehaving")
    assert misbehaving is not None
    started = time.monotonic()
    try:
        blocked = handlers.run(misbehaving, page("<p>", "http://h/7.html"))
        took = time.monotonic() - started
    finally:
        held.set()
    assert blocked.error == "handler-failed: took longer than 0.2s"
    assert took < 5  # not the 12 s it stays blocked for (the old watchdog's)


def test_a_process_abandons_so_many_handler_calls_then_fails_the_step_at_once() -> None:
    for thread in threading.enumerate():  # calls earlier tests abandoned
        if thread.name.startswith("page-handler "):
            thread.join(timeout=15)
    assert stuck() == 0
    held = threading.Event()

    def holding(p: Page) -> dict[str, Any]:
        held.wait(30)
        return {"late": True}

    handlers = Handlers(timeout=0.01)
    try:
        abandoned = [handlers.run(holding, page("<p>")) for _ in range(MAX_STUCK)]
        assert stuck() == MAX_STUCK
        threads = threading.active_count()
        refused = handlers.run(holding, page("<p>"))
        assert threading.active_count() == threads  # no thread started for it
    finally:
        held.set()
    assert {outcome.error for outcome in abandoned} == {"handler-failed: took longer than 0.01s"}
    assert refused.error == (
        f"handler-failed: {MAX_STUCK} handler calls are still running past their timeout"
        " in this process; not starting another"
    )
    for thread in threading.enumerate():
        if thread.name.startswith("page-handler "):
            thread.join(timeout=15)
    assert stuck() == 0  # returned late, their results dropped
    assert Handlers(timeout=1).run(lambda p: {"x": 1}, page("<p>")).data == {"x": 1}


def strict_records(path: Path) -> list[dict[str, Any]]:
    """The records of an ``--output`` file, read as strict UTF-8 JSON (no NaN nor
    Infinity)."""

    def refused(constant: str) -> None:
        raise AssertionError(f"{constant} in a record")

    text = path.read_bytes().decode("utf-8", errors="strict")
    return [json.loads(line, parse_constant=refused) for line in text.splitlines()]


def test_a_local_crawl_whose_handler_misbehaves_ends_by_itself_with_every_record(
    site: SiteServer, tmp_path: Path
) -> None:
    titled_site(site)
    output = tmp_path / "records.jsonl"
    started = time.monotonic()
    crawled = seed(
        environment(CRAWLER_HANDLER_TIMEOUT="0.3"),
        site.url(page_path(0)),
        "--local",
        "--handler",
        "tests.page_handlers:misbehaving",
        "--records",
        str(output),
    )
    took = time.monotonic() - started

    assert crawled.returncode == 0, crawled.stderr[-3000:]
    assert took < 12  # 9.html's handler never returns, 7.html's in 12 s: neither waited for
    records = {record["url"]: record for record in strict_records(output)}
    assert len(records) == PAGES  # every link followed
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)}  # no retry
    assert all(r["outcome"] == "crawled" for r in records.values())
    errors = {url: r["handler_error"] for url, r in records.items() if "handler_error" in r}
    expected = misbehaviour_errors(0.3, site.url("/page/{}"))
    assert errors.keys() == expected.keys()
    for url, error in errors.items():
        assert error.startswith(expected[url]), (url, error)
        assert records[url]["data"] is None
    assert records[site.url(page_path(0))]["data"] == {"ok": True}
    assert "Traceback" not in crawled.stderr


def test_local_crawl_puts_each_example_handler_s_data_in_the_records(
    site: SiteServer, tmp_path: Path
) -> None:
    titled_site(site)
    for handler in ("examples.titles:title_and_description", "examples.search_text:page_text"):
        output = tmp_path / f"{handler}.jsonl"
        crawled = seed(
            environment(),
            site.url(page_path(0)),
            "--local",
            "--handler",
            handler,
            "--records",
            str(output),
        )
        assert crawled.returncode == 0, crawled.stderr
        records = {record["url"]: record for record in read_records(output)}
        assert len(records) == PAGES
        for i in range(PAGES):
            data = records[site.url(page_path(i))]["data"]
            if handler.startswith("examples.titles"):
                path = page_path(i)
                assert data == {"title": f"Title of {path}", "description": f"About {path}"}
            else:
                assert data["title"] == f"Title of {page_path(i)}"
                assert data["text"].startswith(f"{page_path(i)} link link link")
                assert data["words"] == 4
    assert sum(site.fetch_counts().values()) == 2 * PAGES


def test_a_failing_handler_loses_no_link_retries_no_fetch_and_says_why(
    site: SiteServer, tmp_path: Path
) -> None:
    titled_site(site)
    output = tmp_path / "records.jsonl"
    crawled = seed(
        environment(CRAWLER_HANDLER_TIMEOUT="0.3"),
        site.url(page_path(0)),
        "--local",
        "--handler",
        "tests.page_handlers:failing",
        "--records",
        str(output),
    )

    assert crawled.returncode == 0, crawled.stderr
    records = {record["url"]: record for record in read_records(output)}
    assert len(records) == PAGES  # every link followed
    assert site.fetch_counts() == {page_path(i): 1 for i in range(PAGES)}  # no retry
    errors = {url: r.get("handler_error") for url, r in records.items() if r.get("handler_error")}
    assert errors == {
        site.url(page_path(3)): f"handler-failed: ValueError: no price on {site.url(page_path(3))}",
        site.url(page_path(4)): f"handler-failed: ValueError: no price on {site.url(page_path(4))}",
        site.url(page_path(5)): "handler-failed: took longer than 0.3s",
    }
    assert records[site.url(page_path(0))]["data"] == {"ok": True}


def test_handler_urls_are_followed_within_the_crawl_s_scope(
    site: SiteServer, tmp_path: Path
) -> None:
    titled_site(site, pages=3)
    site.pages["/page/hidden.html"] = SitePage(b"<html><body>hidden</body></html>")
    output = tmp_path / "records.jsonl"
    crawled = seed(
        environment(),
        site.url(page_path(0)),
        "--local",
        "--handler",
        "tests.page_handlers:hidden_links",
        "--max-pages",
        "10",
        "--records",
        str(output),
    )
    assert crawled.returncode == 0, crawled.stderr
    urls = {record["url"] for record in read_records(output)}
    assert site.url("/page/hidden.html") in urls
    assert len(urls) == 4


def handler_links_site(site: SiteServer) -> None:
    titled_site(site, pages=3)
    site.pages["/page/hidden.html"] = SitePage(b"<html><body>hidden</body></html>")


def check_malformed_handler_links_dropped(site: SiteServer, output: Path) -> None:
    """Every page crawled once, the handler's links that cannot be parsed dropped and
    counted in each record, its good one followed."""
    records = {record["url"]: record for record in read_records(output)}
    pages = [*(page_path(i) for i in range(3)), "/page/hidden.html"]
    assert set(records) == {site.url(path) for path in pages}
    assert site.fetch_counts() == {path: 1 for path in pages}  # no retry
    assert {r["outcome"] for r in records.values()} == {"crawled"}
    dropped = len(page_handlers.MALFORMED)
    assert {r["dropped_links"] for r in records.values()} == {dropped}
    assert {json.dumps(r["data"]) for r in records.values()} == {'{"ok": true}'}


def test_a_handler_s_url_that_cannot_be_parsed_is_dropped_and_counted_in_local_mode(
    site: SiteServer, tmp_path: Path
) -> None:
    handler_links_site(site)
    output = tmp_path / "records.jsonl"
    crawled = seed(
        environment(**FAST_FAILURES),
        site.url(page_path(0)),
        "--local",
        "--handler",
        "tests.page_handlers:malformed_follow",
        "--records",
        str(output),
    )
    assert crawled.returncode == 0, crawled.stderr[-3000:]
    assert "Traceback" not in crawled.stderr
    check_malformed_handler_links_dropped(site, output)


def test_a_handler_s_url_that_cannot_be_parsed_is_dropped_and_counted_on_workers(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    handler = "tests.page_handlers:malformed_follow"
    env = environment(**rabbitmq_env, **FAST_FAILURES, CRAWLER_HANDLERS=handler)
    handler_links_site(site)
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        crawled = seed(
            env, site.url(page_path(0)), "--handler", handler, "--wait", "--records", str(output)
        )
    finally:
        assert workers.stop() == 0
    assert crawled.returncode == 0, crawled.stderr[-3000:]
    assert workers.tracebacks() == []
    assert workers.logged_any("Dropped 3 malformed link(s)")
    assert dead_letters(env) == 0
    check_malformed_handler_links_dropped(site, output)


def test_a_local_handler_that_cannot_be_loaded_is_a_usage_error(site: SiteServer) -> None:
    refused = seed(environment(), site.url(page_path(0)), "--local", "--handler", "nope:fn")
    assert refused.returncode == 2
    assert "--handler nope:fn: cannot import 'nope'" in refused.stderr
    malformed = seed(environment(), site.url(page_path(0)), "--handler", "not a name")
    assert malformed.returncode == 2 and "is not a handler's name" in malformed.stderr


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_run_the_handler_a_crawl_chooses_and_refuse_one_they_did_not_load(
    broker_env: str,
    site: SiteServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    memcached: object,
) -> None:
    env = environment(
        **request.getfixturevalue(broker_env),
        **FAST_FAILURES,
        CRAWLER_HANDLERS="examples.titles:title_and_description,tests.page_handlers:heading",
    )
    titled_site(site)
    output = tmp_path / "records.jsonl"
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        chosen = seed(
            env,
            site.url(page_path(0)),
            "--handler",
            "tests.page_handlers:heading",
            "--wait",
            "--records",
            str(output),
        )
        unknown = seed(env, site.url(page_path(0)), "--handler", "tests.page_handlers:failing")
        workers.wait_until(lambda: dead_letters(env) >= 1, timeout=30)
        plain = seed(env, site.url(page_path(1)), "--wait", "-o", str(tmp_path / "plain.jsonl"))
        assert plain.returncode == 0, plain.stderr[-2000:]
    finally:
        assert workers.stop() == 0

    assert chosen.returncode == 0, chosen.stderr[-2000:]
    records = read_records(output)
    assert {r["url"]: r["data"] for r in records} == {
        site.url(page_path(i)): {"h1": page_path(i), "bytes": len(site.pages[page_path(i)].body)}
        for i in range(PAGES)
    }
    assert unknown.returncode == 0
    assert workers.logged_any("handler 'tests.page_handlers:failing' is not one this worker")
    assert all("data" not in r for r in read_records(tmp_path / "plain.jsonl"))
    assert json.dumps(records)  # JSON all through
