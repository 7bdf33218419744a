"""Usage errors that point to the fix: the closest option, the scheme left out; files
a crawl would read for ever or write over, refused in one line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crawler import cli, command
from tests.site_server import SiteServer, generate_site, page_path
from tests.support import usage_error
from tests.workers import BIN, PROJECT_ROOT, environment


def error_of(parse: object, args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        parse(args)  # type: ignore[operator]
    assert exited.value.code == 2
    return capsys.readouterr().err.splitlines()[0]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (
            ["crawl", "http://127.0.0.1/", "--max-page", "3"],
            "--max-page 3 (did you mean --max-pages?)",
        ),
        (["crawl", "http://127.0.0.1/", "-O", "x"], "-O x (did you mean -o?)"),
        (["crawl", "example.com/docs"], "(did you mean 'https://example.com/docs'?)"),
        (["crawl", "localhost:8000/"], "(did you mean 'https://localhost:8000/'?)"),
    ],
)
def test_crawler_crawl_says_what_was_meant(
    args: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert error_of(command.parser().parse_args, args, capsys).endswith(hint)


def test_no_hint_where_nothing_is_close(capsys: pytest.CaptureFixture[str]) -> None:
    said = error_of(command.parser().parse_args, ["crawl", "mailto:a@b.c", "--zzzz"], capsys)
    assert "did you mean" not in said
    said = error_of(
        cli.seeder_parser().parse_args, ["http://127.0.0.1/", "--max-dept", "2"], capsys
    )
    assert said.endswith("(did you mean --max-depth?)")


#: Services nothing listens on: a --local crawl never needs them.
NO_SERVICES = {
    "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:9",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "MEMCACHED_SERVERS": "127.0.0.1:9",
}


def crawler_crawl(*args: str) -> subprocess.CompletedProcess[str]:
    """``crawler crawl --local ARGS``, within a timeout (a file waited on for ever fails
    the test, not the session)."""
    return subprocess.run(
        [str(BIN / "crawler"), "crawl", "--local", *args],
        cwd=PROJECT_ROOT,
        env=environment(**NO_SERVICES),
        capture_output=True,
        text=True,
        timeout=30,
    )


def refused_in_one_line(finished: subprocess.CompletedProcess[str]) -> str:
    """The one line of a usage error, exit status 2 and no traceback checked."""
    assert finished.returncode == 2, finished.stderr
    assert "Traceback" not in finished.stderr, finished.stderr
    assert len(finished.stderr.splitlines()) == 2, finished.stderr
    return usage_error(finished.stderr, "crawler crawl")


def test_output_and_items_in_one_file_are_refused(site: SiteServer, tmp_path: Path) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    url = site.url(page_path(0))
    handler = ["--handler", "tests.item_handlers:three_items"]
    both = tmp_path / "both.jsonl"
    (tmp_path / "link.jsonl").symlink_to(both)
    both.write_text("")  # there: the link names it
    named = [
        (str(both), str(both)),
        (str(tmp_path / "link.jsonl"), str(both)),  # one file by two names
        ("-", "/dev/stdout"),
        ("-", "-"),
    ]

    for output, items in named:
        said = refused_in_one_line(crawler_crawl(url, *handler, "-o", output, "--items", items))
        assert said == (
            f"crawler crawl: error: -o {output} and --items {items} are one file, where their"
            " lines would mix: give each a file of its own"
        )
    assert site.fetch_counts() == {} and both.read_text() == ""

    apart = crawler_crawl(url, *handler, "-o", str(both), "--items", str(tmp_path / "items.jsonl"))
    assert apart.returncode == 0, apart.stderr
    assert crawler_crawl(url, *handler, "-o", "/dev/null", "--items", "/dev/null").returncode == 0


def test_an_output_on_the_seed_file_is_refused_and_the_seeds_kept(
    site: SiteServer, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(site.url(page_path(1)) + "\n")

    said = refused_in_one_line(crawler_crawl("-i", str(seeds), "-o", str(seeds)))

    assert said == (
        f"crawler crawl: error: -o {seeds} is the -i file: writing it would lose the seeds it"
        " holds; give -o a file of its own"
    )
    assert seeds.read_text() == site.url(page_path(1)) + "\n"
    assert site.fetch_counts() == {}


def test_earlier_records_that_are_no_regular_file_are_refused_not_waited_on(
    site: SiteServer, tmp_path: Path
) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)  # nobody writes to it: opened to read, it would be waited on for ever

    said = refused_in_one_line(crawler_crawl("--recrawl-from", str(fifo), site.url(page_path(1))))

    assert said == (
        f"crawler crawl: error: --recrawl-from {str(fifo)!r}: a FIFO (a named or anonymous"
        " pipe), not a regular file"
    )
    assert site.fetch_counts() == {}
