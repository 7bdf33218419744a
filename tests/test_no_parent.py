"""``--no-parent``, wget's ``-np``: links below a seed's directory only, on ``--local``
and on workers (the directories travel in every message)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.crawl_spec import CrawlError, CrawlSpec
from crawler.options import CrawlOptions
from tests.site_server import Page, SiteServer
from tests.support import FAST_FAILURES, read_records
from tests.workers import WorkerProcesses, environment, seed


def serve(site: SiteServer) -> str:
    links = "".join(
        f'<a href="{site.url(path)}">x</a>'
        for path in ("/docs/b.html", "/docs/sub/c.html", "/other.html", "/", "/docsx.html")
    )
    site.pages["/docs/a.html"] = Page(links.encode())
    for path in ("/docs/b.html", "/docs/sub/c.html", "/other.html", "/", "/docsx.html"):
        site.pages[path] = Page(b"<p>leaf</p>")
    return site.url("/docs/a.html")


FETCHED = {"/docs/a.html", "/docs/b.html", "/docs/sub/c.html"}


def test_the_directories_are_the_seeds_up_to_their_last_slash() -> None:
    spec = CrawlSpec.from_options(
        ["http://a.example/docs/intro.html", "http://a.example/docs", "https://b.example/"],
        {"no_parent": True},
    )
    assert spec.options.below == (
        "http://a.example/docs/",
        "http://a.example/",
        "https://b.example/",
    )
    assert CrawlOptions.from_message(spec.options.to_message()).below == spec.options.below
    many = [f"http://a.example/{n}/x.html" for n in range(33)]
    with pytest.raises(CrawlError, match="--no-parent: the seeds are in more than 32"):
        CrawlSpec.from_options(many, {"no_parent": True})


def test_a_local_crawl_never_goes_up(site: SiteServer, tmp_path: Path) -> None:
    output = tmp_path / "pages.jsonl"
    done = seed(environment(), serve(site), "--local", "--no-parent", "-o", str(output))
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(site.fetch_counts()) == FETCHED
    assert len(read_records(output)) == 3


def test_workers_never_go_up(
    site: SiteServer, rabbitmq_env: dict[str, str], tmp_path: Path, memcached: object
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    workers = WorkerProcesses(env, processes=1, threads=2)
    try:
        done = seed(env, serve(site), "--no-parent", "--wait")
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        assert workers.stop() == 0
    assert set(site.fetch_counts()) == FETCHED
