"""The docs say what the code does: every option of every command's ``--help`` is in
docs/usage.md, every field a record can hold is in docs/output.md, and the README
stays a page a newcomer reads."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

from crawler import cli, records
from crawler import command as commands
from tests.site_server import Page, SiteServer, html
from tests.workers import BIN, PROJECT_ROOT, environment

DOCS = PROJECT_ROOT / "docs"


def options_of(parser: argparse.ArgumentParser) -> set[str]:
    """The long options of ``parser`` and of its subcommands, but --help."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= options_of(sub)
        found |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
    return found


def test_every_option_of_every_command_is_in_the_usage_page() -> None:
    usage = (DOCS / "usage.md").read_text()
    options = options_of(cli.parser()) | options_of(commands.parser())
    assert len(options) > 30
    undocumented = sorted(o for o in options if not re.search(rf"`{re.escape(o)}[ `=/]", usage))
    assert undocumented == []


def test_every_subcommand_is_in_the_usage_page() -> None:
    usage = (DOCS / "usage.md").read_text()
    choices = next(
        a for a in commands.parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices
    assert sorted(c for c in choices if f"crawler {c}" not in usage) == []


def test_every_record_field_is_in_the_output_page() -> None:
    output = (DOCS / "output.md").read_text()
    assert sorted(f for f in records.RECORD_FIELDS if f"| `{f}` |" not in output) == []


def test_the_records_of_a_crawl_hold_only_documented_fields(
    site: SiteServer, tmp_path: Path
) -> None:
    """A crawl meeting each kind of page: HTML with a malformed link, not HTML, a
    failure, kept in WARC files; JSON lines and CSV alike."""
    site.pages["/"] = html(
        site.url("/image.png"), site.url("/gone.html"), "http://[bad/", site.url("/a.html")
    )
    site.pages["/a.html"] = html(site.url("/"))
    site.pages["/image.png"] = Page(b"PNG", content_type="image/png")
    fields: set[str] = set()
    for name in ("records.jsonl", "records.csv"):
        output = tmp_path / name
        crawl = subprocess.run(
            [str(BIN / "crawler"), "crawl", "--local", site.url("/"), "-o", str(output),
             "--warc", str(tmp_path / f"warc-{name}")],
            cwd=tmp_path, env=environment(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert crawl.returncode == 1, crawl.stderr  # the page that is gone failed
        if name.endswith(".jsonl"):
            lines = [json.loads(line) for line in output.read_text().splitlines()]
            assert {r["outcome"] for r in lines} == {"crawled", "not-html", "failed"}
            fields |= {key for record in lines for key in record}
        else:
            header, *rows = output.read_text().splitlines()
            assert header.split(",") == list(records.RECORD_FIELDS)
            assert len(rows) == 4
    assert fields - set(records.RECORD_FIELDS) == set()
    assert {"warc_file", "dropped_links", "error", "message_id"} <= fields


def test_records_on_standard_output_leave_it_to_them(site: SiteServer, tmp_path: Path) -> None:
    site.pages["/"] = html(site.url("/a.html"))
    site.pages["/a.html"] = html()
    crawl = subprocess.run(
        [str(BIN / "crawler"), "crawl", "--local", site.url("/"), "-o", "-"],
        cwd=tmp_path, env=environment(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr
    assert sorted(json.loads(line)["url"] for line in crawl.stdout.splitlines()) == [
        site.url("/"),
        site.url("/a.html"),
    ]
    assert "2 pages fetched" in crawl.stderr
    assert not (tmp_path / "-").exists()


def test_the_readme_is_a_page_a_newcomer_reads_and_links_every_doc() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "scripts/crawl" in readme and "scripts/test" in readme
    for page in DOCS.glob("*.md"):
        assert f"(docs/{page.name})" in readme, page.name


@pytest.mark.parametrize("command", [["--version"], ["crawl", "--help"], ["worker", "--help"]])
def test_the_crawler_command_answers(command: list[str]) -> None:
    result = subprocess.run(
        [str(BIN / "crawler"), *command], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
