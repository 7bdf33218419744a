"""Untrusted input: a ``crawl`` message is input, whoever sent it.

Messages are sent by hand, as another program (or an older seeder, or a corrupted
queue) would, to real ``dramatiq crawler.example`` workers on both brokers.  Each bad
one ends on its first delivery with one clear line naming what is wrong: no traceback,
no CRITICAL, no retry, no request to the site, a dead letter; and the same checks
refuse the same values on the seeder's command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dramatiq.brokers.stub import StubBroker

from crawler import example, messages, options
from crawler.archiving.warc import WarcFiles
from crawler.errors import InvalidMessage
from crawler.frontier import claims, counters
from crawler.options import RULES, CrawlOptions
from crawler.records import Record
from crawler.stores.memory import MemoryPool
from crawler.tracking.bookkeeping import settle
from tests.site_server import SiteServer, html
from tests.support import FAST_FAILURES
from tests.workers import PROJECT_ROOT, WorkerProcesses, dead_letters, environment, seed

CRAWL_ID = "untrusted-test"

#: (keyword arguments of a message, words of its one log line).  The first five are
#: the issue's table.
BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"options": {"max_depth": "abc"}},
        "options: max_depth must be a whole number, got 'abc'",
    ),
    (
        {"options": {"max_rate": float("nan")}},
        "max_rate must be a number from 0.001 to 10000, got nan",
    ),
    ({"options": "not-a-dict"}, "message options must be a JSON object, got 'not-a-dict'"),
    (
        {"options": {"allowed_domains": "127.0.0.1"}},
        "allowed_domains must be a list of domain names, got '127",
    ),
    ({"options": {"user_agent": "x\r\nX-Evil: 1"}}, "user_agent must be a header value"),
    (
        {"options": {"max_rate": float("inf")}},
        "max_rate must be a number from 0.001 to 10000, got inf",
    ),
    ({"options": {"max_pages": 0}}, "max_pages must be a whole number above zero, got 0"),
    ({"options": {"max_depth": True}}, "max_depth must be a whole number, got True"),
    ({"options": {"obey_robots": "yes"}}, "obey_robots must be true or false, got 'yes'"),
    ({"options": {"include": ["(unclosed"]}}, "include must be a list of regular expressions"),
    ({"options": {"exclude": "x"}}, "exclude must be a list of regular expressions, got 'x'"),
    ({"options": {"allowed_sites": [5]}}, "allowed_sites must be a list of domain names, got [5]"),
    ({"options": {"max_per_host": -1}}, "max_per_host must be a whole number from 1 to 1000"),
    (
        {"options": {"max_pages_per_host": 2.5}},
        "max_pages_per_host must be a whole number above",
    ),
    ({"options": {"sitemaps": 1}}, "sitemaps must be true or false, got 1"),
    ({"options": {"breadth_first": None}}, "breadth_first must be true or false, got None"),
    ({"options": {"crawl_id": "../../etc"}}, "crawl_id must be a crawl id"),
    ({"options": {"warc": "../outside"}}, "warc must be a directory name, got '../outside'"),
    ({"options": {"warc": 7}}, "warc must be a directory name, got 7"),
    ({"depth": "1"}, "message arguments: depth must be a whole number, got '1'"),
    ({"sitemap": 9}, "message arguments: sitemap must be a whole number from 0 to 4, got 9"),
    ({"via_public": "no"}, "message arguments: via_public must be true or false, got 'no'"),
    ({"listed": {"pages": "x"}}, "message arguments: listed must be null or lists of"),
    ({"colour": "red"}, "message arguments: got an unexpected keyword argument 'colour'"),
    # Values past what later code can take: each refused as plainly, never an error of
    # another kind (OverflowError, RecursionError, UnicodeEncodeError) past the check.
    ({"options": {"max_rate": 10**400}}, "max_rate must be a number from 0.001 to 10000"),
    ({"options": {"max_rate": 1e-320}}, "max_rate must be a number from 0.001 to 10000"),
    ({"options": {"max_per_host": 10**9}}, "max_per_host must be a whole number from 1 to"),
    ({"options": {"max_pages": 10**30}}, "max_pages must be a whole number above zero"),
    ({"options": {"include": ["a{99999999999}"]}}, "include must be a list of regular"),
    ({"options": {"exclude": ["(" * 500 + ")" * 500]}}, "exclude must be a list of regular"),
    ({"options": {"warc": "a\udc80"}}, "warc must be a directory name"),
    ({"options": {"warc": "x" * 300}}, "warc must be a directory name"),
    ({"options": {"user_agent": "bot\x85"}}, "user_agent must be a header value"),
    ({"depth": 10**30}, "message arguments: depth must be a whole number"),
    ({"listed": {"pages": ["http://a/"] * 50_001, "sitemaps": []}}, "listed must be"),
]


def send_messages(env: dict[str, str], sent: list[tuple[list[Any], dict[str, Any]]]) -> None:
    """Send ``crawl`` messages (args, kwargs) as they are, through the crawler's own
    broker set-up, as another program would."""
    script = (
        "import json, sys\n"
        "from crawler.example import crawl\n"
        "for args, kwargs in json.load(sys.stdin):\n"
        "    crawl.send_with_options(args=args, kwargs=kwargs)\n"
    )
    subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(sent),  # NaN and Infinity as Python's json writes them
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_each_malformed_message_ends_at_once_with_one_clear_line_no_fetch_and_a_dead_letter(
    broker_env: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    root, outside = tmp_path / "warc-root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link-out").symlink_to(outside)
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_WARC_DIR=str(root)
    )
    site.pages["/good.html"] = html()
    bad = [
        *BAD,
        ({"options": {"warc": str(outside)}}, "is outside this worker's CRAWLER_WARC_DIR"),
        ({"options": {"warc": "link-out"}}, "warc 'link-out' is outside this worker's"),
    ]
    # Each bad message names a page of its own and the crawl, so its ending is counted.
    sent: list[tuple[list[Any], dict[str, Any]]] = []
    for number, (kwargs, _) in enumerate(bad):
        kwargs = json.loads(json.dumps(kwargs))  # a copy
        if isinstance(kwargs.get("options"), dict) and "crawl_id" not in kwargs["options"]:
            kwargs["options"]["crawl_id"] = CRAWL_ID
        sent.append(([site.url(f"/bad/{number}.html")], kwargs))
    no_url: tuple[list[Any], dict[str, Any]] = ([], {"depth": 1})
    not_a_url: tuple[list[Any], dict[str, Any]] = (["http://127.0.0.1:99999/\ud800"], {})
    good = ([site.url("/good.html")], {"options": {"crawl_id": CRAWL_ID}})

    workers = WorkerProcesses(env, processes=1, threads=4)
    try:
        send_messages(env, [*sent, no_url, not_a_url, good])
        workers.wait_until(
            lambda: (
                workers.count("Giving up on URL") >= len(sent) + 2
                and workers.logged_any("Done crawling")
            ),
            timeout=60,
        )
    finally:
        assert workers.stop() == 0

    log = "\n".join(workers.lines)
    for number, (_, words) in enumerate(bad):
        url = site.url(f"/bad/{number}.html")
        lines = [line for line in workers.lines if repr(url) in line]
        assert len(lines) == 1, lines  # one line, on the first delivery: no retry
        assert "Giving up on URL" in lines[0] and words in lines[0], lines[0]
    assert workers.count("message arguments: missing a required argument: 'url'") == 1
    assert workers.count("url must be an http:// or https:// URL, got 'http://127.0.0.1:9") == 1
    assert "Traceback" not in log and "CRITICAL" not in log and "will be retried" not in log
    assert site.fetch_counts() == {"/good.html": 1}  # the good one proves workers fetch
    assert dead_letters(env) == len(sent) + 2
    assert list(outside.iterdir()) == []  # no file written through the symlink or the path
    # Each refused message whose options name the crawl is counted there as failed.
    named = [k for _, k in sent if isinstance(k.get("options"), dict)]
    counted = sum(k["options"]["crawl_id"] == CRAWL_ID for k in named)
    assert counted == len(named) - 1  # all but the one whose crawl_id is refused
    status = seed(env, "--status", CRAWL_ID)
    assert "1 page fetched, " in status.stdout and f" {counted} failed;" in status.stdout
    # Listed like any dead letter; not replayed, since workers would only refuse them
    # again, but for the two WARC directories: those are the worker's to refuse (its
    # CRAWLER_WARC_DIR may change), so they are replayed.
    listing = seed(env, "--dead-letters", "all")
    assert f"{len(sent) + 2} dead-lettered URL(s) of every crawl" in listing.stdout
    replay = seed(env, "--replay", "all")
    assert replay.stdout.count("not sent again: workers refuse it (message") == len(sent)
    assert "2 dead-lettered URL(s) of every crawl sent again" in replay.stdout
    assert dead_letters(env) == len(sent)


def test_warc_directories_land_under_the_root_and_no_root_means_no_warc(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (tmp_path / "outside").mkdir()
    (tmp_path / "root").mkdir()
    (root / "link-out").symlink_to(tmp_path / "outside")
    (root / "link-in").symlink_to(root / "crawl-a")
    files = WarcFiles(1000, root=root)
    real_root = Path(os.path.realpath(root))

    assert files.directory("crawl-a") == real_root / "crawl-a"
    assert files.directory("a/b") == real_root / "a" / "b"
    assert files.directory(str(root / "crawl-b")) == real_root / "crawl-b"  # absolute, inside
    assert files.directory("link-in") == real_root / "crawl-a"  # a symlink that stays inside
    for name in ("../outside", "a/../../outside", str(tmp_path / "outside"), "/etc", "link-out"):
        with pytest.raises(InvalidMessage, match="is outside this worker's CRAWLER_WARC_DIR"):
            files.directory(name)
    with pytest.raises(InvalidMessage, match="CRAWLER_WARC_DIR, which is not set"):
        WarcFiles(1000).directory("crawl-a")


def test_every_option_has_a_rule_and_the_seeder_checks_what_it_sends_with_it() -> None:
    assert set(RULES) == {name for name in CrawlOptions.__dataclass_fields__}
    every = CrawlOptions(
        crawl_id="a" * 32, follow_relative=True, allowed_domains=("example.com",),
        max_depth=0, max_pages=1, obey_robots=True, max_rate=0.5, user_agent="bot/1",
        include=("a",), exclude=("b",), allowed_sites=("example.co.uk",), max_per_host=1,
        max_pages_per_host=1, sitemaps=True, breadth_first=True, warc="w",
        collect_records=True, batched_records=True, records_without_links=True,
    )  # fmt: skip
    assert CrawlOptions.from_message(every.to_message()) == every
    assert CrawlOptions.from_message({"from_a_newer_seeder": [1, 2]}) == CrawlOptions()
    assert CrawlOptions.from_message({"max_depth": None}) == CrawlOptions()  # unset
    readable = CrawlOptions.readable_from_message({"crawl_id": "c1", "max_depth": "abc"})
    assert readable == CrawlOptions(crawl_id="c1")


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--warc", "../up"], "'../up' is not a directory name: '..' is not allowed in it"),
        (["--user-agent", "bot\u00e9\u4e2d"], "is not a header value: it has a character HTTP"),
        (["--allow-domain", "a b"], "'a b' is not a domain name"),
    ],
)
def test_the_seeder_refuses_what_workers_would_refuse_before_sending_anything(
    arguments: list[str], words: str
) -> None:
    env = environment(RABBITMQ_URL="amqp://guest:guest@127.0.0.1:9")  # never reached

    result = seed(env, "http://127.0.0.1:9/", *arguments)

    assert result.returncode == 2, result.stderr
    assert words in result.stderr


def test_a_refused_message_is_recorded_as_failed_and_counted_but_claims_nothing(
    stub_broker: StubBroker,
) -> None:
    pool = MemoryPool()
    published: list[tuple[Any, ...]] = []
    url = "http://127.0.0.1:9/page.html"
    message = example.crawl.message_with_options(
        args=(url,),
        kwargs={"options": {"crawl_id": "c1", "max_depth": "abc", "collect_records": True}},
    )
    with pytest.raises(InvalidMessage, match="max_depth must be a whole number, got 'abc'"):
        messages.check_arguments({"url": url, **message.kwargs})
    with pool.reserve() as client:
        claims.claim(client, url, "another-message", "c1", example.lifetimes)
        claim = client.get(claims.url_hash(url, "c1"))
    record: Record = {"url": url, "outcome": "failed", "invalid_message": True}

    settle(pool, example.lifetimes, lambda *sent: published.append(sent))(record, message)

    assert published == [("c1", record, False)]  # the waiting seeder hears of it
    with pool.reserve() as client:
        assert (counters.read(client, "c1") or {})["failed"] == 1
        assert client.get(claims.url_hash(url, "c1")) == claim  # another message's: untouched


def test_a_refused_message_takes_no_claim_and_sends_no_request(
    stub_broker: StubBroker, site: SiteServer, memcached: Any
) -> None:
    site.pages["/page.html"] = html()
    url = site.url("/page.html")

    for bad in ({"crawl_id": "c2", "max_depth": "abc"}, {"crawl_id": "c2", "warc": "w"}):
        with pytest.raises(InvalidMessage):  # this process has no CRAWLER_WARC_DIR
            example.crawl(url, options=bad)

    assert site.fetch_counts() == {}
    assert memcached.get(claims.url_hash(url, "c2")) is None


@pytest.mark.parametrize(
    "values",
    [
        {"max_rate": 10**400}, {"max_rate": -0.0}, {"max_rate": "1"}, {"max_per_host": 10**9},
        {"include": ["a{99999999999}"]}, {"include": ["(" * 5000 + ")" * 5000]},
        {"include": [None]}, {"allowed_domains": ["\ud800"]}, {"allowed_domains": ["a" * 300]},
        {"warc": "\udc80"}, {"warc": "a/" * 600}, {"warc": ""}, {"crawl_id": ""},
        {"user_agent": "\x85"}, {"user_agent": "\u4e2d"}, {"max_depth": 2**63},
    ],
)  # fmt: skip
def test_a_value_no_rule_allows_is_refused_as_invalid_and_nothing_else(
    values: dict[str, Any],
) -> None:
    with pytest.raises(InvalidMessage, match=r"^message options: "):
        CrawlOptions.from_message(values)
    assert CrawlOptions.readable_from_message(values) == CrawlOptions()  # the bookkeeping's


def test_an_error_quotes_a_value_cut_short() -> None:
    assert options.quoted("x" * 500) == repr("x" * 500)[:97] + "..."
