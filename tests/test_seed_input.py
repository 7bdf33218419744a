"""``-i FILE`` / ``-i -``: seeds a line each, with those of the command line, for
``--local`` and for workers; a file with bad lines refused before anything is sent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.site_server import SiteServer, generate_site, page_path
from tests.support import usage_error
from tests.workers import BIN, PROJECT_ROOT, WorkerProcesses, environment, queued_messages, seed

#: Services nothing listens on: a --local crawl never needs them.
NO_SERVICES = {
    "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:9",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "MEMCACHED_SERVERS": "127.0.0.1:9",
}


def seed_file(tmp_path: Path, site: SiteServer, *pages: int, extra: str = "") -> Path:
    """A seed file of ``pages``, with a comment and a blank line among them."""
    lines = ["# the seeds of this test", site.url(page_path(pages[0])), ""]
    lines += [f"  {site.url(page_path(page))}  " for page in pages[1:]]
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def fetched_pages(site: SiteServer) -> dict[str, int]:
    return {path: n for path, n in site.fetch_counts().items() if path.startswith("/page/")}


def test_a_seed_file_and_the_command_lines_urls_are_crawled_locally(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    seeds = seed_file(tmp_path, site, 1, 3, 5)

    crawled = seed(
        environment(**NO_SERVICES),
        "--local",
        "-i",
        str(seeds),
        site.url(page_path(7)),
        "--max-depth",
        "0",
    )

    assert crawled.returncode == 0, crawled.stderr
    assert site.fetch_counts() == {page_path(i): 1 for i in (1, 3, 5, 7)}
    assert ": 4 pages fetched" in crawled.stdout


def test_seeds_from_standard_input(site: SiteServer) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    lines = ["# from stdin", "", *(site.url(page_path(i)) for i in (2, 4, 6))]

    crawled = subprocess.run(
        [str(BIN / "crawler"), "crawl", "--local", "-i", "-", "--max-depth", "0"],
        input="\n".join(lines) + "\n",
        cwd=PROJECT_ROOT,
        env=environment(**NO_SERVICES),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert crawled.returncode == 0, crawled.stderr
    assert fetched_pages(site) == {page_path(i): 1 for i in (2, 4, 6)}


def test_a_seed_file_with_bad_lines_is_refused_and_nothing_is_sent(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    seeds = seed_file(tmp_path, site, 1, 2, extra="example.com/x\nftp://127.0.0.1/f\n")
    env = environment(**rabbitmq_env)

    for local in ([], ["--local"]):
        refused = seed(env, *local, "-i", str(seeds), site.url(page_path(3)))

        assert refused.returncode == 2, refused.stderr
        said = usage_error(refused.stderr)
        assert said.startswith(f"python -m crawler.example: error: -i {seeds}: line 5: "), said
        assert "'example.com/x' is not an http:// or https:// URL" in said
        assert "line 6: 'ftp://127.0.0.1/f' is not an http" in said
        assert refused.stdout == ""
    assert queued_messages(env) == 0
    assert site.fetch_counts() == {}


def test_workers_fetch_every_seed_of_a_file_with_wait(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    site.pages.update(generate_site(site.base_url, pages=40, links_per_page=3))
    pages = range(0, 40, 2)
    seeds = seed_file(tmp_path, site, *pages)
    env = environment(**rabbitmq_env)
    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        waited = seed(env, "-i", str(seeds), "--wait", "--max-depth", "0")
    finally:
        assert workers.stop() == 0

    assert waited.returncode == 0, waited.stderr
    assert f"seeded with {len(pages)} URL(s)" in waited.stdout
    assert f"{len(pages)} pages fetched" in waited.stdout
    assert site.fetch_counts() == {page_path(i): 1 for i in pages}
    assert queued_messages(env) == 0


def test_the_flag_is_in_both_commands_help() -> None:
    for command in ([sys.executable, "-m", "crawler.example"], [str(BIN / "crawler"), "crawl"]):
        shown = subprocess.run(
            [*command, "--help"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60
        )
        assert "-i FILE, --input-file FILE" in shown.stdout, shown.stdout
