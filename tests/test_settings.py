"""``--config FILE`` and ``-s NAME=VALUE``: a crawl's options kept in a TOML file, each
checked as its flag is; the command line wins over ``-s``, ``-s`` over the file."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.cli.parser import Parser, add_seeding
from crawler.cli.settings import add_settings, parse_args
from tests.site_server import SiteServer, generate_site, page_path
from tests.workers import environment, seed


def crawl_parser() -> Parser:
    parser = Parser(prog="crawler crawl")
    add_seeding(parser, upstream=False)
    add_settings(parser)
    return parser


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        parse_args(crawl_parser(), args)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 2 and "See 'crawler crawl --help'." in error  # one line
    return error.splitlines()[0]


def test_a_file_s_options_are_the_defaults_the_command_line_overrides(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(
        'max-pages = 3\nmax-depth = 2\nobey-robots = false\nexclude = ["/print/", "\\\\.pdf$"]\n'
        'user-agent = "mine/1.0"\nno-same-site = true\nmax-rate = 2.5\n'
    )
    arguments = parse_args(crawl_parser(), ["http://127.0.0.1/", "--config", str(config)])
    assert (arguments.max_pages, arguments.max_depth, arguments.max_rate) == (3, 2, 2.5)
    assert arguments.obey_robots is False and arguments.same_site is False
    assert arguments.exclude == ["/print/", "\\.pdf$"] and arguments.user_agent == "mine/1.0"

    line = ["http://127.0.0.1/", "--config", str(config), "--max-pages", "7", "--exclude", "x"]
    overridden = parse_args(crawl_parser(), [*line, "-s", "max-depth=5", "-s", "obey-robots=true"])
    assert (overridden.max_pages, overridden.max_depth) == (7, 5)
    assert overridden.exclude == ["x"]  # the command line's list, not both
    assert overridden.obey_robots is True
    assert parse_args(crawl_parser(), ["http://127.0.0.1/"]).max_pages is None


def test_unknown_keys_and_bad_values_are_refused_in_one_line_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("max-page = 3\n")
    assert f"--config {config}: 'max-page' is not a crawl option (did you mean 'max-pages'?)" in (
        refused(["--config", str(config)], capsys)
    )
    config.write_text("max-pages = -1\n")
    assert f"--config {config}: max-pages: " in refused(["--config", str(config)], capsys)
    config.write_text('max-pages = "many"\n')
    assert "max-pages: " in refused(["--config", str(config)], capsys)
    config.write_text("obey-robots = 1\n")
    assert "obey-robots: 1 is not true or false" in refused(["--config", str(config)], capsys)
    config.write_text('exclude = "x"\n')
    assert "exclude: a list of values" in refused(["--config", str(config)], capsys)
    config.write_text("max-pages = [\n")
    assert "not TOML" in refused(["--config", str(config)], capsys)
    assert "No such file or directory" in refused(["--config", str(tmp_path / "none")], capsys)
    assert "-s help=1: 'help' is not a crawl option" in refused(["-s", "help=1"], capsys)
    assert "-s max-pages: not NAME=VALUE" in refused(["-s", "max-pages"], capsys)
    assert "-s max-pages=x: max-pages: " in refused(["-s", "max-pages=x"], capsys)


def test_a_crawl_runs_with_its_settings_file_on_both_command_lines(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    config = tmp_path / "crawl.toml"
    config.write_text("max-pages = 2\nthreads = 1\n")
    url = site.url(page_path(0))
    upstream = seed(environment(), url, "--local", "--config", str(config), "-s", "max-pages=3")
    assert upstream.returncode == 0, upstream.stderr
    assert upstream.stdout.startswith("Finished") and " 3 pages fetched" in upstream.stdout
    crawler = Path(sys.executable).parent / "crawler"
    command = [str(crawler), "crawl", "--local", url, "--config", str(config)]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    assert " 2 pages fetched" in ran.stdout


#: The address space ``crawler crawl`` runs in here: reading ``/dev/zero`` whole into
#: memory used to end in a MemoryError there.
MEMORY_CAP = 2 * 1024**3


def crawler_crawl(*args: str) -> subprocess.CompletedProcess[str]:
    """``crawler crawl --local ARGS`` in :data:`MEMORY_CAP` of address space, within a
    timeout (a file waited on for ever fails the test, not the session)."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    crawler = Path(sys.executable).parent / "crawler"
    return subprocess.run(
        [str(crawler), "crawl", "--local", *args],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=limited,
        check=False,
    )


def refused_in_one_line(finished: subprocess.CompletedProcess[str]) -> str:
    """The one line of a usage error, exit status 2 and no traceback checked."""
    assert finished.returncode == 2, finished.stderr
    assert "Traceback" not in finished.stderr, finished.stderr
    lines = finished.stderr.splitlines()
    assert len(lines) == 2 and lines[1] == "See 'crawler crawl --help'.", finished.stderr
    return lines[0]


def test_a_settings_file_is_read_with_bounds_and_refused_in_one_line(
    site: SiteServer, tmp_path: Path
) -> None:
    url = site.url(page_path(0))
    deep = tmp_path / "deep.toml"  # the parser recurses: a RecursionError, once
    deep.write_text("header = " + "[" * 20_000 + "]" * 20_000 + "\n")
    said = refused_in_one_line(crawler_crawl(url, "--config", str(deep)))
    assert said.endswith(f"--config {deep}: arrays or tables nested too deep"), said

    nested = "[" * 20_000 + "]" * 20_000
    said = refused_in_one_line(crawler_crawl(url, "-s", f"header={nested}"))
    assert said.endswith(": arrays or tables nested too deep") and len(said) < 200, said

    said = refused_in_one_line(crawler_crawl(url, "--config", "/dev/zero"))
    assert said.endswith("--config /dev/zero: a character device, not a regular file"), said

    fifo = tmp_path / "crawl.fifo"
    os.mkfifo(fifo)  # nobody writes to it: opened to read, it would be waited on for ever
    said = refused_in_one_line(crawler_crawl(url, "--config", str(fifo)))
    assert said.endswith(f"--config {fifo}: a FIFO (a named or anonymous pipe), not a regular file")

    large = tmp_path / "large.toml"  # a regular file past the cap: not read whole
    large.write_text("# a comment\n" * 100_000)
    said = refused_in_one_line(crawler_crawl(url, "--config", str(large)))
    assert said.endswith(f"--config {large}: larger than 1,048,576 bytes"), said
    assert site.fetch_counts() == {}


def test_a_settings_file_starting_with_a_byte_order_mark_is_read_and_dev_null_taken(
    site: SiteServer, tmp_path: Path
) -> None:
    site.pages.update(generate_site(site.base_url, pages=10, links_per_page=3))
    config = tmp_path / "crawl.toml"  # as Notepad saves UTF-8
    config.write_bytes(b"\xef\xbb\xbfmax-pages = 2\r\nthreads = 1\r\n")

    crawled = crawler_crawl(site.url(page_path(0)), "--config", str(config))

    assert crawled.returncode == 0, crawled.stderr
    assert " 2 pages fetched" in crawled.stdout
    nothing = crawler_crawl(site.url(page_path(0)), "--config", os.devnull, "--max-pages", "1")
    assert nothing.returncode == 0, nothing.stderr  # the one device taken: read as empty
