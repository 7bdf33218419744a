"""robots.txt as RFC 9309 reads it, and as Google's parser does where the RFC leaves room.

Every case goes through :func:`politeness.robots_for` as a crawl's check does (the
robots.txt put in the store first, so nothing is fetched), then asks the rules with the
crawl's whole ``User-Agent`` header, as :func:`politeness.check` does.  The cases are
built from RFC 9309's examples and section texts, and from behaviours Google's parser
is known for (written here anew).  Then real ``crawler crawl --local`` runs obey a
robots.txt that starts with a byte-order mark, one with groups for words of the
default header, one naming ``--user-agent``'s product token, and one with a
``Crawl-delay`` between two ``User-agent`` lines.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from protego import Protego

from crawler.environment import Limits
from crawler.frontier import politeness, robots_rules
from crawler.options import DEFAULT_USER_AGENT
from crawler.stores.memory import MemoryClient
from tests.site_server import Page, SiteServer, html
from tests.support import read_records
from tests.workers import BIN, environment

SITE = "http://example.com"


def rules(robots_txt: str | bytes, user_agent: str) -> Protego:
    """What a crawl sending ``user_agent`` reads of ``robots_txt``: through the store,
    as :func:`politeness.check` reads it."""
    body = robots_txt.encode() if isinstance(robots_txt, str) else robots_txt
    client = MemoryClient()
    client.set(politeness.robots_key(SITE), body)
    with requests.Session() as unused:  # the store has it: nothing is fetched
        return politeness.robots_for(client, unused, SITE + "/", user_agent, limits=Limits())


def allowed(robots_txt: str | bytes, user_agent: str, path: str) -> bool:
    return bool(rules(robots_txt, user_agent).can_fetch(SITE + path, user_agent))


#: A case: its name, a robots.txt, the crawl's User-Agent header, the paths it allows
#: and the paths it disallows to that crawl (each list split at spaces).
Case = tuple[str, str | bytes, str, str, str]


def params(cases: list[Case]) -> list[object]:
    """One test a path of each case."""
    return [
        pytest.param(robots_txt, agent, path, verdict, id=f"{name}:{agent.split()[0]}:{path}")
        for name, robots_txt, agent, allows, disallows in cases
        for verdict, paths in ((True, allows), (False, disallows))
        for path in paths.split()
    ]


# --- RFC 9309's examples and section texts -----------------------------------------------

#: RFC 9309 §5.1, the simple example, as the RFC prints it.
RFC_SIMPLE = """User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""
#: RFC 9309 §5.2: the longest match wins.
RFC_LONGEST = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
#: RFC 9309 §2.2.1: two groups for one agent are merged into one.
RFC_MERGED = (
    "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: *\n"
    "disallow: /everyone\n\nuser-agent: ExampleBot\ndisallow: /baz\n"
)
#: RFC 9309 §2.2.1: the * groups, merged, for a crawler no group names.
RFC_STAR = (
    "user-agent: *\ndisallow: /x\n\nuser-agent: ExampleBot\ndisallow: /y\n\n"
    "user-agent: *\ndisallow: /z\n"
)
#: RFC 9309 §2.1: empty lines do not end a group; a user-agent line after its rules does.
RFC_GROUPS = "user-agent: FooBot\ndisallow: /\n\n\nallow: /w/\nuser-agent: BarBot\ndisallow: /w/\n"

RFC_CASES: list[Case] = [
    # §5.1: foobot only reaches its two allowed paths.
    ("5.1", RFC_SIMPLE, "foobot", "/example/page.html /example/allowed.gif",
     "/ /publications/ /example/other.html"),
    # §5.1: one group for two agents; the * group does not apply to them.
    ("5.1", RFC_SIMPLE, "barbot", "/example/other.html /a.gif", "/example/page.html"),
    ("5.1", RFC_SIMPLE, "bazbot", "/", "/example/page.html"),
    # §5.1: an empty group at the end allows everything.
    ("5.1", RFC_SIMPLE, "quxbot", "/example/page.html /a.gif", ""),
    # §5.1: any other crawler obeys *: *.gif$ anywhere, /example/, /publications/ allowed.
    ("5.1", RFC_SIMPLE, "otherbot", "/logo.gif?x=1 /publications/ /publications/a.gif /about",
     "/example/page.html /images/logo.gif"),
    ("5.2", RFC_LONGEST, "foobot", "/example/page/ /example/page/other.gif",
     "/example/page/disallowed.gif"),
    # §2.2.1: the product token is matched case-insensitively.
    ("2.2.1-case", "user-agent: ExampleBot\ndisallow: /foo\n", "EXAMPLEBOT", "/bar", "/foo"),
    ("2.2.1-case", "USER-AGENT: EXAMPLEBOT\nDISALLOW: /foo\n", "examplebot/1.0", "", "/foo"),
    ("2.2.1-merge", RFC_MERGED, "ExampleBot", "/everyone", "/foo /bar /baz"),
    ("2.2.1-star", RFC_STAR, "OtherBot", "/y", "/x /z"),
    ("2.2.1-star", RFC_STAR, "ExampleBot", "/x /z", "/y"),
    # §2.2.1: no group for the crawler and no * group, or no group at all: no rule applies.
    ("2.2.1-none", "user-agent: ExampleBot\ndisallow: /\n", "OtherBot", "/x", ""),
    ("2.2.1-none", "", "OtherBot", "/x", ""),
    ("2.2.1-none", "# nothing but a comment\n", "OtherBot", "/x", ""),
    # §2.2.2: allow wins when an allow and a disallow rule are equivalent.
    ("2.2.2-tie", "user-agent: *\nallow: /folder\ndisallow: /folder\n", "a", "/folder/page", ""),
    ("2.2.2-tie", "user-agent: *\ndisallow: /folder\nallow: /folder\n", "a", "/folder", ""),
    # §2.2.2: matching is case-sensitive and starts with the path's first octet.
    ("2.2.2-case", "user-agent: *\ndisallow: /Private\n", "a", "/private /x/Private", "/Private"),
    # §2.2.2: the query is part of what is matched.
    ("2.2.2-query", "user-agent: *\ndisallow: /\nallow: /foo/bar?baz=quz\n", "a",
     "/foo/bar?baz=quz", "/foo/bar?baz=other"),
    # §2.2.2's table: non-ASCII octets are percent-encoded, on both sides, before comparing.
    ("2.2.2-encoding", "user-agent: *\ndisallow: /\nallow: /foo/bar/\u30c4\n", "a",
     "/foo/bar/%E3%83%84 /foo/bar/\u30c4", "/foo/bar/x"),
    ("2.2.2-encoding", "user-agent: *\ndisallow: /\nallow: /foo/bar/%E3%83%84\n", "a",
     "/foo/bar/%E3%83%84 /foo/bar/\u30c4", "/foo/bar/x"),
    # §2.2.2's table: percent-encoded unreserved characters match their plain form.
    ("2.2.2-encoding", "user-agent: *\ndisallow: /\nallow: /foo/bar/%62%61%7A\n", "a",
     "/foo/bar/baz", "/foo/bar/qux"),
    # §2.2.2: rules before the first user-agent line are in no group: ignored.
    ("2.2.2-outside", "disallow: /x\n\nuser-agent: *\ndisallow: /y\n", "a", "/x", "/y"),
    # §2.2.2: /robots.txt itself is always allowed.
    ("2.2.2-robots", "user-agent: *\ndisallow: /\n", "a", "/robots.txt", "/robots.txt.bak"),
    # §2.2.3: "$" ends the pattern, "*" stands for any octets, "#" starts a comment.
    ("2.2.3", "user-agent: *\ndisallow: /\nallow: /this/path/exactly$\n", "a",
     "/this/path/exactly", "/this/path/exactly/not /this/path/exactly?q"),
    ("2.2.3", "user-agent: *\ndisallow: /\nallow: /this/*/exactly\n", "a",
     "/this/a/exactly /this/a/b/exactly", "/this/exactly"),
    ("2.2.3", "user-agent: *\ndisallow: /a # not /a/b\nallow: /a/b\n# disallow: /c\n", "a",
     "/a/b /c", "/a/x"),
    # §2.2.3: special characters meant literally are percent-encoded in the rule.
    ("2.2.3-literal", "user-agent: *\ndisallow: /path/file-with-a-%2A.html\n"
     "disallow: /path/foo-%24\n", "a", "/path/file-with-a-x.html /path/foo-",
     "/path/file-with-a-*.html /path/foo-$"),
    # §2.2.4: other records (Sitemap, Crawl-delay, unknown ones) do not end a group.
    ("2.2.4", "user-agent: FooBot\nsitemap: https://example.com/s.xml\nuser-agent: *\n"
     "disallow: /\n", "FooBot", "", "/x"),
    ("2.2.4", "user-agent: FooBot\ncrawl-delay: 5\nuser-agent: *\ndisallow: /\n", "FooBot",
     "", "/x"),
    ("2.2.4", "user-agent: FooBot\nsome-record: its value\nuser-agent: *\ndisallow: /\n",
     "FooBot", "", "/x"),
    ("2.2.4", "user-agent: FooBot\nrequest-rate: 1/5\nuser-agent: BarBot\ndisallow: /x\n"
     "user-agent: *\ndisallow: /y\n", "FooBot", "/y", "/x"),
    ("2.1", RFC_GROUPS, "FooBot", "/w/a", "/v/a"),
    ("2.1", RFC_GROUPS, "BarBot", "/v/a", "/w/a"),
    # §2.2: NL is CR, LF or CRLF.
    ("2.2-nl", "user-agent: *\r\ndisallow: /a\r\n", "a", "/b", "/a"),
    ("2.2-nl", "user-agent: *\rdisallow: /a\rallow: /a/b", "a", "/a/b", "/a"),
]  # fmt: skip

# --- as Google's parser reads what the RFC leaves open -------------------------------------

GOOGLE_LIKE_CASES: list[Case] = [
    # A UTF-8 byte-order mark before the first line is skipped, whole or in part.
    ("bom", "\ufeffUser-agent: *\nDisallow: /\n", "a", "", "/x"),
    ("bom", b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n", "a", "/y", "/x"),
    ("bom", b"\xef\xbbUser-agent: *\nDisallow: /x\n", "a", "/y", "/x"),
    ("bom", b"\xefUser-agent: *\nDisallow: /x\n", "a", "/y", "/x"),
    # ... but only there: anywhere else it spoils its line.
    ("bom", "User-agent: *\n\ufeffDisallow: /x\nDisallow: /y\n", "a", "/x", "/y"),
    # Keys in any case, a missing colon, common misspellings.
    ("keys", "USER-AGENT: *\nDISALLOW: /x\nAlLoW: /x/y\n", "a", "/x/y", "/x"),
    ("keys", "user-agent *\ndisallow /x\n", "a", "/y", "/x"),
    ("keys", "useragent: *\ndissallow: /x\ndisalow: /y\n", "a", "/z", "/x /y"),
    ("keys", "user agent: *\ndisallow: /x\n", "a", "/y", "/x"),
    # A user-agent value is read up to its first character outside [a-zA-Z_-].
    ("agent", "user-agent: *\ndisallow: /\nuser-agent: FooBot Images\nallow: /\n", "FooBot",
     "/x", ""),
    ("agent", "user-agent: FooBot/2.1\ndisallow: /x\n", "foobot", "/y", "/x"),
    ("agent", "user-agent: *bot\ndisallow: /x\n", "foobot", "/x", ""),
    ("agent", "user-agent: * everyone\ndisallow: /x\n", "foobot", "/y", "/x"),
    # A group naming the crawler hides the * group, even with no rule of its own.
    ("specific", "user-agent: *\ndisallow: /x/\nuser-agent: FooBot\ndisallow: /y/\n", "FooBot",
     "/x/page", "/y/page"),
    ("specific", "user-agent: *\ndisallow: /\nuser-agent: FooBot\ndisallow:\n", "FooBot",
     "/x", ""),
    # Empty rules allow; a longer match beats a shorter one either way.
    ("longest", "user-agent: *\ndisallow:\nallow:\n", "a", "/x", ""),
    ("longest", "user-agent: *\nallow: /page\ndisallow: /*.html\n", "a", "/page",
     "/page.html"),
    ("longest", "user-agent: *\nallow: /x/page.\ndisallow: /*.html\n", "a", "/x/page.html",
     "/x/y.html"),
    ("longest", "user-agent: *\ndisallow: /x\nallow: /x/\n", "a", "/x/", "/x"),
    # Google's path examples: a prefix, a "*" that adds nothing, a directory, a suffix.
    ("paths", "user-agent: *\ndisallow: /\nallow: /fish\n", "a",
     "/fish /fish.html /fishheads/yummy.html", "/Fish.asp /catfish /?id=fish"),
    ("paths", "user-agent: *\ndisallow: /\nallow: /fish*\n", "a", "/fish /fish/salmon.html",
     "/catfish"),
    ("paths", "user-agent: *\ndisallow: /\nallow: /fish/\n", "a", "/fish/ /fish/?salmon",
     "/fish /fish.html"),
    ("paths", "user-agent: *\ndisallow: /\nallow: /*.php$\n", "a", "/folder/filename.php",
     "/filename.php?parameters /filename.php5 /windows.PHP"),
    ("paths", "user-agent: *\ndisallow: /\nallow: /$\n", "a", "/", "/page.html"),
    # Google: allowing a directory's index.html allows the directory itself.
    ("index", "user-agent: *\nallow: /dir/index.html\ndisallow: /\n", "a",
     "/dir/ /dir/index.html", "/dir/index.htm /other"),
]  # fmt: skip

# --- the crawler's own User-Agent header -----------------------------------------------------

#: The header of ``--user-agent 'MyBot/1.0 (+https://example.com/bot)'``: its token, MyBot.
MY_BOT = "MyBot/1.0 (+https://example.com/bot)"

USER_AGENT_CASES: list[Case] = [
    # Words of the default header are not its product token ...
    *(
        (word, f"user-agent: {word}\ndisallow: /\n", DEFAULT_USER_AGENT, "/x", "")
        for word in ("github", "dramatiq", "crawler", "master", "Bogdanp", "examples", "0")
    ),
    # ... nor is a prefix of it; the token itself is, in any case.
    ("prefix", "user-agent: dramatiq-c\ndisallow: /\n", DEFAULT_USER_AGENT, "/x", ""),
    ("token", "user-agent: *\ndisallow: /\nuser-agent: Dramatiq-Crawler\nallow: /\n",
     DEFAULT_USER_AGENT, "/x", ""),
    ("token", "user-agent: github\ndisallow: /\nuser-agent: *\ndisallow: /private/\n",
     DEFAULT_USER_AGENT, "/x", "/private/x"),
    # --user-agent sets the token: MyBot, not the words of its URL.
    ("flag", "user-agent: example\ndisallow: /\nuser-agent: mybot\ndisallow: /private/\n",
     MY_BOT, "/x", "/private/x"),
    ("flag", "user-agent: com\ndisallow: /\nuser-agent: bot\ndisallow: /\n", MY_BOT, "/x", ""),
]  # fmt: skip

CASES = RFC_CASES + GOOGLE_LIKE_CASES + USER_AGENT_CASES


@pytest.mark.parametrize(("robots_txt", "user_agent", "path", "verdict"), params(CASES))
def test_robots_txt_allows_as_rfc_9309_and_google_read_it(
    robots_txt: str | bytes, user_agent: str, path: str, verdict: bool
) -> None:
    assert allowed(robots_txt, user_agent, path) is verdict


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        (DEFAULT_USER_AGENT, "dramatiq-crawler"),
        (MY_BOT, "MyBot"),
        ("Foo_Bar-baz", "Foo_Bar-baz"),
        ("FooBot 2", "FooBot"),
        ("Mozilla/5.0 (compatible; ExampleBot/0.1)", "Mozilla"),
        ("2fast/1.0", ""),
    ],
)
def test_the_product_token_is_the_headers_leading_letters_hyphens_and_underscores(
    user_agent: str, token: str
) -> None:
    assert robots_rules.product_token(user_agent) == token


def test_a_group_starting_with_no_token_is_obeyed_by_none_but_star_still_applies() -> None:
    robots_txt = "user-agent: *\ndisallow: /x\nuser-agent: 2fast\ndisallow: /y\n"
    assert not allowed(robots_txt, "2fast/1.0", "/x")
    assert allowed(robots_txt, "2fast/1.0", "/y")


def test_a_crawl_delay_between_two_user_agent_lines_is_the_whole_groups() -> None:
    robots_txt = "user-agent: FooBot\ncrawl-delay: 5\nuser-agent: BarBot\ndisallow: /x\n"
    assert rules(robots_txt, "FooBot/1.0").crawl_delay("FooBot/1.0") == 5
    assert rules(robots_txt, "BarBot").crawl_delay("BarBot") == 5
    assert rules(robots_txt, "QuxBot").crawl_delay("QuxBot") is None


def test_the_crawl_delay_is_the_product_tokens_not_a_word_of_the_header() -> None:
    robots_txt = "user-agent: github\ncrawl-delay: 60\n\nuser-agent: *\ncrawl-delay: 0.5\n"
    assert rules(robots_txt, DEFAULT_USER_AGENT).crawl_delay(DEFAULT_USER_AGENT) == 0.5


def test_sitemap_lines_count_anywhere_a_bom_and_a_group_notwithstanding() -> None:
    robots_txt = (
        "\ufeffSitemap: https://example.com/first.xml\nuser-agent: github\n"
        "sitemap: https://example.com/second.xml\ndisallow: /\n"
    )
    assert list(rules(robots_txt, DEFAULT_USER_AGENT).sitemaps) == [
        "https://example.com/first.xml",
        "https://example.com/second.xml",
    ]


def test_characters_protego_would_split_or_strip_at_stay_in_their_rule() -> None:
    """U+2028 and a form feed end a line for ``str.splitlines``; RFC 9309 ends lines at
    CR and LF alone, so the rule after them is the same rule."""
    robots_txt = "user-agent: *\ndisallow: /a\u2028b\ndisallow: /c\x0cd\n"
    assert not allowed(robots_txt, "a", "/a%E2%80%A8b")
    assert allowed(robots_txt, "a", "/a")
    assert not allowed(robots_txt, "a", "/c%0Cd")
    assert allowed(robots_txt, "a", "/c")


# --- real crawls ---------------------------------------------------------------------------

#: robots.txt bodies each disallowing /private/ to the crawl's User-Agent (and nothing
#: else), and the ``--user-agent`` each crawl sends (none: the default).
OBEYED = {
    "bom": (b"\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n", None),
    "github-group": (
        b"User-agent: github\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n",
        None,
    ),
    "user-agent-flag": (
        b"User-agent: example\nDisallow: /\n\nUser-agent: MYBOT\nDisallow: /private/\n",
        MY_BOT,
    ),
    "crawl-delay-inside": (
        b"User-agent: dramatiq-crawler\nCrawl-delay: 0.01\nUser-agent: *\nDisallow: /private/\n",
        None,
    ),
}


@pytest.fixture
def private_site(site: SiteServer) -> Iterator[SiteServer]:
    """A site whose home links to /a.html and /private/b.html."""
    site.pages["/"] = html(site.url("/a.html"), site.url("/private/b.html"))
    site.pages["/a.html"] = html()
    site.pages["/private/b.html"] = html()
    yield site


@pytest.mark.parametrize("name", OBEYED)
def test_a_local_crawl_obeys_robots_txt_as_rfc_9309_reads_it(
    private_site: SiteServer, tmp_path: Path, name: str
) -> None:
    body, user_agent = OBEYED[name]
    private_site.pages["/robots.txt"] = Page(body, content_type="text/plain")
    output = tmp_path / "records.jsonl"
    flags = [] if user_agent is None else ["--user-agent", user_agent]

    crawl = subprocess.run(
        [str(BIN / "crawler"), "crawl", "--local", private_site.url("/"), *flags,
         "-o", str(output)],
        cwd=tmp_path, env=environment(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert crawl.returncode == 0, crawl.stderr
    assert set(private_site.fetch_counts()) == {"/robots.txt", "/", "/a.html"}
    outcomes = {r["url"]: r["outcome"] for r in read_records(output)}
    assert outcomes == {private_site.url("/"): "crawled", private_site.url("/a.html"): "crawled"}
    assert "1 disallowed by robots.txt" in crawl.stdout
    assert {r.user_agent for r in private_site.requests} == {user_agent or DEFAULT_USER_AGENT}
