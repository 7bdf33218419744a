"""``-i FILE`` / ``-i -``: seeds a line each, with those of the command line, for
``--local`` and for workers; a file with bad lines refused before anything is sent."""

from __future__ import annotations

import os
import resource
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


#: The address space a refused input's command runs in: reading ``/dev/zero`` whole
#: into memory used to end in a MemoryError there.
MEMORY_CAP = 2 * 1024**3


def crawler_crawl(
    *args: str, stdin: int | None = None, close_stdin: bool = False
) -> subprocess.CompletedProcess[str]:
    """``crawler crawl --local ARGS`` in :data:`MEMORY_CAP` of address space, within a
    timeout (an input waited on for ever fails the test, not the session)."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
        if close_stdin:  # as `crawler crawl -i - <&-`
            os.close(0)

    return subprocess.run(
        [str(BIN / "crawler"), "crawl", "--local", *args],
        stdin=stdin,
        cwd=PROJECT_ROOT,
        env=environment(**NO_SERVICES),
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=limited,
    )


def refused_in_one_line(finished: subprocess.CompletedProcess[str]) -> str:
    """The one line of a usage error, exit status 2 and no traceback checked."""
    assert finished.returncode == 2, finished.stderr
    assert "Traceback" not in finished.stderr, finished.stderr
    assert len(finished.stderr.splitlines()) == 2, finished.stderr
    return usage_error(finished.stderr, "crawler crawl")


def test_an_input_that_is_no_regular_file_is_refused_not_waited_on(
    site: SiteServer, tmp_path: Path
) -> None:
    fifo = tmp_path / "seeds.fifo"
    os.mkfifo(fifo)  # nobody writes to it: opened to read, it would be waited on for ever

    kinds = {fifo: "a FIFO (a named or anonymous pipe)", tmp_path: "a directory"}
    for name, kind in kinds.items():
        said = refused_in_one_line(crawler_crawl("-i", str(name), site.url(page_path(1))))
        assert said == (
            f"crawler crawl: error: -i {name}: {kind}, not a regular file; pipe it to -i - instead"
        )
    assert site.fetch_counts() == {}


def test_an_endless_input_is_refused_at_its_first_long_line_in_bounded_memory(
    site: SiteServer, tmp_path: Path
) -> None:
    said = refused_in_one_line(crawler_crawl("-i", "/dev/zero"))
    assert said.endswith(
        "-i /dev/zero: a character device, not a regular file; pipe it to -i - instead"
    )

    with open("/dev/zero", "rb") as zeros:  # standard input that never ends
        said = refused_in_one_line(crawler_crawl("-i", "-", stdin=zeros.fileno()))
    assert said.endswith("-i -: line 1 is longer than 65,536 bytes"), said

    long_line = tmp_path / "seeds.txt"  # a regular file, its second line too long
    long_line.write_text(site.url(page_path(1)) + "\n" + "x" * 100_000 + "\n")
    said = refused_in_one_line(crawler_crawl("-i", str(long_line)))
    assert said.endswith(f"-i {long_line}: line 2 is longer than 65,536 bytes"), said
    assert site.fetch_counts() == {}


def test_standard_input_closed_is_refused_in_one_line() -> None:
    said = refused_in_one_line(crawler_crawl("-i", "-", close_stdin=True))

    assert said == "crawler crawl: error: -i -: standard input is closed"


def test_a_seed_file_starting_with_a_byte_order_mark_is_read_from_its_first_line(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    seeds = tmp_path / "seeds.txt"  # as Notepad saves UTF-8
    seeds.write_bytes(b"\xef\xbb\xbf" + f"{site.url(page_path(2))}\r\n".encode())

    for given in (["-i", str(seeds)], ["-i", "-"]):
        with seeds.open("rb") as file:
            crawled = crawler_crawl(*given, "--max-depth", "0", stdin=file.fileno())
        assert crawled.returncode == 0, crawled.stderr
    assert fetched_pages(site) == {page_path(2): 2}
