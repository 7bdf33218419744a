"""``crawler parse URL --handler MODULE:ROUTER``: one page fetched and given to a
handler as a crawl gives it, what it made printed (sections, or ``--json``), with no
broker nor dedup store; a clear line and a non-zero exit for what goes wrong."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import command
from tests.site_server import Page, SiteServer
from tests.workers import BIN, PROJECT_ROOT, environment

ROUTER = "tests.parse_handlers:router"


def shop(site: SiteServer) -> None:
    site.pages["/"] = Page(
        b'<base href="/shop/"><a class=product href="p/1">Tea</a>'
        b'<a class=product href="p/2">Cake</a><a href="http://other.example/">away</a>'
    )
    site.pages["/shop/p/1"] = Page(b"<h1>Tea</h1>")
    site.pages["/api"] = Page(
        b'{"products": [{"n": 1}, {"n": 2}]}', content_type="application/json"
    )


def parse(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``crawler parse ARGS`` in this process: its exit status, stdout and stderr."""
    try:
        status = command.main(["parse", *args])
    except SystemExit as e:  # a usage error
        status = int(e.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def parsed_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    status, out, _ = parse(capsys, *args, "--json")
    return status, json.loads(out)


def test_parse_prints_a_generator_s_items_and_requests_resolved_against_base_href(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    shop(site)
    status, out, err = parse(capsys, site.url("/"), "--handler", ROUTER)
    assert (status, err) == (0, "")
    assert '# Items (2)\n{"listed": "p/1"}\n{"listed": "p/2"}\n' in out
    assert "# Requests (3)\n" in out
    assert f"GET {site.url('/shop/p/1')} " in out and '"label": "product"' in out
    assert f"POST {site.url('/api?page=1')} " in out and '"body": "{\\"q\\": \\"tea\\"}"' in out
    assert "# Refused requests (1)\nrequest-refused: 'mailto:shop@example.com'" in out
    assert "2 of the page's 3 links are on its site" in out
    assert [r.path for r in site.requests] == ["/"]  # one request: no robots.txt, nothing followed


def test_parse_with_a_label_and_data_runs_that_route_of_the_router(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    shop(site)
    status, document = parsed_json(
        capsys, site.url("/shop/p/1"), "--handler", ROUTER, "--label", "product",
        "--data", '{"from": "/"}',
    )  # fmt: skip
    assert status == 0
    assert document["data"] == {"name": "Tea", "data": {"from": "/"}}
    assert document["label"] == "product" and document["status"] == 200
    assert (document["items"], document["requests"], document["handler_error"]) == ([], [], None)


def test_parse_gives_a_json_route_its_answer_and_refuses_json_to_a_route_without_it(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    shop(site)
    status, document = parsed_json(capsys, site.url("/api"), "--handler", ROUTER, "--label", "api")
    assert status == 0
    assert document["items"] == [{"n": 1}, {"n": 2}]
    assert document["links"] == [] and document["links_followed"] == 0
    status, out, err = parse(capsys, site.url("/api"), "--handler", ROUTER)
    assert (status, out) == (1, "")
    assert err == (
        "crawler parse: the page is not HTML (application/json) and its handler takes no"
        " such content (content_types, or route(label, content_types=...))\n"
    )


def test_a_handler_that_raises_is_shown_with_what_there_is_and_exits_1(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    shop(site)
    status, out, err = parse(capsys, site.url("/"), "--handler", ROUTER, "--label", "broken")
    assert status == 1
    assert "# Handler error\nhandler-failed: KeyError: 'price'\n" in out
    assert "2 of the page's 3 links are on its site" in out  # the page's links still shown
    assert err == "crawler parse: the handler failed: handler-failed: KeyError: 'price'\n"
    status, document = parsed_json(capsys, site.url("/"), "--handler", ROUTER, "--label", "broken")
    assert status == 1 and document["handler_error"] == "handler-failed: KeyError: 'price'"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--handler", "tests.no_such_module:router"], "--handler tests.no_such_module:router:"
         " cannot import 'tests.no_such_module'"),
        (["--handler", "tests.parse_handlers:nothing"], "has no function 'nothing'"),
        (["--handler", "no-colon"], "is not package.module:function"),
        (["--handler", ROUTER, "--data", "[1]"], "--data: must be a JSON object"),
    ],
)  # fmt: skip
def test_a_bad_handler_spec_or_data_is_one_usage_line_and_nothing_fetched(
    site: SiteServer, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    shop(site)
    status, out, err = parse(capsys, site.url("/"), *args)
    assert (status, out) == (2, "")
    assert said in err and err.count("\n") <= 2  # argparse's one line (and its pointer)
    assert site.requests == []


def test_a_bad_url_and_a_failed_fetch_are_one_line_each(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = parse(capsys, "ftp://example.com/", "--handler", ROUTER)
    assert status == 2 and "URL: 'ftp://example.com/' is not an http(s) URL" in err
    status, out, err = parse(capsys, site.url("/gone"), "--handler", ROUTER)
    assert (status, out) == (1, "")
    assert err == f"crawler parse: cannot fetch {site.url('/gone')}: Answered: HTTP 404 Not Found\n"


def test_parse_with_cache_takes_the_page_from_it_the_second_time(
    site: SiteServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shop(site)
    cache = str(tmp_path / "cache")
    first = parsed_json(capsys, site.url("/"), "--handler", ROUTER, "--cache", cache)
    second = parsed_json(capsys, site.url("/"), "--handler", ROUTER, "--cache", cache)
    assert (first[1]["cached"], second[1]["cached"]) == (False, True)
    assert {**first[1], "cached": True} == second[1]
    assert [r.path for r in site.requests] == ["/"]


def test_the_crawler_command_parses_a_page_with_no_service_to_reach(
    site: SiteServer, tmp_path: Path
) -> None:
    """As a user runs it: the services' addresses lead nowhere, and it does not matter."""
    shop(site)
    env = environment(
        MEMCACHED_SERVERS="127.0.0.1:9",
        RABBITMQ_URL="amqp://127.0.0.1:9",
        PYTHONPATH=str(PROJECT_ROOT),
    )
    run = subprocess.run(
        [str(BIN / "crawler"), "parse", site.url("/shop/p/1"), "--handler", ROUTER,
         "--label", "product"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.startswith(f"# Page\n200 {site.url('/shop/p/1')}\n")
    assert '# Data\n{"name": "Tea", "data": null}\n' in run.stdout
