"""Page handlers (``--handler``): on workers and ``--local``, what they return goes into
each page's record; a handler that fails fails that page's handler step only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawler.errors import InvalidMessage
from crawler.handlers import Handlers, Page
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
    assert handlers.run(lambda p: [1], page("<p>")).error == (  # type: ignore[arg-type, return-value]
        "handler-failed: returned list, not a dict"
    )
    assert "not JSON" in str(handlers.run(lambda p: {"x": object()}, page("<p>")).error)
    with pytest.raises(InvalidMessage, match="not one this worker loaded"):
        handlers.chosen("tests.page_handlers:heading")
    assert handlers.chosen(None) is None
    with pytest.raises(ValueError, match="has no function 'nope'"):
        Handlers(["tests.page_handlers:nope"])


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
            "-o",
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
        "-o",
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
        "-o",
        str(output),
    )
    assert crawled.returncode == 0, crawled.stderr
    urls = {record["url"] for record in read_records(output)}
    assert site.url("/page/hidden.html") in urls
    assert len(urls) == 4


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
            "-o",
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
