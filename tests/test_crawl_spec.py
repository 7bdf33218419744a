"""A crawl is a typed value, :class:`crawler.crawl_spec.CrawlSpec`: the command line makes
it from its flags, the Python API from keyword arguments with no command line parsed,
and both check each value by the same check, in the same words."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest

import crawler.cli.parser as cli_parser
from crawler import Crawl, CrawlError, seed
from crawler.cli import crawl_flags
from crawler.crawl_spec import OPTIONS, CrawlSpec, core_count
from crawler.errors import InvalidMessage
from crawler.option_rules import MAX_RENDER_WAIT
from crawler.options import CrawlOptions
from tests.workers import PROJECT_ROOT, environment

URL = "http://127.0.0.1:9/"


class _Refused(Exception):
    pass


class _Parser(cli_parser.Parser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def parser(*, upstream: bool = False) -> _Parser:
    """``crawler crawl``'s parser (``upstream``: ``python -m crawler.example``'s)."""
    made = _Parser(prog="crawler")
    cli_parser.add_seeding(made, upstream=upstream)
    return made


def from_flags(*args: str, upstream: bool = False) -> CrawlSpec:
    return crawl_flags.spec_of(parser(upstream=upstream).parse_args(list(args)))


def same_crawl(spec: CrawlSpec, other: CrawlSpec) -> bool:
    """The two specs alike but for their (new, random) crawl ids."""
    options = dataclasses.replace(spec.options, crawl_id=other.options.crawl_id)
    return dataclasses.replace(spec, options=options) == other


#: A flag's bad value, and the keyword argument that says the same.
BAD = [
    (["--max-pages", "0"], {"max_pages": 0}),
    (["--max-pages", "1.5"], {"max_pages": 1.5}),
    (["--max-pages=--help"], {"max_pages": "--help"}),  # a value, as the API gives it
    (["--max-depth", "-1"], {"max_depth": -1}),
    (["--max-rate", "nan"], {"max_rate": float("nan")}),
    (["--max-rate", "fast"], {"max_rate": "fast"}),
    (["--max-per-host", "0"], {"max_per_host": 0}),
    (["--threads", "0"], {"threads": 0}),
    (["--allow-domain", "a b"], {"allow_domain": ["a b"]}),
    (["--include", "(unclosed"], {"include": ["(unclosed"]}),
    (["--exclude", "(?=x)"], {"exclude": "(?=x)"}),
    (["--user-agent", "bot\r\nX-Evil: 1"], {"user_agent": "bot\r\nX-Evil: 1"}),
    (["--handler", "not a name"], {"handler": "not a name"}),
    (["--dashboard", "0"], {"dashboard": 0}),
    (["--crawl-id", "nope"], {"crawl_id": "nope"}),
    (["--render-wait", "0", "--render"], {"render_wait": 0, "render": True}),
    (["--render-wait", "9", "--render"], {"render_wait": 9, "render": True}),
    (["--render-wait", "nan", "--render"], {"render_wait": float("nan"), "render": True}),
    (["--render-wait", "soon", "--render"], {"render_wait": "soon", "render": True}),
]


@pytest.mark.parametrize(("flags", "keywords"), BAD)
def test_a_bad_keyword_is_refused_in_the_words_of_its_flag(
    flags: list[str], keywords: dict[str, Any]
) -> None:
    with pytest.raises(_Refused) as refused:
        parser().parse_args(["--local", *flags, URL])
    said = str(refused.value)
    assert said.startswith(f"argument {flags[0].split('=')[0]}: ")

    with pytest.raises(CrawlError) as from_mapping:
        CrawlSpec.from_options([URL], {"local": True, **keywords})
    assert str(from_mapping.value) == said
    with pytest.raises(CrawlError) as from_code:
        Crawl([URL], **keywords)
    assert str(from_code.value) == said


def test_an_unknown_keyword_is_named() -> None:
    with pytest.raises(CrawlError, match="max_pagez is no option of a crawl"):
        Crawl([URL], max_pagez=5)  # type: ignore[call-arg]
    with pytest.raises(CrawlError, match="unrecognized arguments: --colour=blue"):
        CrawlSpec.from_options([URL], {"colour": "blue"})


def test_render_options_are_carried_by_the_crawl_s_messages() -> None:
    spec = from_flags("--render", "--render-wait", "2", "--render-media", URL)
    assert (spec.options.render, spec.options.render_wait, spec.options.render_media) == (
        True,
        2.0,
        True,
    )
    assert isinstance(spec.options.render_wait, float)
    message = spec.options.to_message()
    assert message is not None
    assert (message["render"], message["render_wait"], message["render_media"]) == (True, 2.0, True)
    assert CrawlOptions.from_message(message) == spec.options
    api = Crawl([URL], render=True, render_wait=MAX_RENDER_WAIT).spec.options
    assert (api.render, api.render_wait, api.render_media) == (True, 8.0, False)


def test_render_wait_idle_is_the_default_network_idle_wait() -> None:
    for options in (
        from_flags("--render", "--render-wait", "idle", URL).options,
        CrawlSpec.from_options([URL], {"render": True, "render_wait": "idle"}).options,
        from_flags("--render", URL).options,
    ):
        assert options.render and options.render_wait is None and not options.render_media
        message = options.to_message()
        assert message is not None and "render_wait" not in message
    plain = from_flags(URL).options
    assert (plain.render, plain.render_wait, plain.render_media) == (False, None, False)
    assert not {"render", "render_wait", "render_media"} & set(plain.to_message() or {})


@pytest.mark.parametrize("value", ["0", "9", "nan", "inf", "-1", "8.01", True, 0, 9, 0.0])
def test_render_wait_refuses_what_its_rule_refuses(value: Any) -> None:
    said = f"^argument --render-wait: '{value}' is not a number of seconds above 0, at most 8$"
    with pytest.raises(CrawlError, match=said):
        CrawlSpec.from_options([URL], {"render": True, "render_wait": value})
    if isinstance(value, str):
        with pytest.raises(_Refused, match=said):
            parser().parse_args(["--render", "--render-wait", value, URL])


@pytest.mark.parametrize(
    ("flags", "keywords", "said"),
    [
        (["--render-wait", "2"], {"render_wait": 2}, "--render-wait works with --render only"),
        (["--render-media"], {"render_media": True}, "--render-media works with --render only"),
        (["--render-wait", "0.5", "--render-media"],
         {"render_wait": 0.5, "render_media": True}, "--render-wait works with --render only"),
    ],
)  # fmt: skip
def test_render_wait_and_render_media_are_refused_without_render(
    flags: list[str], keywords: dict[str, Any], said: str
) -> None:
    with pytest.raises(CrawlError, match=f"^{said}$"):
        from_flags(*flags, URL)
    with pytest.raises(CrawlError, match=f"^{said}$"):
        CrawlSpec.from_options([URL], keywords)
    with pytest.raises(CrawlError, match=f"^{said}$"):
        Crawl([URL], **keywords)
    assert not CrawlSpec.from_options([URL], {"render_media": False}).options.render_media


def test_a_message_s_render_options_are_checked_by_their_rules() -> None:
    options = CrawlOptions.from_message({"render": True, "render_wait": 2.5})
    assert (options.render, options.render_wait, options.render_media) == (True, 2.5, False)
    assert CrawlOptions.from_message({"render": True, "render_wait": None}).render_wait is None
    assert CrawlOptions.from_message({"render": True, "render_media": True}).render_media
    for bad, said in [
        ({"render_wait": 0}, "render_wait must be a number of seconds above 0, at most 8, got 0"),
        ({"render_wait": 8.5}, "render_wait must be a number of seconds above 0, at most 8"),
        ({"render_wait": True}, "render_wait must be a number of seconds above 0, at most 8"),
        ({"render_wait": "2"}, "render_wait must be a number of seconds above 0, at most 8"),
        ({"render": "yes"}, "render must be true, false, all or auto, got 'yes'"),
        ({"render": True, "render_media": 1}, "render_media must be true or false, got 1"),
    ]:
        with pytest.raises(InvalidMessage, match=said):
            CrawlOptions.from_message(bad)


@pytest.mark.parametrize(
    ("flags", "keywords", "upstream"),
    [
        (["--local"], {"local": True}, False),
        (
            ["--local", "--threads", "3", "--max-pages", "5", "--include", "/a/",
             "--include", "/b/", "--no-obey-robots", "--allow-domain", "Example.COM.",
             "--max-rate", "2.5", "--state", "st", "-o", "-", "--dashboard", "8600", "-v"],
            {"local": True, "threads": 3, "max_pages": "5", "include": ["/a/", "/b/"],
             "obey_robots": False, "allow_domain": "example.com", "max_rate": 2.5,
             "state": Path("st"), "output": "-", "dashboard": 8600, "verbose": True},
            False,
        ),
        (["--workers", "--wait", "--same-domain", "--sitemaps", "--breadth-first", "--warc", "w"],
         {"wait": True, "same_domain": True, "sitemaps": True, "breadth_first": True,
          "warc": Path("w")}, False),
        (["--upstream", "--follow-relative"],
         {"upstream": True, "follow_relative": True, "local": True}, False),
        (["--workers", "--crawl-id", "a" * 32], {"crawl_id": "a" * 32}, False),
        (["--render", "--render-wait", "2.5", "--render-media"],
         {"render": True, "render_wait": "2.5", "render_media": True, "local": True}, False),
        (["--render", "--render-wait", "idle"], {"render": True, "render_wait": "idle",
         "upstream": True}, True),
        ([], {"follow_relative": False, "same_site": False, "obey_robots": False,
              "auto_throttle": False}, True),
    ],
)  # fmt: skip
def test_flags_and_keywords_make_the_same_crawl(
    flags: list[str], keywords: dict[str, Any], upstream: bool
) -> None:
    by_flags = from_flags(*flags, "HTTP://127.0.0.1:9", upstream=upstream)
    by_keywords = CrawlSpec.from_options(["HTTP://127.0.0.1:9"], keywords)
    assert same_crawl(by_flags, by_keywords)
    assert by_flags.seeds == (URL,)


def test_what_a_spec_says_of_how_the_crawl_runs_and_what_its_messages_carry() -> None:
    spec = from_flags(
        "--workers", "--wait", "--max-pages", "4", "--same-domain", "http://Example.com/a"
    )
    assert (spec.local, spec.wait, spec.adding, spec.output) == (False, True, False, None)
    assert spec.options.max_pages == 4
    assert spec.options.allowed_domains == ("example.com",) and spec.options.allowed_sites == ()
    assert (spec.options.follow_relative, spec.options.obey_robots) == (True, True)
    assert spec.options.collect_records and spec.options.records_without_links
    assert spec.options.crawl_id is not None and len(spec.options.crawl_id) == 32
    written = from_flags("--workers", "--wait", "-o", "out.jsonl", URL)
    assert written.options.collect_records and not written.options.records_without_links
    assert written.output == "out.jsonl"
    adding = from_flags("--workers", "--crawl-id", "b" * 32, URL)
    assert adding.adding and adding.options.crawl_id == "b" * 32
    local = from_flags("--local", "--warc", "w", URL)
    assert local.fetching_threads == 8 and local.options.warc == str(Path("w").absolute())
    assert from_flags("--workers", "--warc", "w", URL).options.warc == "w"  # the workers'
    here = from_flags("--warc", "w", URL)  # crawler crawl crawls here: a directory here
    assert here.local and here.options.warc == str(Path("w").absolute())
    with pytest.raises(
        CrawlError, match="--wait is for a crawl of workers: crawler crawl --workers URL --wait"
    ):
        from_flags("--wait", URL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.wait = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"seeds": ()}, "give at least one URL to crawl"),
        ({"local": True, "wait": True}, "--local and --wait: choose one"),
        ({"local": True, "adding": True}, "--local and --crawl-id: choose one"),
        ({"threads": 2}, "--threads works with --local only"),
        ({"state": Path("s")}, "--state works with --local only"),
        ({"output": Path("o")}, "--output works with --local or --wait"),
        ({"dashboard": 8600}, "--dashboard works with --local or --wait"),
    ],
)
def test_a_spec_that_cannot_run_is_refused_however_it_is_made(
    fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(CrawlError, match=f"^{said}$"):
        CrawlSpec(**{"seeds": (URL,), "options": CrawlOptions(), **fields})
    mapping = {"crawl_id" if k == "adding" else k: "c" * 32 if k == "adding" else v
               for k, v in fields.items() if k != "seeds"}  # fmt: skip
    with pytest.raises(CrawlError, match=f"^{said}$"):
        CrawlSpec.from_options([] if "seeds" in fields else [URL], mapping)


def test_the_api_s_crawl_is_its_spec_and_seed_refuses_to_run_here() -> None:
    crawl = Crawl([URL], threads=2, max_pages=3, include="/docs/", output="-")
    assert crawl.spec.local and crawl.spec.threads == 2 and crawl.spec.output == "-"
    assert crawl.spec.options.max_pages == 3 and crawl.spec.options.include == ("/docs/",)
    with pytest.raises(CrawlError, match="--local and --wait: choose one"):
        Crawl([URL], wait=True)  # refused when made, before it runs
    with pytest.raises(CrawlError, match="seed\\(\\) sends a crawl to the workers"):
        seed([URL], local=True)


def test_every_flag_of_a_crawl_is_an_option_of_its_spec() -> None:
    """A flag ``add_seeding`` defines that :data:`OPTIONS` lacks would be dropped."""
    for upstream in (False, True):
        dests = set(vars(parser(upstream=upstream).parse_args([])))
        assert dests - {"help", "urls"} <= set(OPTIONS), upstream


#: Run with argparse made impossible to import: the API makes its crawl without it.
NO_ARGPARSE = """
import json, sys
sys.modules["argparse"] = None  # any import of it raises ImportError
from crawler import Crawl, CrawlError
crawl = Crawl([sys.argv[1]], max_pages=2, include=["/a/"], follow_relative=False)
try:
    Crawl([sys.argv[1]], max_pages=0)
except CrawlError as e:
    refused = str(e)
print(json.dumps({"spec": type(crawl.spec).__name__, "max_pages": crawl.spec.options.max_pages,
                  "follow_relative": crawl.spec.options.follow_relative, "refused": refused}))
"""


def test_the_api_makes_a_crawl_spec_with_no_argparse_at_all() -> None:
    env = environment(RABBITMQ_URL="amqp://guest:guest@127.0.0.1:9")  # never reached
    ran = subprocess.run(
        [sys.executable, "-c", NO_ARGPARSE, URL],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout) == {
        "spec": "CrawlSpec",
        "max_pages": 2,
        "follow_relative": False,
        "refused": "argument --max-pages: '0' is not a whole number above zero",
    }


@pytest.mark.parametrize(
    "module", ["api.py", "embedded/entry.py", "crawl_spec.py", "embedded/one_process.py"]
)
def test_only_command_line_modules_import_argparse(module: str) -> None:
    tree = ast.parse((PROJECT_ROOT / "crawler" / module).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}  # fmt: skip
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 if node.module}  # fmt: skip
    assert "argparse" not in imported
    assert "crawler.command_line" not in imported and "crawler.cli" not in imported


def test_one_crawling_process_by_default_elsewhere_than_linux_and_more_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert CrawlSpec.from_options([URL], {"local": True, "threads": 4}).crawling_processes == min(
        core_count(), 4
    )
    monkeypatch.setattr(sys, "platform", "darwin")
    assert CrawlSpec.from_options([URL], {"local": True}).crawling_processes == 1
    with pytest.raises(CrawlError, match=r"--processes 2: several crawling processes run on Linux"):
        CrawlSpec.from_options([URL], {"local": True, "processes": 2})
    assert CrawlSpec.from_options([URL], {"local": True, "processes": 1}).crawling_processes == 1
