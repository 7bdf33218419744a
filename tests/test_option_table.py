"""Each option is declared once, in :data:`crawler.option_table.TABLE`: its flag, its
settings key, its keyword and its message field are all made from its row, and say the
same crawl; a user's mypy reads the keywords' types."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from crawler import option_table
from crawler.cli.crawl_flags import spec_of
from crawler.cli.parser import Parser, add_seeding
from crawler.cli.settings import add_settings, parse_args
from crawler.crawl_spec import WORKERS_ONLY, CrawlSpec
from crawler.option_table import API_OWN, RULES, TABLE, Keywords, Option
from crawler.options import CrawlOptions
from tests.workers import PROJECT_ROOT, environment

URL = "http://127.0.0.1:9/"


def crawl_parser(*, upstream: bool = False) -> Parser:
    parser = Parser(prog="crawler crawl")
    add_seeding(parser, upstream=upstream)
    add_settings(parser)
    return parser


#: A value each option takes, as a flag's text and as the value a keyword gives.
SAMPLES: dict[str, tuple[str, Any]] = {
    "input_file": ("seeds.txt", "seeds.txt"),
    "allow_domain": ("example.org", ["example.org"]),
    "include": ("/docs/", ["/docs/"]),
    "exclude": ("\\.pdf$", ["\\.pdf$"]),
    "accept": ("pdf,zip", ["pdf,zip"]),
    "reject": ("jpg", ["jpg"]),
    "follow": ("handlers", "handlers"),
    "max_depth": ("2", 2),
    "max_pages": ("5", 5),
    "max_pages_per_host": ("3", 3),
    "max_rate": ("2.5", 2.5),
    "max_per_host": ("4", 4),
    "user_agent": ("mine/1.0", "mine/1.0"),
    "handler": ("tests.page_handlers:title", "tests.page_handlers:title"),
    "handler_timeout": ("2.5", 2.5),
    "pipeline": ("tests.page_handlers:title", ["tests.page_handlers:title"]),
    "warc": ("archive", "archive"),
    "cache": ("cache", "cache"),
    "files": ("files", "files"),
    "markdown": ("md", "md"),
    "near_duplicates": ("skip", "skip"),
    "header": ("X-A: 1", ["X-A: 1"]),
    "cookies": ("off", False),
    "proxy": ("http://127.0.0.1:3128", "http://127.0.0.1:3128"),
    "timeout": ("7", 7.0),
    "retries": ("2", 2),
    "auth_env": ("example.org=CRAWLER_AUTH_A", ["example.org=CRAWLER_AUTH_A"]),
    "render": ("auto", "auto"),
    "render_wait": ("1.5", 1.5),
    "recrawl_from": ("earlier.jsonl", Path("earlier.jsonl")),
    "recrawl_warc": ("earlier-warc", Path("earlier-warc")),
    "crawl_id": ("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    "threads": ("3", 3),
    "processes": ("1", 1),
    "state": ("state", Path("state")),
    "output": ("out.jsonl", "out.jsonl"),
    "records": ("records.jsonl", Path("records.jsonl")),
    "items": ("items.jsonl", "items.jsonl"),
    "dashboard": ("8600", 8600),
    "log_level": ("debug", "DEBUG"),
    "log_file": ("crawl.log", Path("crawl.log")),
    "stats": ("stats.json", Path("stats.json")),
}
#: Options that need another to be given with them.
NEEDS: dict[str, dict[str, Any]] = {
    "follow": {"handler": "tests.page_handlers:title"},
    "pipeline": {"handler": "tests.page_handlers:title"},
    "files": {"handler": "tests.page_handlers:title"},
    "render_wait": {"render": "auto"},
    "render_media": {"render": "auto"},
    "recrawl_warc": {"recrawl_from": Path("earlier.jsonl")},
    "threads": {"local": True},
    "processes": {"local": True},
    "state": {"local": True},
    "output": {"local": True},
    "records": {"local": True},
    "items": {"local": True},
    "dashboard": {"local": True},
    "stats": {"local": True},
}
#: Switches that differ from ``crawler crawl``'s defaults when given (``on`` ones: off).
SWITCH_GIVEN = {
    "same_site": False, "follow_relative": False, "obey_robots": False, "auto_throttle": False,
}  # fmt: skip


def given_alone(option: Option) -> dict[str, Any]:
    """A keyword value for ``option`` and what it needs, as the API gives them, and where
    the crawl runs, said (``crawler crawl`` crawls here unless ``--workers``)."""
    value = SWITCH_GIVEN.get(option.name, True) if option.switch else SAMPLES[option.name][1]
    where = {"workers": True} if option.name in WORKERS_ONLY else {"local": True}
    if option.name in ("local", "workers"):
        where = {}
    return {**where, **NEEDS.get(option.name, {}), option.name: value}


def as_flags(values: dict[str, Any]) -> list[str]:
    """The same options as ``crawler crawl``'s flags."""
    flags: list[str] = []
    for name, value in values.items():
        option = option_table.BY_NAME[name]
        if option.switch:
            flags.append(option.flag if value else "--no-" + option.setting)
        elif name in SAMPLES:
            flags += [option.flag, SAMPLES[name][0]]
        else:  # a value NEEDS gives
            flags += [option.flag, str(value)]
    return flags


def as_settings(values: dict[str, Any]) -> list[str]:
    """The same options as ``-s key=value``s."""
    settings: list[str] = []
    for name, value in values.items():
        option = option_table.BY_NAME[name]
        if option.switch:
            key = option.setting if value else "no-" + option.setting
            settings += ["-s", f"{key}=true"]
        elif option.kind == "list":
            settings += ["-s", f"{option.setting}=['{SAMPLES[name][0]}']"]  # TOML's literal
        else:
            text = SAMPLES[name][0] if name in SAMPLES else str(value)
            settings += ["-s", f"{option.setting}={text}"]
    return settings


def same_crawl(spec: CrawlSpec, other: CrawlSpec) -> bool:
    """The two specs alike but for their (new, random) crawl ids; their seed files
    (read each time) the same file."""
    if (spec.seed_file and spec.seed_file.name) != (other.seed_file and other.seed_file.name):
        return False
    options = dataclasses.replace(spec.options, crawl_id=other.options.crawl_id)
    mine = dataclasses.replace(spec, options=options, seed_file=None)
    return mine == dataclasses.replace(other, seed_file=None)


def test_every_row_yields_a_flag_a_settings_key_and_a_keyword() -> None:
    parser = crawl_parser()
    namespace = vars(parser.parse_args([]))
    keywords = typing.get_type_hints(Keywords)
    for option in TABLE:
        assert set(option.flags) <= set(parser.option_names), option.name
        assert parser.settings[option.setting].option == option
        assert option.name in namespace  # the flag's dest is the keyword
        assert option.name in keywords or option.name in API_OWN, option.name
    assert set(keywords) == {o.name for o in TABLE} - set(API_OWN)


def test_the_keywords_typed_dict_is_the_one_the_table_writes() -> None:
    source = (PROJECT_ROOT / "crawler" / "option_table.py").read_text()
    assert option_table.keywords_source() in source


def test_every_message_field_has_its_rule_from_the_table() -> None:
    assert set(RULES) == {f.name for f in dataclasses.fields(CrawlOptions)}
    for option in TABLE:
        if option.field is not None:
            assert RULES[option.field] is option.rule
            if option.as_is:
                default = getattr(CrawlOptions(), option.field)
                assert default == option.default, option.name


@pytest.mark.parametrize("option", [o for o in TABLE if not o.crawl_only], ids=lambda o: o.name)
def test_a_flag_its_setting_and_its_keyword_make_the_same_spec(
    option: Option, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where the files the options name are
    (tmp_path / "seeds.txt").write_text("http://127.0.0.1:9/seed\n")
    values = given_alone(option)
    from_keywords = CrawlSpec.from_options([URL], values)
    from_flags = spec_of(crawl_parser().parse_args([URL, *as_flags(values)]))
    from_settings = spec_of(parse_args(crawl_parser(), [URL, *as_settings(values)]))
    assert same_crawl(from_flags, from_keywords)
    assert same_crawl(from_settings, from_keywords)
    assert not same_crawl(from_keywords, CrawlSpec.from_options([URL], NEEDS.get(option.name, {})))


WRONG = """
from crawler import Crawl, seed
Crawl(["https://example.com/"], max_pages="x")
seed(["https://example.com/"], obey_robots="yes")
"""
RIGHT = """
from pathlib import Path
from crawler import Crawl, seed
Crawl(["https://example.com/"], max_pages=5, include=["/docs/"], max_rate=2.5,
      obey_robots=False, recrawl_from=Path("earlier.jsonl"), render_wait="idle", threads=2)
seed(["https://example.com/"], records=True, header="X-A: 1", cookies="off")
"""


def mypy_on(
    tmp_path: Path, source: str, *, config: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """mypy on ``source``, as a user's program that imports the crawler installed: the
    package on the path as site-packages hold it (not as the program's own source), so
    that mypy reads its annotations only for its ``py.typed`` (PEP 561).  ``config``: a
    configuration file of mypy's to run with (the project's, its plugins with it)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    if not (site / "crawler").exists():
        (site / "crawler").symlink_to(PROJECT_ROOT / "crawler")
    # A program of its own name each: mypy's cache (kept between the runs of a test, the
    # crawler's modules read once) takes a file of the same size and second for unchanged.
    program = tmp_path / f"users_program_{hashlib.sha256(source.encode()).hexdigest()[:12]}.py"
    program.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir",
         str(tmp_path / "cache"), *(["--config-file", str(config)] if config else []),
         str(program)],
        cwd=tmp_path, env=environment(PYTHONPATH=str(site)), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_a_user_s_mypy_refuses_a_wrong_keyword_type_and_takes_right_ones(tmp_path: Path) -> None:
    wrong = mypy_on(tmp_path, WRONG)
    assert wrong.returncode == 1, wrong.stdout
    assert 'Argument "max_pages" to "Crawl" has incompatible type "str"' in wrong.stdout
    assert 'Argument "obey_robots" to "seed" has incompatible type "str"' in wrong.stdout
    right = mypy_on(tmp_path, RIGHT)
    assert right.returncode == 0, right.stdout
