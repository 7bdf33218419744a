"""``--cache DIR``: every response kept on disk and given back, with no request, to a
later fetch of the same request (Scrapy's HTTP cache with its DummyPolicy): a second
``--local`` crawl asks the server nothing and makes the same records; workers fill a
cache a ``--local`` crawl then reads; a corrupt entry is fetched again; a message may
name a cache only under its worker's ``CRAWLER_CACHE_DIR``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from crawler.environment import directory_under, limits_from_environment
from crawler.errors import Answered, InvalidMessage, TransientError
from crawler.fetching import Asking, fetch, new_session, read_body
from crawler.fetching.http_cache import HttpCache
from tests.site_server import Page, SiteServer, html
from tests.support import FAST_FAILURES, read_records, waited_crawl
from tests.workers import environment, seed

#: What differs between two crawls of the same pages: timings, message ids, the cache.
VARYING = ("fetch_ms", "elapsed_ms", "message_id", "cached")


def small_site(site: SiteServer) -> None:
    """Five pages, one reached through a redirect, a 404 and a page that is not HTML."""
    site.pages["/"] = html(site.url("/a.html"), site.url("/moved"), site.url("/gone"))
    site.pages["/a.html"] = html(site.url("/"), site.url("/image.png"))
    site.pages["/moved"] = Page(b"", status=302, headers=(("Location", "/b.html"),))
    site.pages["/b.html"] = html(site.url("/a.html"))
    site.pages["/image.png"] = Page(b"PNG", content_type="image/png")


def by_url(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["url"]: {k: v for k, v in r.items() if k not in VARYING} for r in records}


def local_crawl(site: SiteServer, output: Path, *args: str) -> list[dict[str, Any]]:
    records, _ = local_crawl_said(site, output, *args)
    return records


def local_crawl_said(site: SiteServer, output: Path, *args: str) -> tuple[list[Any], str]:
    """A ``--local`` crawl of the site: its records, and what it printed."""
    result = seed(environment(MEMCACHED_SERVERS="127.0.0.1:9"), "--local", site.url("/"),
                  "-o", str(output), *args)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return read_records(output), result.stdout + result.stderr


def test_a_second_local_crawl_with_the_same_cache_asks_the_server_nothing(
    site: SiteServer, tmp_path: Path
) -> None:
    small_site(site)
    cache = str(tmp_path / "cache")
    first = local_crawl(site, tmp_path / "first.jsonl", "--cache", cache)
    assert site.fetch_counts() == {
        p: 1 for p in ("/", "/a.html", "/moved", "/b.html", "/gone", "/image.png")
    }
    assert not any(r.get("cached") for r in first)
    site.requests.clear()
    second, said = local_crawl_said(site, tmp_path / "second.jsonl", "--cache", cache)
    assert site.requests == []
    assert "4 pages fetched" in said and ", 4 from the cache," in said
    assert by_url(second) == by_url(first)
    assert {r["url"] for r in second if r.get("cached")} == {
        site.url(p) for p in ("/", "/a.html", "/moved", "/image.png")
    }  # the 404 is the URL's answer, recorded as such (not the page's record)
    assert {r["outcome"] for r in second} == {"crawled", "not-html", "answered"}


def test_robots_txt_is_always_fetched_the_pages_from_the_cache(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages["/"] = html(site.url("/a.html"))
    site.pages["/a.html"] = html()
    site.pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", content_type="text/plain")
    cache = str(tmp_path / "cache")
    for name in ("first", "second"):
        records = local_crawl(site, tmp_path / f"{name}.jsonl", "--cache", cache, "--obey-robots")
        assert len(records) == 2
    assert site.fetch_counts() == {"/robots.txt": 2, "/": 1, "/a.html": 1}


def test_a_corrupt_entry_is_fetched_again_with_one_warning_and_written_anew(
    site: SiteServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site.pages["/"] = html(site.url("/a.html"))
    cache, limits, url = HttpCache(tmp_path), limits_from_environment(), site.url("/")

    def fetched() -> tuple[bytes, bool]:
        with new_session() as session, fetch(
            session, url, limits, "test", via_public=False, cache=cache
        ) as response:  # fmt: skip
            return read_body(response, limits), response.cached

    body, cached = fetched()
    assert not cached and fetched() == (body, True)
    entry = cache.path(cache.key("GET", url, None))
    entry.write_bytes(entry.read_bytes()[:-5])  # cut short, as a disk could leave it
    with caplog.at_level(logging.WARNING):
        assert fetched() == (body, False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "is corrupt" in warnings[0] and "fetching it again" in warnings[0]
    assert fetched() == (body, True)
    assert site.fetch_counts() == {"/": 2}
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temporary file left


def test_what_says_not_now_is_not_kept_and_a_4xx_is(site: SiteServer, tmp_path: Path) -> None:
    site.pages["/busy"] = Page(b"", status=503)
    site.pages["/gone"] = Page(b"no", status=404)
    cache, limits = HttpCache(tmp_path), limits_from_environment()
    for path, error in (("/busy", TransientError), ("/gone", Answered)) * 2:
        with new_session() as session, pytest.raises(error):
            fetch(session, site.url(path), limits, "test", via_public=False, cache=cache)
    assert site.fetch_counts() == {"/busy": 2, "/gone": 1}


def test_a_message_names_a_cache_only_under_its_worker_s_cache_dir(tmp_path: Path) -> None:
    assert directory_under("cache", tmp_path, "mine") == tmp_path.resolve() / "mine"
    assert directory_under("cache", tmp_path, str(tmp_path / "x")) == tmp_path.resolve() / "x"
    for root, name in ((tmp_path, "../out"), (tmp_path, "/etc"), (None, "mine")):
        with pytest.raises(InvalidMessage, match="CRAWLER_CACHE_DIR"):
            directory_under("cache", root, name)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_fill_the_cache_a_local_crawl_then_reads(
    site: SiteServer, tmp_path: Path, broker_env: str, request: pytest.FixtureRequest
) -> None:
    small_site(site)
    root = tmp_path / "caches"
    broker = request.getfixturevalue(broker_env)
    env = environment(**broker, **FAST_FAILURES, CRAWLER_CACHE_DIR=str(root))
    output = tmp_path / "workers.jsonl"
    waiting, stdout, stderr, _ = waited_crawl(
        env, site.url("/"), "--cache", "shop", "-o", str(output), processes=1, threads=2
    )
    assert waiting.returncode == 0, stdout + stderr
    assert site.fetch_counts()["/"] == 1
    site.requests.clear()
    local = local_crawl(site, tmp_path / "local.jsonl", "--cache", str(root / "shop"))
    assert site.requests == []
    assert by_url(local) == by_url(read_records(output))


def test_a_request_s_method_and_body_name_its_entry(site: SiteServer, tmp_path: Path) -> None:
    site.pages["/api"] = Page(b'{"ok": 1}', content_type="application/json")
    cache, limits = HttpCache(tmp_path), limits_from_environment()
    for body in (b'{"q": "tea"}', b'{"q": "cake"}', b'{"q": "tea"}', None):
        asking = Asking("GET") if body is None else Asking("POST", (), body)
        with new_session() as session:
            fetch(session, site.url("/api"), limits, "t", via_public=False, cache=cache,
                  asking=asking).close()  # fmt: skip
    assert site.asked() == {
        ("POST", "/api", b'{"q": "tea"}'): 1, ("POST", "/api", b'{"q": "cake"}'): 1,
        ("GET", "/api", b""): 1,
    }  # fmt: skip


def test_a_cached_crawl_keeps_its_pages_in_warc_files_too(site: SiteServer, tmp_path: Path) -> None:
    small_site(site)
    cache = str(tmp_path / "cache")
    for name in ("first", "second"):
        records = local_crawl(
            site, tmp_path / f"{name}.jsonl", "--cache", cache, "--warc", str(tmp_path / name)
        )
        assert all(r.get("warc_file") for r in records if r["outcome"] == "crawled")
    assert site.fetch_counts()["/"] == 1
    assert list((tmp_path / "second").glob("*.warc.gz"))


def test_workers_refuse_a_cache_outside_their_cache_dir_or_without_one(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    site.pages["/alone.html"] = html()
    root, elsewhere = tmp_path / "caches", tmp_path / "elsewhere"
    env = environment(**rabbitmq_env, **FAST_FAILURES, CRAWLER_CACHE_DIR=str(root))
    without_root = {key: value for key, value in env.items() if key != "CRAWLER_CACHE_DIR"}
    for worker_env, cache, words in (
        (env, str(elsewhere), "is outside this worker's CRAWLER_CACHE_DIR"),
        (without_root, "mine", "only under its CRAWLER_CACHE_DIR, which is not set"),
    ):
        waiting, stdout, _, workers = waited_crawl(
            worker_env, site.url("/alone.html"), "--cache", cache, threads=2
        )
        assert waiting.returncode == 1  # given up at once, said to the seeder: never lost
        assert words in stdout and workers.count(words) == 1
    assert site.requests == [] and not elsewhere.exists() and not root.exists()
