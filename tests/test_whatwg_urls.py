"""Links as browsers read them: the web-platform-tests' URL test data (as Debian's Rust
``url`` crate ships it; ``scripts/services.py`` installs it) against the crawler's own
way from an ``href`` on a page to the URL it crawls: cleaned (``clean_href``),
resolved against the page (``html_links``' join), canonical (``canonical_url``).

Every http(s) case is checked, with the crawler's documented steps applied to the
expected URL too: no fragment, escapes of unreserved characters decoded (and the
others' hex digits upper-cased), a port 0 refused (no server listens on it), and a
host name DNS cannot carry refused (an empty label, a label over 63 characters)."""

from __future__ import annotations

import glob
import json
import re
from typing import Any

import pytest

from crawler.links.canonical import _normalise_escapes, canonical_url, check_host_name
from crawler.links.cleaning import clean_href
from crawler.links.extraction import _join

#: Where Debian's librust-url-dev puts the web-platform-tests' urltestdata.json.
TEST_DATA = "/usr/share/cargo/registry/url-*/tests/urltestdata.json"


def cases() -> list[dict[str, Any]]:
    found = sorted(glob.glob(TEST_DATA))
    assert found, f"no {TEST_DATA}: install Debian's librust-url-dev (scripts/services.py does)"
    with open(found[-1], encoding="utf-8") as data:
        return [case for case in json.load(data) if isinstance(case, dict)]


def http_cases() -> list[dict[str, Any]]:
    """The cases of an http(s) base, or of an absolute http(s) input without one."""
    chosen = []
    for case in cases():
        if case.get("base") == "about:blank":  # the older files' way of saying "none"
            case["base"] = None
        base = case.get("base") or ""
        if base.startswith(("http:", "https:")) or (
            not base and re.match(r"(?i)\s*https?:", case["input"])
        ):
            chosen.append(case)
    return chosen


def crawled(base: str | None, href: str) -> str:
    """What the crawler makes of ``href`` on a page at ``base``: the URL it would crawl,
    or ``ValueError`` for a link it drops as malformed."""
    cleaned = clean_href(href)
    return canonical_url(_join(base, cleaned) if base else cleaned)


def expected(case: dict[str, Any]) -> str | None:
    """The standard's URL with the crawler's own steps, or None for a failure."""
    if case.get("failure") or case["port"] == "0":
        return None
    if case["protocol"] not in ("http:", "https:"):
        return "not http(s)"
    try:  # a host name DNS cannot carry (an empty label: "." or "..") is refused
        if case["hostname"] and not case["hostname"].startswith("["):
            check_host_name(case["hostname"])
    except ValueError:
        return None
    href = case["href"].partition("#")[0]
    scheme, separator, rest = href.partition("://")
    authority, slash, tail = rest.partition("/")
    path, question, query = tail.partition("?")
    return (
        f"{scheme}{separator}{authority}{slash}{_normalise_escapes(path)}"
        f"{question}{_normalise_escapes(query)}"
    )


def test_the_crawler_reads_every_http_case_of_the_web_platform_tests_as_browsers_do() -> None:
    checked = http_cases()
    assert len(checked) > 250
    wrong: list[tuple[str, str | None, str | None, str | None]] = []
    for case in checked:
        want = expected(case)
        try:
            got: str | None = crawled(case.get("base"), case["input"])
        except ValueError:
            got = None
        if want == "not http(s)":
            if got is not None and got.startswith(("http:", "https:")):
                wrong.append((case["input"], case.get("base"), "a non-http(s) URL", got))
            continue
        if got != want:
            wrong.append((case["input"], case.get("base"), want, got))
    assert wrong == [], f"{len(wrong)} of {len(checked)} differ; first: {wrong[:10]}"


@pytest.mark.parametrize(
    ("base", "href", "url"),
    [
        ("http://example.com/a/", "http://example\t.\norg", "http://example.org/"),
        ("http://example.com/a/", "\\x", "http://example.com/x"),
        ("http://example.com/", "http:\\\\foo.com\\", "http://foo.com/"),
        (None, "HTTP://EXAMPLE.com:80/a/../b/./c", "http://example.com/b/c"),
        ("http://example.com/", "https:example.com/", "https://example.com/"),
        (None, "http://[::127.0.0.1]/", "http://[::7f00:1]/"),
        (None, "http://bücher.de/a%7e?q=%7e", "http://xn--bcher-kva.de/a~?q=~"),
        (None, "http:///path", "http://path/"),  # a special URL skips the extra slashes
    ],
)
def test_the_issues_examples_resolve_as_browsers_do(base: str | None, href: str, url: str) -> None:
    assert crawled(base, href) == url


@pytest.mark.parametrize(
    "href",
    [
        "http://exa mple.com/",
        "http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff05\uff12\uff45com/",
        "http://h:0/",
    ],
)
def test_host_names_no_browser_accepts_are_refused_where_the_link_is_read(href: str) -> None:
    with pytest.raises(ValueError):
        crawled(None, href)
