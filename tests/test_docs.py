"""The docs say what the code does: every option of every command's ``--help`` is in
docs/usage.md, every field a record can hold is in docs/output.md, and the README
stays a page a newcomer reads."""

from __future__ import annotations

import contextlib
import inspect
import io
import itertools
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from crawler import Crawl, cli, crawl_spec, outcomes, records
from crawler import command as commands
from crawler.cli import command as cli_command
from crawler.cli.parser import Parser
from crawler.crawl_spec import CrawlError, CrawlSpec
from crawler.option_table import TABLE, Option
from crawler.records import PageRecord
from tests.site_server import Page, SiteServer, html
from tests.workers import BIN, PROJECT_ROOT, environment

DOCS = PROJECT_ROOT / "docs"


def options_of(parser: Parser) -> set[str]:
    """The long options of ``parser`` and of its subcommands, but --help."""
    return {o for o in parser.all_option_names() if o.startswith("--") and o != "--help"}


def test_every_option_of_every_command_is_in_the_usage_page() -> None:
    usage = (DOCS / "usage.md").read_text()
    options = options_of(cli.seeder_parser()) | options_of(commands.parser())
    assert len(options) > 30
    undocumented = sorted(o for o in options if not re.search(rf"`{re.escape(o)}[ `=/]", usage))
    assert undocumented == []


def test_every_subcommand_is_in_the_usage_page() -> None:
    usage = (DOCS / "usage.md").read_text()
    choices = commands.parser().subcommands
    assert sorted(c for c in choices if f"crawler {c}" not in usage) == []


def test_every_record_field_is_in_the_output_page() -> None:
    output = (DOCS / "output.md").read_text()
    assert sorted(f for f in records.RECORD_FIELDS if f"| `{f}` |" not in output) == []


def documented_record_fields() -> set[str]:
    """The fields the table of docs/output.md lists (a row may name several)."""
    output = (DOCS / "output.md").read_text()
    table = output.split("| field | in | meaning |\n", 1)[1].split("\n\n", 1)[0]
    rows = table.splitlines()[1:]  # under the header's rule
    return {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}


def test_the_output_page_lists_exactly_the_fields_a_record_is_typed_with() -> None:
    typed = PageRecord.__required_keys__ | PageRecord.__optional_keys__
    # ``sent`` goes to the seeder only, which takes it off: no output holds it.
    assert documented_record_fields() == typed - {"sent"}
    assert set(records.PAGE_FIELDS) <= typed
    assert set(records.RECORD_FIELDS) <= typed


def test_the_records_of_a_crawl_hold_only_documented_fields(
    site: SiteServer, tmp_path: Path
) -> None:
    """A crawl meeting each kind of page: HTML with a malformed link, not HTML, a 4xx
    answer, a failure, kept in WARC files; JSON lines and CSV alike."""
    site.pages["/"] = html(
        site.url("/image.png"), site.url("/gone.html"), "http://[bad/", site.url("/a.html"),
        site.url("/broken.html"),
    )  # fmt: skip
    site.behaviors["/broken.html"] = lambda handler, nth: handler.send_error(500)
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
        assert crawl.returncode == 1, crawl.stderr  # the broken page failed (the gone one answered)
        if name.endswith(".jsonl"):
            lines = [json.loads(line) for line in output.read_text().splitlines()]
            assert {r["outcome"] for r in lines} == {"crawled", "not-html", "answered", "failed"}
            fields |= {key for record in lines for key in record}
        else:
            header, *rows = output.read_text().splitlines()
            assert header.split(",") == list(records.RECORD_FIELDS)
            assert len(rows) == 5
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


#: What the docs write for a value a reader fills in, and a value of that kind.
PLACEHOLDERS = {
    "URL": "http://127.0.0.1:8000/",
    "URL...": "http://127.0.0.1:8000/",
    "ID": "5c0e" + "0" * 28,
    "CRAWL_ID": "5c0e" + "0" * 28,
    "N": "2",
    "FILE": "pages.jsonl",
    "DIR": "crawl-dir",
    "PORT": "8501",
    "R": "5",
    "RE": "/docs/",
    "REGEX": "/docs/",
    "D": "example.org",
    "DOMAIN": "example.org",
    "UA": "a-bot/1.0",
    "MODULE:FUNCTION": "examples.titles:title_and_description",
    "ADDRESS": "127.0.0.1",
    "SECONDS": "5",
}


def documented_command_lines() -> list[tuple[str, str]]:
    """Every ``crawler ...`` command line of the README and docs/*.md, with the page it
    is on: the lines of code blocks (a ``$`` prompt, variables set in front, ``\\``
    continuations and ``#`` comments allowed), and the code spans of the prose that
    hold more than ``crawler SUBCOMMAND``, a name. Usage synopses (``[-o FILE]``,
    ``a | b``) are left out: they are not meant to be run as written."""
    found = []
    for page in [PROJECT_ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = page.read_text()
        lines: list[str] = []
        for block in re.findall(r"^ *```[^\n]*\n(.*?)^ *```", text, re.M | re.S):
            lines += re.sub(r"\\\n\s*", " ", block).splitlines()
        prose = re.sub(r"^ *```.*?^ *```", "", text, flags=re.M | re.S).replace("\n", " ")
        spans = [
            _without_variables(s) for s in re.findall(r"`((?:\w+=\S* )*crawler [^`]+)`", prose)
        ]
        lines += [s for s in spans if len(s.split()) > 2 or s.split()[1].startswith("-")]
        for line in map(_without_variables, lines):
            if line.startswith("crawler ") and not re.search(r"(^|\s)\[|\s\|\s", line):
                found.append((page.name, line))
    return found


def _without_variables(line: str) -> str:
    """A command line without its prompt (``$``) and the variables set in front of it."""
    line = re.sub(r"^\s*\$ ", "", line).strip()
    return re.sub(r"^(\w+=\S* )+", "", line)


def parse_as_the_command_does(line: str) -> str | None:
    """None when ``crawler`` parses the command ``line`` (placeholders filled in), else
    what it says."""
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(line, comments=True)[1:]]
    words = [w[:-1] + "0" * (33 - len(w)) if w.endswith("…") else w for w in words]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            commands.parser().parse_args([w for w in words if w not in ("...", "…")])
    except SystemExit as e:
        if e.code != 0 or not {"--version", "--help"} & set(words):
            return said.getvalue().strip() or f"exit {e.code}"
    return None


def test_every_documented_crawler_command_line_parses() -> None:
    """The commands the docs show are ones ``crawler`` takes: no upstream flag given to
    a subcommand (``crawler crawl --status ID``), no option that is not there, no
    subcommand without its crawl id."""
    lines = documented_command_lines()
    assert len(lines) > 40, lines  # the extraction finds the commands it should
    assert {page for page, _ in lines} >= {
        "README.md",
        "usage.md",
        "output.md",
        "fleet.md",
        "coming-from.md",
    }
    refused = [
        (page, line, said) for page, line in lines if (said := parse_as_the_command_does(line))
    ]
    assert refused == []


@pytest.mark.parametrize(
    "line",
    [
        "crawler crawl --status 5c0e…",  # upstream's flag, not crawler crawl's
        "crawler crawl URL --no-such-option",
        "crawler status",  # its crawl id missing
        "crawler crawl URL --max-d 3",  # never abbreviated
        "crawler worker --processes 0",
    ],
)
def test_a_command_line_crawler_refuses_is_caught(line: str) -> None:
    assert parse_as_the_command_does(line) is not None


def synopsis_of(text: str, subcommand: str) -> str:
    """The line of the ``crawler`` synopsis in ``text`` (a README code block, a
    docstring) that begins with ``crawler SUBCOMMAND``, and the lines that go on with it
    (up to a blank one or the next ``crawler``)."""
    lines = [line.strip() for line in text.splitlines()]
    starts = [n for n, line in enumerate(lines) if line.startswith(f"crawler {subcommand} ")]
    if not starts:
        return ""
    found = [lines[starts[0]]]
    for line in lines[starts[0] + 1 :]:
        if not line or line.startswith("crawler"):
            break
        found.append(line)
    return " ".join(found)


@pytest.mark.parametrize("subcommand", ["worker", "dashboard"])
def test_the_synopses_name_every_flag_of_a_subcommand(subcommand: str) -> None:
    """The README's synopsis of ``crawler`` and :mod:`crawler.cli.command`'s name every
    flag ``crawler worker`` and ``crawler dashboard`` take, as their usage does."""
    usage = commands.parser().subcommands[subcommand].format_usage()
    flags = set(re.findall(r"\[(-[\w-]+)", usage)) - {"-h"}
    assert flags
    for name, text in [
        ("README.md", (PROJECT_ROOT / "README.md").read_text()),
        ("crawler/cli/command.py", cli_command.__doc__ or ""),
    ]:
        synopsis = synopsis_of(text, subcommand)
        named = set(re.findall(r"\[(-[\w-]+)[ \]]", synopsis))
        assert sorted(flags - named) == [], (name, synopsis)


#: A value each crawl option takes, for :func:`refusals`: FILE is a file of seeds.
SAMPLE_VALUES = {
    "allow_domain": "example.org", "include": "/docs/", "exclude": "/docs/", "accept": "pdf",
    "reject": "jpg",
    "follow": "handlers", "max_depth": "2", "max_pages": "2", "max_pages_per_host": "2",
    "max_rate": "5", "max_per_host": "2", "user_agent": "a-bot/1.0",
    "handler": "examples.titles:title_and_description", "handler_timeout": "1", "warc": "DIR",
    "pipeline": "examples.shop_pipelines:at_least_ten",
    "cache": "DIR", "files": "DIR", "markdown": "DIR", "near_duplicates": "mark",
    "header": "A: 1", "cookies": "off", "proxy": "http://127.0.0.1:3128", "timeout": "5",
    "retries": "1", "auth_env": "example.org=CRAWLER_AUTH_X", "render": "auto", "render_wait": "2",
    "input_file": "FILE", "recrawl_from": "FILE", "recrawl_warc": "DIR",
    "crawl_id": "5c0e" + "0" * 28, "log_level": "INFO", "log_file": "FILE",
    "stats": "FILE", "threads": "1", "processes": "2", "state": "DIR",
    "output": "FILE", "records": "FILE", "items": "FILE", "dashboard": "8501",
}  # fmt: skip


def refusals(options: tuple[Option, ...]) -> dict[str, tuple[str, ...]]:
    """Every refusal a crawl of one to three of ``options`` (each given its sample
    value) meets, and the options that met it first; numbers after a flag said as N."""
    found: dict[str, tuple[str, ...]] = {}
    for count in (1, 2, 3):
        for combination in itertools.combinations(options, count):
            given = {o.name: True if o.switch else SAMPLE_VALUES[o.name] for o in combination}
            try:
                CrawlSpec.from_options(["http://127.0.0.1:8000/"], given)
            except CrawlError as e:
                said = re.sub(r"(--[a-z-]+) \d+\b", r"\1 N", str(e))
                found.setdefault(said, tuple(given))
    return found


def test_every_refusal_of_options_together_is_in_the_usage_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each line ``crawler crawl`` refuses options together in (or one without the one
    it needs) is quoted in docs/usage.md: found by giving every one, two and three crawl
    options at once, on Linux and elsewhere."""
    assert {o.name for o in TABLE if not o.switch} == set(SAMPLE_VALUES)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("http://127.0.0.1:8000/\n")
    found = refusals(TABLE)
    monkeypatch.setattr(crawl_spec, "forks_shards", lambda: False)
    found.update(refusals(tuple(o for o in TABLE if o.name in ("local", "processes"))))
    assert len(found) >= 20, found  # the enumeration reaches them
    usage = " ".join((DOCS / "usage.md").read_text().split())
    assert {said: given for said, given in found.items() if f"`{said}`" not in usage} == {}


def test_every_outcome_is_in_the_output_page() -> None:
    """docs/output.md names every outcome of :mod:`crawler.outcomes` in its table
    "Every outcome", and says which an output file holds (in the table, and in its first
    paragraph): :data:`crawler.outcomes.WRITTEN`, no more."""
    named = {
        value for name, value in vars(outcomes).items() if name.isupper() and isinstance(value, str)
    }
    assert set(outcomes.ENDINGS) | set(outcomes.NOT_FINAL) <= named
    output = (DOCS / "output.md").read_text()
    assert sorted(o for o in named if f"`{o}`" not in output) == []
    first = output.split("\n\n")[1]  # under the title: what -o writes
    assert set(re.findall(r"`([a-z-]+)`", first)) & named == set(outcomes.WRITTEN)
    table = output.split("\n## Every outcome\n", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (yes|no) \|", table, re.M))
    assert set(rows) == named
    assert {outcome for outcome, written in rows.items() if written == "yes"} == set(
        outcomes.WRITTEN
    )


def test_the_documented_crawl_signature_is_the_api_s() -> None:
    """docs/usage.md's ``Crawl(urls, ...)``: every parameter of :class:`crawler.api.Crawl`,
    in order, with its default."""
    usage = (DOCS / "usage.md").read_text()
    documented = re.search(r"`Crawl\((urls, [^`]*)\)`\s+runs", usage)
    assert documented is not None
    written: list[str] = []
    for p in inspect.signature(Crawl).parameters.values():
        if p.kind is p.KEYWORD_ONLY and "*" not in written:
            written.append("*")  # what follows is keywords only
        if p.kind is p.VAR_KEYWORD:
            written.append(f"**{p.name}")
        else:
            written.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    assert documented[1] == ", ".join(written)


def flags_beside_theirs() -> list[str]:
    """The code spans of the column "here" of docs/coming-from.md's tables that begin
    with a flag (``--max-rate R``): this crawler's words beside another tool's."""
    found = []
    for line in (DOCS / "coming-from.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.split(" | ")]
        if line.startswith("| ") and len(cells) == 3 and cells[1] not in ("here", "---"):
            found += [span for span in re.findall(r"`([^`]+)`", cells[1]) if span[0] == "-"]
    return found


def test_the_flags_beside_other_tools_are_ones_crawler_takes() -> None:
    """Each flag docs/coming-from.md gives as this crawler's is one of ``crawler crawl``
    or ``crawler worker``, with a value it takes (a flag named alone: one that takes a
    value, or none)."""
    flags = flags_beside_theirs()
    assert len(flags) > 30, flags
    refused = []
    for span in flags:
        said = parse_as_the_command_does(f"crawler crawl URL {span}")
        named_alone = " " not in span and "expected one argument" in (said or "")
        if said and parse_as_the_command_does(f"crawler worker {span}") and not named_alone:
            refused.append((span, said))
    assert refused == []
