"""Canonical URLs, HTML link extraction, scope, and options in messages."""

from __future__ import annotations

import codecs
import random

import pytest
from dramatiq import Message
from dramatiq.brokers.stub import StubBroker

from crawler import example
from crawler.brokers import QUEUE
from crawler.frontier.scope import links_to_follow
from crawler.links.canonical import _canonicalise, canonical_url
from crawler.links.extraction import html_links, page_encoding
from crawler.options import CrawlOptions
from tests.site_server import SiteServer, html


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://Example.COM:80/a", "http://example.com/a"),
        ("https://example.com:443", "https://example.com/"),
        ("http://example.com:8080/a#frag", "http://example.com:8080/a"),
        ("http://example.com/%7euser/%2fx%2Fy", "http://example.com/~user/%2Fx%2Fy"),
        ("http://example.com/p?b=2&a=1", "http://example.com/p?b=2&a=1"),
        ("http://[::1]:80/x", "http://[::1]/x"),
    ],
)
def test_canonical_url(url: str, canonical: str) -> None:
    assert canonical_url(url) == canonical


def test_the_fast_path_for_canonical_urls_agrees_with_the_full_one() -> None:
    rng = random.Random(7)
    starts = ["http://", "https://", "HTTP://", "http:", "ftp://", ""]
    hosts = ["h", "h.example", "H.example", "h-1.example.", "127.0.0.1", "[::1]", "u:p@h", "h_x"]
    # labels and host names at and just past what DNS carries (63 and 253 characters)
    long_host = ".".join(["a" * 63] * 4)
    hosts += ["a" * 63, "a" * 64, "a..b", long_host[:252], long_host[:253], long_host[:254]]
    ports = ["", ":80", ":443", ":8080", ":080", ":0", ":65535", ":65536", ":99999", ":x", ":"]
    pieces = ["/", "a", "Z", "_", "%7e", "%7E", "%2f", "%", "?", "=", "&", "#f", "~", ":", "@",
              ";", "!", " ", "é", "[", "]", "\\", "//", ".."]  # fmt: skip
    for _ in range(5000):
        url = rng.choice(starts) + rng.choice(hosts) + rng.choice(ports)
        url += "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 7)))
        try:
            expected = _canonicalise(url)
        except ValueError:  # urlsplit refuses it: the fast path must not take it either
            with pytest.raises(ValueError):
                canonical_url.__wrapped__(url)
            continue
        assert canonical_url.__wrapped__(url) == expected, url


def test_html_links_cope_with_quoting_case_attributes_entities_and_base() -> None:
    body = (
        b'<html><head><BASE HREF="http://h/dir/"></head><body>'
        b"<A HREF='one.html'>1</A>"
        b'<a class="c" id=x href=two.html?a=1&amp;b=2#top>2</a>'
        b'<a href="../up.html">3</a><a name="no-href">4</a>'
        b'<a href="caf\xe9.html">5</a><a href="http://other/abs.html">6</a>'
    )

    assert html_links(body, "http://h/page.html") == [
        "http://h/dir/one.html",
        "http://h/dir/two.html?a=1&b=2",
        "http://h/up.html",
        "http://h/dir/caf%E9.html",
        "http://other/abs.html",
    ]


@pytest.mark.parametrize(
    ("content_type", "head"),
    [
        ("text/html; charset=ISO-8859-1", b""),
        ("text/html", b'<meta charset="latin1">'),
        (
            "text/html",
            b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">',
        ),
    ],
)
def test_a_latin1_page_s_hrefs_resolve_as_a_browser_sends_them(
    content_type: str, head: bytes
) -> None:
    body = head + b'<a href="caf\xe9.html?q=\xe9t\xe9">1</a><a href="\x80uro">2</a>'

    assert html_links(body, "http://h/page.html", content_type) == [
        "http://h/caf%C3%A9.html?q=%E9t%E9",  # path in UTF-8, query in the page's encoding
        "http://h/%E2%82%ACuro",  # windows-1252's euro sign, as browsers read latin-1
    ]


@pytest.mark.parametrize("charset", ["base64", "rot13", "idna", "no-such-charset", "utf-16"])
def test_a_charset_no_browser_reads_a_page_in_is_taken_as_utf8(charset: str) -> None:
    body = f'<meta charset="{charset}"><a href="caf\u00e9.html">1</a>'.encode()

    assert html_links(body, "http://h/page.html") == ["http://h/caf%C3%A9.html"]


def test_a_byte_order_mark_decides_the_encoding_before_header_and_meta() -> None:
    """The HTML standard's sniffing: a BOM wins over ``<meta charset=windows-1252>``
    and over the header's charset."""
    page = '<meta charset="windows-1252"><a href="s?q=\u00e9">1</a>'
    body = codecs.BOM_UTF8 + page.encode("utf-8")

    assert page_encoding(body, "text/html; charset=windows-1252") == "utf-8"
    assert html_links(body, "http://h/p.html", "text/html; charset=windows-1252") == [
        "http://h/s?q=%C3%A9"
    ]
    utf16 = codecs.BOM_UTF16_LE + page.encode("utf-16-le")
    assert html_links(utf16, "http://h/p.html") == ["http://h/s?q=%C3%A9"]


@pytest.mark.parametrize(
    ("label", "encoding"),
    [
        ("latin1", "cp1252"),
        ("ISO-8859-1", "cp1252"),
        ("us-ascii", "cp1252"),
        ("x-sjis", "cp932"),
        ("gb2312", "gbk"),
        ("unicode-1-1-utf-8", "utf-8"),
        ("x-user-defined", "cp1252"),
        ("iso-2022-kr", "utf-8"),  # the standard's replacement encoding: no links to read
        ("utf-16", "utf-8"),  # in a <meta>: the page said so in ASCII
    ],
)
def test_encoding_labels_are_read_by_the_whatwg_encoding_standard(
    label: str, encoding: str
) -> None:
    assert page_encoding(f'<meta charset="{label}">'.encode()) == encoding


def test_a_query_character_the_page_s_encoding_lacks_is_sent_as_its_reference() -> None:
    body = '<a href="s?q=\u4e2d&amp;r=\u00e9#x">1</a>'.encode("cp1252", "xmlcharrefreplace")

    assert html_links(body, "http://h/page.html", "text/html; charset=windows-1252") == [
        "http://h/s?q=%26%2320013%3B&r=%E9"
    ]


def test_a_utf8_page_with_bytes_that_are_not_utf8_keeps_them_percent_encoded() -> None:
    body = '<meta charset="utf-8"><a href="caf\u00e9.html">1</a>'.encode() + (
        b'<a href="bad\xff\xfe.html?x=\xe9">2</a><a href="/plain">3</a>'
    )

    assert html_links(body, "http://h/dir/page.html") == [
        "http://h/dir/caf%C3%A9.html",
        "http://h/dir/bad%FF%FE.html?x=%E9",
        "http://h/plain",
    ]


def test_links_to_follow_keeps_allowed_domains_and_subdomains_within_depth() -> None:
    options = CrawlOptions(allowed_domains=("example.com",), max_depth=2)
    anchors = [
        "http://example.com/a",
        "http://EXAMPLE.com:80/a#x",
        "http://www.example.com/b",
        "http://notexample.com/c",
        "http://example.com.evil.test/d",
    ]

    assert links_to_follow(anchors, options, depth=1) == (
        ["http://example.com/a", "http://www.example.com/b"],
        [],
    )
    assert links_to_follow(anchors, options, depth=2) == ([], [])


def test_options_travel_only_when_set_and_come_back_equal() -> None:
    options = CrawlOptions(crawl_id="c1", allowed_domains=("a.test",), max_pages=5)

    assert CrawlOptions().to_message() is None
    assert CrawlOptions.from_message(options.to_message()) == options
    assert CrawlOptions.from_message(None) == CrawlOptions()


def test_crawl_with_the_url_alone_is_upstreams_crawl(
    site: SiteServer, stub_broker: StubBroker
) -> None:
    site.pages["/"] = html("http://127.0.0.1:1/a.html", "/relative.html")

    example.crawl(site.url("/"))

    queue = stub_broker.queues[QUEUE]
    sent = [Message.decode(queue.get_nowait()) for _ in range(queue.qsize())]
    assert [(m.args, m.kwargs) for m in sent] == [(("http://127.0.0.1:1/a.html",), {"depth": 1})]
