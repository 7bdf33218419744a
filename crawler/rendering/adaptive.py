"""``--render auto``: which pages need a browser, learned by the crawl as it goes.

Each page is fetched as any.  Whether it is rendered too follows from its **kind** and
from the static page itself:

* its kind (:func:`page_kind`): the handler route's label, or its URL's pattern (its
  host, its path with numbers and ids generalised, its query's names), so that
  ``/item/17.html`` and ``/item/18.html`` are one kind;
* what the crawl learnt of the kind, kept in the crawl's store, where every worker and
  thread reads and adds to it (:func:`verdict_of`, :func:`learn`): a kind not yet known
  renders samples, at most :data:`SAMPLES` at once (its other pages wait in the broker
  meanwhile: :func:`take_sample`); each sample's rendered links are compared with the
  static page's (:func:`new_links`): one the browser finds more links in makes the kind
  ``needs`` (every page of it rendered from then on), :data:`SAMPLES` that agree make
  it ``static`` (fetched only, one page in :data:`RECHECK` rendered again and compared,
  which may still make it ``needs``);
* the static page (:func:`page_signal`): a ``<noscript>`` that asks for JavaScript, an
  empty application root (``<div id="root"></div>``), or scripts and no link at all
  make a page rendered whatever its kind.

Crawlee's AdaptivePlaywrightCrawler decides per kind of page from samples too, on one
machine; here one worker's samples serve the whole fleet.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

from crawler.frontier import counters
from crawler.stores.client import StoreClient

#: Samples of a kind rendered at once while it is not known; and that must agree (find
#: no link the static page lacks) for the kind to be fetched without the browser.
SAMPLES = 3
#: Of a kind known to be static, one page in this many is rendered again and compared.
RECHECK = 50
#: Seconds a sample's place is held at most (a worker killed while rendering one frees
#: its place then); the range of milliseconds a page waits in the broker while its
#: kind's samples are rendered.
SAMPLE_TTL = 15
SAMPLE_WAIT_MS = (300, 800)

#: What a kind is known to be.
NEEDS, STATIC = "needs", "static"

#: Why a page was rendered, or not (the record's ``render_reason``).
SAMPLE = "a sample of its kind"
CHECK = "a check of its kind"
KIND_NEEDS = "its kind needs a browser"
KIND_STATIC = "its kind is static"

_NUMBER = re.compile(r"\d+")
_ID = re.compile(r"^(?=[^/]*\d)[0-9a-fA-F-]{8,}$|^[A-Za-z0-9_-]{20,}$")
_NOSCRIPT = re.compile(rb"<noscript[^>]*>(?:(?!</noscript).){0,2000}?javascript", re.I | re.S)
_EMPTY_ROOT = re.compile(
    rb"<div[^>]*\sid=[\"']?(?:root|app|__next|__nuxt|svelte|main-app)[\"']?[^>]*>\s*</div>", re.I
)
_SCRIPT = re.compile(rb"<script", re.I)
_LINK = re.compile(rb"<a\s[^>]*href", re.I)


class Choice(NamedTuple):
    """Whether to render a page, and why (:data:`SAMPLE`...); ``compare``: its rendered
    links are compared with the static page's and the kind learns from them."""

    render: bool
    reason: str
    compare: bool = False


def page_kind(url: str, label: str | None = None) -> str:
    """The kind of page ``url`` is: ``label:LABEL`` for a page a handler's route
    labelled, else its host, its path with each number ``{n}`` and each id-like
    segment ``{id}``, and its query's names (``shop.test/item/{n}.html?color``)."""
    if label:
        return f"label:{label}"
    parts = urlsplit(url)
    segments = [
        "{id}" if _ID.match(segment) else _NUMBER.sub("{n}", segment)
        for segment in parts.path.split("/")
    ]
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True)})
    query = "?" + "&".join(names) if names else ""
    return f"{parts.hostname or ''}{'/'.join(segments) or '/'}{query}"


def page_signal(body: bytes) -> str | None:
    """What in the static page says it needs a browser, if anything."""
    if _NOSCRIPT.search(body):
        return "page: a <noscript> asks for JavaScript"
    if _EMPTY_ROOT.search(body):
        return "page: an empty application root"
    if _SCRIPT.search(body) and not _LINK.search(body):
        return "page: scripts and no links"
    return None


def new_links(static_links: list[str], rendered_links: list[str]) -> list[str]:
    """The http(s) links the browser found that the static page lacks (none: the two
    agree)."""
    found = set(static_links)
    return sorted({link for link in rendered_links if link.startswith(("http:", "https:"))} - found)


def _key(crawl_id: str, kind: str, name: str) -> str:
    digest = hashlib.blake2b(kind.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()
    return counters.crawl_key(crawl_id, f"render:{digest}:{name}")


def verdict_of(client: StoreClient, crawl_id: str, kind: str) -> str | None:
    """What the crawl knows of ``kind``: :data:`NEEDS`, :data:`STATIC`, or None yet."""
    known = client.get(_key(crawl_id, kind, "verdict"))
    return known.decode() if isinstance(known, bytes) else known


def take_sample(client: StoreClient, crawl_id: str, kind: str) -> str | None:
    """One of the :data:`SAMPLES` places of ``kind``'s samples rendered at once (its
    key, to :func:`give_back`), or None when all are taken."""
    for i in range(SAMPLES):
        key = _key(crawl_id, kind, f"sample:{i}")
        if client.add(key, b"1", time=SAMPLE_TTL):
            return key
    return None


def give_back(client: StoreClient, key: str) -> None:
    client.delete(key)


def checked_now(client: StoreClient, crawl_id: str, kind: str, lifetime: int) -> bool:
    """Whether this page of a static kind is the one in :data:`RECHECK` rendered again."""
    return counters.add_to(client, _key(crawl_id, kind, "seen"), 1, lifetime) % RECHECK == 0


def learn(client: StoreClient, crawl_id: str, kind: str, more: int, lifetime: int) -> None:
    """A sample or check of ``kind`` rendered: the browser found ``more`` links (or its
    handler items) the static page lacks.  Any makes the kind :data:`NEEDS` for good;
    :data:`SAMPLES` samples that found none make it :data:`STATIC`, unless it needs a
    browser already."""
    verdict = _key(crawl_id, kind, "verdict")
    if more:
        client.set(verdict, NEEDS.encode(), time=lifetime)
        return
    if counters.add_to(client, _key(crawl_id, kind, "agreed"), 1, lifetime) >= SAMPLES:
        client.add(verdict, STATIC.encode(), time=lifetime)
