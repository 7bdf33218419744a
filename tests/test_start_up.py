"""What a process loads: the libraries of options a crawl may not use (sitemaps, the
suffix list, Markdown) load when a page needs them, and redis-py when the broker or
the store is Redis (or an exception meets an ``except`` clause of its classes), not at
every start of the command and of every worker (some 50 ms each of the 0.24-0.3 s of
CPU an import of the worker's module takes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.site_server import Page, SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES
from tests.workers import PROJECT_ROOT, environment

#: The libraries loaded on first use, by the option that needs each.
ON_FIRST_USE = ("usp", "tldextract", "html_to_markdown")
#: And by the service: redis-py, for the Redis broker or a Redis store (its exception
#: classes, on the first exception an ``except`` clause of theirs meets).
WATCHED = (*ON_FIRST_USE, "redis")

#: Runs ``crawler ARGS`` (or, with no ARGS, imports the workers' module), then prints
#: which of :data:`WATCHED` the process loaded.
LOADED = f"""
import json, sys
code = 0
if sys.argv[1:]:
    from crawler.command import main
    code = main()
else:
    import crawler.example
print(json.dumps(sorted(m for m in {WATCHED!r} if m in sys.modules)))
sys.exit(code)
"""


def loaded(*args: str, **env: str) -> list[str]:
    ran = subprocess.run(
        [sys.executable, "-c", LOADED, *args], cwd=PROJECT_ROOT,
        env=environment(**FAST_FAILURES, **env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    return list(json.loads(ran.stdout.splitlines()[-1]))


def test_the_workers_module_loads_none_of_them() -> None:
    assert loaded() == []  # RabbitMQ and Memcached: no redis either


def test_a_worker_on_the_redis_broker_loads_redis(redis_env: dict[str, str]) -> None:
    assert loaded(**redis_env) == ["redis"]


def test_a_crawl_loads_only_what_its_pages_need(site: SiteServer, tmp_path: Path) -> None:
    site.pages.update(generate_site(site.base_url, pages=5, links_per_page=2))
    site.pages["/sitemap.xml"] = Page(
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + f"<url><loc>{site.url(page_path(4))}</loc></url>".encode()
        + b"</urlset>",
        content_type="application/xml",
    )
    seed = site.url(page_path(0))
    assert loaded("crawl", "--local", seed, "--same-domain") == []

    # In this process (one, not forked shards): --same-site, the default, asks the
    # suffix list for a host name's site (not an address's); a sitemap is read and each
    # page made Markdown.
    named = seed.replace("127.0.0.1", "localhost")
    one_process = ["crawl", "--local", named, "--processes", "1", "--sitemaps"]
    markdown = ["--markdown", str(tmp_path / "markdown")]
    assert loaded(*one_process, *markdown) == sorted(ON_FIRST_USE)
    assert list((tmp_path / "markdown").rglob("*.md")), "no Markdown was written"
