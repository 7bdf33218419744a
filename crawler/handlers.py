"""Page handlers: a function of the user's that workers call for every HTML page fetched.

A handler takes a :class:`Page` and returns a ``dict`` (the page record's ``data``), or
None, or a :class:`Handled` naming extra URLs to follow besides the data; or it is a
generator that yields items (``dict``) and requests (:class:`Request`, or a URL) in any
order, as Scrapy's callbacks do (what it returns is the data); or an ``async def``
function (or async generator), run on the process's event loop (:class:`EventLoop`).
It may also follow the page's links a CSS selector picks (:meth:`Page.enqueue_links`).
HTML pages reach a handler; other responses too when it asks for their content type
(:func:`content_types`, or a :class:`Router`'s ``route(label, content_types=...)``).  A worker
loads the handlers its own configuration names (``crawler worker --handler
package.module:function``, or ``CRAWLER_HANDLERS``), never one a message names; a crawl
chooses one of them (the seeder's ``--handler``), and a message naming one the worker
did not load is refused and dead-lettered.

A handler that raises (anything: ``SystemExit``, ``KeyboardInterrupt`` and
``RecursionError`` too), runs past its timeout (the crawl's ``--handler-timeout``, else
``CRAWLER_HANDLER_TIMEOUT``: :meth:`Handlers.timeout_for`), or returns data strict JSON
cannot carry (not a ``dict``, NaN or Infinity, a lone surrogate, more than
:data:`MAX_DEPTH` levels deep) fails that page's handler step only: the page's record
says ``handler_error`` (``handler-failed:`` and a one-line summary), its links are
followed, and the fetch is not retried.

Each call runs in a daemon thread of its own, which the page waits for that timeout
at most, whether the handler runs Python or is blocked in C (a lock, a socket read):
past that the page goes on without it.  Python cannot stop a thread, so an abandoned
call runs on until it returns, by itself, its result dropped; it holds neither the
crawl nor a worker thread, and being a daemon thread it does not keep the process from
exiting.  A process keeps :data:`MAX_STUCK` such calls at most: beyond that, a handler
step fails at once.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import copy
import fnmatch
import importlib
import inspect
import json
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import requests
from selectolax.lexbor import LexborHTMLParser

from crawler.content.main_text import MainContent, main_content
from crawler.environment import ACTOR_TIME_LIMIT
from crawler.errors import InvalidMessage, shown
from crawler.items.files import FILE_URLS
from crawler.items.pipelines import DropItem, ItemPipeline, as_pipeline, name_of
from crawler.links.extraction import decoded, page_base, page_encoding, resolved, selected_links
from crawler.links.url_patterns import UrlPattern, UrlPatterns, url_matcher


@dataclass(frozen=True)
class Page:
    """What a handler is given of a page.

    Parameters:
      url(str): The URL the crawl asked for.
      final_url(str): The URL the body came from, after redirects.
      status(int): The HTTP status.
      headers(Mapping): The response's headers (case-insensitive keys).
      body(bytes): The body, decompressed.
    """

    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    #: The label of the :class:`Request` that led here (None: a seed, or a plain link).
    label: str | None = None
    #: The data of that :class:`Request`: what the page that found this one passed on.
    data: Mapping[str, Any] | None = None
    #: With ``--render``: the page's DOM as headless Chromium left it, as HTML (None:
    #: the page was not rendered).
    rendered: str | None = None
    #: The requests :meth:`enqueue_links` added, in order; followed as the handler's own
    #: (:func:`with_enqueued`).
    _enqueued: list[Request] = field(default_factory=list, init=False, repr=False, compare=False)

    def urljoin(self, href: str) -> str:
        """``href`` resolved against the page as the crawler resolves the page's links:
        by the WHATWG URL Standard, against its ``<base href>`` or ``final_url``
        (:attr:`base`); ``\\\\other.example/x`` is on ``other.example``, as it is for the
        crawler and for browsers."""
        return resolved(self.base, href, page_encoding(self.body, self.headers.get("Content-Type")))

    @cached_property
    def base(self) -> str:
        """What the page's links are resolved against: an HTML page's ``<base href>``,
        else :attr:`final_url`."""
        if media_type(self.headers.get("Content-Type")) not in (
            "",
            "text/html",
            "application/xhtml+xml",
        ):
            return self.final_url
        return page_base(self.tree, self.final_url)

    @cached_property
    def text(self) -> str:
        """The body decoded in the page's encoding, as the link extractor decodes it
        (on first use)."""
        return decoded(self.body, self.headers.get("Content-Type"))

    @cached_property
    def main(self) -> MainContent:
        """The page's main content, without its navigation, header and footer (of its
        rendered DOM with ``--render``): :attr:`markdown`, :attr:`main_text` and its
        title (:mod:`crawler.content.main_text`; made on first use)."""
        return main_content(self.rendered if self.rendered is not None else self.body)

    @property
    def markdown(self) -> str:
        """The page's main content as Markdown: headings, lists, tables, code blocks
        and links kept; navigation, sidebars, header and footer left out."""
        return self.main.markdown

    @property
    def main_text(self) -> str:
        """The page's main content as plain text (:attr:`markdown` without its marks)."""
        return self.main.text

    def json(self) -> Any:
        """The body as JSON (a handler that takes ``application/json``: a JSON API's
        answer); ValueError when it is not JSON."""
        return json.loads(self.body)

    @cached_property
    def tree(self) -> LexborHTMLParser:
        """The parsed document (selectolax's Lexbor tree): parsed once, on first use,
        and shared with the link extractor; with ``--render``, the rendered DOM's."""
        return LexborHTMLParser(self.text if self.rendered is None else self.rendered)

    def enqueue_links(
        self,
        selector: str | None = None,
        *,
        include: UrlPatterns | None = None,
        exclude: UrlPatterns | None = None,
        label: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> list[Request]:
        """Follow the links of the page that ``selector`` picks, as Crawlee's
        ``enqueue_links`` does, and return the requests added.

        ``selector`` is a CSS selector over :attr:`tree` (None: every ``<a href>``); each
        element it matches that has an ``href`` gives a link, resolved as the crawler
        resolves the page's own (against ``<base href>`` or :attr:`final_url`, by the
        WHATWG URL Standard).  The http(s) links that a pattern of ``include`` matches
        (any of them; None: every link) and none of ``exclude`` (globs on the whole
        absolute URL, or compiled regexes searched in it:
        :mod:`crawler.links.url_patterns`) become, each once and in page order, a
        ``Request(url, label, data)`` followed as if the handler had returned it: the
        crawl's scope, robots.txt and budgets decide, as for its other requests.  A
        label or data a :class:`Request` may not carry raises ValueError here, and a
        selector selectolax cannot parse its ``SelectolaxError``: the handler's step
        fails, in its words.  A failed step follows none of them."""
        checked = _request(Request(self.final_url, label, data))
        wanted = url_matcher(include) if include else None
        unwanted = url_matcher(exclude) if exclude else None
        encoding = page_encoding(self.body, self.headers.get("Content-Type"))
        links = selected_links(self.tree, self.final_url, selector or "a[href]", encoding)
        added: list[Request] = []
        seen: set[str] = set()
        for link in links:
            if link in seen or not link.startswith(("http://", "https://")):
                continue
            seen.add(link)
            if (wanted is None or wanted(link)) and not (unwanted and unwanted(link)):
                added.append(Request(link, checked.label, checked.data))
        self._enqueued.extend(added)
        return added


def page_of(
    url: str,
    response: requests.Response,
    body: bytes,
    label: str | None = None,
    data: Mapping[str, Any] | None = None,
    rendered: str | None = None,
) -> Page:
    """The :class:`Page` of a response whose ``body`` was read, with the ``label`` and
    ``data`` its message carried (a :class:`Request`'s; a page's own links pass none on),
    and its DOM as rendered (``--render``)."""
    return Page(
        url=url,
        final_url=response.url,
        status=response.status_code,
        headers=response.headers,
        body=body,
        label=label,
        data=data,
        rendered=rendered,
    )


def with_enqueued(outcome: Outcome, page: Page) -> Outcome:
    """``outcome`` with the requests its handler added by ``page.enqueue_links()``,
    before those it returned; as it is when the step failed (none of its requests is
    followed) or none were added."""
    if outcome.error is not None or not page._enqueued:
        return outcome
    return replace(outcome, follow=[*page._enqueued, *outcome.follow])


def requests_followed(outcome: Outcome | None, base: str) -> tuple[list[Request], list[str]]:
    """The requests a handler asked to follow, their URLs resolved against the page's
    URL, and the refusals of those that are not http(s) (a ``file:`` URL, ``mailto:``),
    one line each.  Resolving never fails the page: a URL that cannot be resolved is
    kept absolute for :func:`crawler.frontier.scope.page_links_to_follow` to drop and
    count, as a page's own malformed link is."""
    if outcome is None:
        return [], []
    followed, refused = [], []
    for request in outcome.follow:
        url = _resolved(base, request.url)
        if url.startswith(("http://", "https://")):
            followed.append(replace(request, url=url))
        else:
            scheme = url.partition(":")[0] if ":" in url else url
            refused.append(
                refusal(request, f"a {shown(scheme)}: URL is not one the crawler fetches")
            )
    return followed, refused


def _resolved(base: str, url: str) -> str:
    """``url`` resolved against ``base`` by the WHATWG URL Standard, as the crawler
    resolves a page's links (:func:`crawler.links.extraction.resolved`); one the
    standard refuses (``http://[::1``, ``//[::1``) returned absolute, for the scope to
    drop with its reason."""
    return resolved(base, url)


@dataclass(frozen=True)
class Request:
    """A URL to follow with what the page it leads to should know: a ``label`` (what
    kind of page it is, for a :class:`Router`) and ``data`` (a JSON object), offered to
    that page's handler as ``page.label`` and ``page.data``; and how to ask for it, as
    Scrapy's and Crawlee's requests say it: its ``method``, ``headers`` on top of the
    crawl's, and a body (``body``, or ``json``, or ``form``: one of them).

    A request is fetched once a crawl, as a link is (the first claim wins): a GET by its
    URL, any other (or one with a body) by its method, URL and body.  ``unique_key``
    names it instead of its method and body (two requests for one URL with one key are
    one); ``always`` fetches it though its URL was fetched before, once for each such
    request of the page (a page redone after a crash asks for it once still).

    Parameters:
      url(str): Absolute, or relative to the page that returns it.
      label(str): At most :data:`MAX_LABEL` characters.
      data(dict): A JSON object; with the label, at most :data:`MAX_REQUEST_BYTES`
        bytes of JSON (it travels in the message).
      method(str): One of :data:`METHODS`.
      headers(dict): Header names and values, sent with this request on top of the
        crawl's (``--header``): at most :data:`MAX_HEADERS`.
      body(bytes|str): The body as it is (a string: UTF-8).
      json(object): The body as JSON (``Content-Type: application/json`` unless the
        headers name one).
      form(dict): The body as an HTML form sends it
        (``application/x-www-form-urlencoded``).
      unique_key(str): What the request is deduplicated by, with its URL.
      always(bool): Fetch it though its URL was fetched before.

    A body is :data:`MAX_BODY_BYTES` bytes at most; GET and HEAD take none.
    """

    url: str
    label: str | None = None
    data: dict[str, Any] | None = None
    method: str = "GET"
    headers: Mapping[str, str] | None = None
    body: bytes | str | None = None
    json: Any = None
    form: Mapping[str, Any] | None = None
    unique_key: str | None = None
    always: bool = False

    @property
    def plain(self) -> bool:
        """Whether it is a link as a page's own are (a GET, no headers, no key): it
        carries a label and data at most."""
        return (
            self.method == "GET" and not self.headers and self.body is None
            and self.json is None and self.form is None and self.unique_key is None
            and not self.always
        )  # fmt: skip

    @property
    def keyed(self) -> bool:
        """Whether it is deduplicated otherwise than by its URL alone (a method other
        than GET, a body, a ``unique_key``, ``always``)."""
        return (
            self.method != "GET" or self.body is not None or self.unique_key is not None
            or self.always
        )  # fmt: skip

    def arguments(self) -> dict[str, Any]:
        """What its message carries of how to ask for it (a checked request's), as the
        ``crawl`` actor's ``request`` argument (:mod:`crawler.messages`): its method,
        headers and body (base64), those that are not a GET's defaults."""
        carried: dict[str, Any] = {}
        if self.method != "GET":
            carried["method"] = self.method
        if self.headers:
            carried["headers"] = dict(self.headers)
        if isinstance(self.body, bytes):
            carried["body"] = base64.b64encode(self.body).decode("ascii")
        return carried


@dataclass(frozen=True)
class File:
    """A file for the crawl to download (``--files DIR``), yielded by a handler as an item
    of its own: the item ``{**data, "file_urls": [url]}``, which the crawl writes once the
    file is downloaded, with its ``files`` entry (path, digest, type: Scrapy's
    ``file_urls`` habit, which any item may use with several URLs).

    Parameters:
      url(str): Absolute, or relative to the page.
      data(dict): The item's other fields.
    """

    url: str
    data: dict[str, Any] | None = None

    def item(self) -> dict[str, Any]:
        return {**(self.data or {}), FILE_URLS: [self.url]}


#: The methods a :class:`Request` may use: those that ask for a page.
METHODS = ("GET", "HEAD", "POST")
#: A :class:`Request`'s body, in bytes at most: it travels in the message.
MAX_BODY_BYTES = 64 * 1024
#: A :class:`Request`'s headers, at most.
MAX_HEADERS = 32
#: A :class:`Request`'s ``unique_key``, in characters at most.
MAX_UNIQUE_KEY = 256
#: The headers a request may not set: the crawler's to send (its length, its host, the
#: crawl's User-Agent and cookies).
FORBIDDEN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


@dataclass(frozen=True)
class Handled:
    """What a handler may return instead of a ``dict``: the page record's ``data``, URLs
    to ``follow`` (strings or :class:`Request`, absolute or relative to the page), each
    subject to the crawl's scope, robots.txt and budgets like the page's own links (one
    that cannot be parsed dropped and counted as theirs are), and
    ``items``: JSON objects for the crawl's item sink (``--items``), any number a page."""

    data: dict[str, Any] | None = None
    follow: list[str | Request] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)


#: A page handler: a function (or any callable) of a :class:`Page`, which returns what
#: the module says, or yields it, or is ``async``.
Handler = Callable[[Page], Any]


def content_types(*patterns: str) -> Callable[[Handler], Handler]:
    """A decorator: the handler is given, besides HTML pages, the responses whose media
    type matches one of ``patterns`` (``"application/json"``, ``"text/*"``, ``"*/*"``),
    their body as ``page.body`` (``page.json()``, ``page.text``).  Other responses are
    not read (upstream's "not HTML")."""

    def mark(handler: Handler) -> Handler:
        handler.content_types = tuple(p.lower() for p in patterns)  # type: ignore[attr-defined]
        return handler

    return mark


def media_type(content_type: str | None) -> str:
    """``Content-Type``'s media type, lower-cased, without its parameters."""
    return (content_type or "").partition(";")[0].strip().lower()


def _matches(patterns: Iterable[str], media: str) -> bool:
    return bool(media) and any(fnmatch.fnmatchcase(media, pattern) for pattern in patterns)


def takes(handler: Handler, label: str | None, content_type: str | None) -> bool:
    """Whether ``handler`` is given a response of ``content_type`` that is not HTML, on a
    page of ``label``: its own :func:`content_types`, or its route's."""
    media = media_type(content_type)
    if isinstance(handler, Router):
        return handler.takes(label, media)
    return _matches(getattr(handler, "content_types", ()), media)


@dataclass(frozen=True)
class Outcome:
    """What came of a handler on one page: ``data`` for the record, the requests to
    ``follow``, its ``items``, or the ``error`` that failed the step."""

    data: dict[str, Any] | None = None
    follow: list[Request] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: The requests refused (:func:`refusal`: one line each), the others followed.
    refused: list[str] = field(default_factory=list)
    #: Items the crawl's item pipelines dropped (:mod:`crawler.items.pipelines`).
    dropped: int = 0
    #: The item pipelines' failures, a line each (``pipeline-failed: ...``), at most
    #: :data:`MAX_ITEM_ERRORS` (the last says how many more).
    item_errors: list[str] = field(default_factory=list)


#: A :class:`Request`'s label, in characters at most.
MAX_LABEL = 100
#: A :class:`Request`'s label and data, in bytes of JSON at most: they travel in each
#: message of that URL.
MAX_REQUEST_BYTES = 16 * 1024


class Router:
    """One handler a label: ``@router.route("item")`` for the pages a
    :class:`Request` labelled ``item`` leads to, ``@router.default`` for the others
    (seeds, plain links, labels without a route).  A router is a handler: name it as
    one, ``--handler module:router``.  A page with neither a route nor a default
    gets no data.  :meth:`label_links` labels links by their URL, wherever they are
    found."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.fallback: Handler | None = None
        #: The content types besides HTML each route takes (``route(content_types=)``).
        self.types: dict[str, tuple[str, ...]] = {}
        #: Stages of the user's own (``crawler.pipeline.Stage``: request and response
        #: hooks) that the crawls of this router run, at the handler's place.
        self.stages: list[Any] = []
        #: The rules of :meth:`label_links`, in the order they were given.
        self.link_labels: list[tuple[str, Callable[[str], bool]]] = []
        #: The item pipelines of this router's crawls (:meth:`item_pipeline`), in order.
        self.item_pipelines: list[Any] = []

    def item_pipeline(self, pipeline: Any) -> Any:
        """A decorator: each item this router's handlers yield passes through
        ``pipeline`` (a function of the item and the page, or a class with Scrapy's
        ``process_item``), in the order they were declared, before the crawl's
        ``--pipeline`` ones (:mod:`crawler.items.pipelines`)."""
        self.item_pipelines.append(as_pipeline(pipeline))  # a class made once, here
        return pipeline

    def label_links(self, label: str, *patterns: UrlPattern) -> None:
        """Label ``label`` every link a page of the crawl follows whose URL one of
        ``patterns`` matches (globs on the whole canonical URL, or compiled regexes
        searched in it: :mod:`crawler.links.url_patterns`), in the manner of Scrapy's
        ``CrawlSpider`` rules: the page's own links and its handler's requests that
        carry no label, wherever they are found, so that the first claim of such a URL
        carries its label (:func:`crawler.frontier.scope.page_links_to_follow`).  A
        request's own label stands; the first rule that matches a URL labels it.  Seeds
        and sitemaps' pages are not labelled.  ValueError for a label a
        :class:`Request` may not carry, or no pattern; TypeError for a pattern that is
        neither a glob nor a regex."""
        if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL:
            raise ValueError(f"a link label must be a string of 1 to {MAX_LABEL} characters")
        if not patterns:
            raise ValueError("label_links() needs at least one URL pattern")
        self.link_labels.append((label, url_matcher(patterns)))

    def link_label(self, url: str) -> str | None:
        """The label :meth:`label_links` gives ``url`` (None: no rule matches it)."""
        return next((label for label, matches in self.link_labels if matches(url)), None)

    def route(
        self, label: str, *, content_types: Iterable[str] = ()
    ) -> Callable[[Handler], Handler]:
        """A decorator: the handler of the pages labelled ``label``; given, besides HTML
        pages, the responses of ``content_types`` (``["application/json"]`` for a JSON
        API's pages)."""

        def register(handler: Handler) -> Handler:
            self.routes[label] = handler
            self.types[label] = tuple(pattern.lower() for pattern in content_types)
            return handler

        return register

    def _handler(self, label: str | None) -> Handler | None:
        handler = self.fallback if label is None else self.routes.get(label)
        return handler or self.fallback

    def takes(self, label: str | None, media: str) -> bool:
        """Whether the handler of a page of ``label`` takes a response of ``media`` type."""
        handler = self._handler(label)
        if handler is None:
            return False
        routed = self.types.get(label, ()) if label in self.routes else ()
        return _matches((*routed, *getattr(handler, "content_types", ())), media)

    def default(self, handler: Handler) -> Handler:
        """A decorator: the handler of the pages no route takes."""
        self.fallback = handler
        return handler

    def __call__(self, page: Page) -> Any:
        handler = self._handler(page.label)
        return None if handler is None else handler(page)


def load(spec: str) -> Handler:
    """The handler ``package.module:name`` names: a function, or any callable such as a
    :class:`Router`; ValueError saying what is wrong."""
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise ValueError(f"{spec!r} is not package.module:function")
    try:
        module = _import_here(module_name)
    except ImportError as e:
        raise ValueError(f"cannot import {module_name!r}: {e}") from e
    handler: Handler | None = getattr(module, name, None)
    if not callable(handler):
        raise ValueError(f"{module_name!r} has no function {name!r} (nor a Router)")
    return handler


def _import_here(module_name: str) -> ModuleType:
    """Import ``module_name``, from the current directory too, as ``dramatiq`` finds
    actors (its ``--path .``): ``crawler crawl --handler mine:f`` run where ``mine.py``
    is.  The directory joins the path only when the name is found nowhere else."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        here = os.getcwd()
        top = module_name.partition(".")[0]
        if e.name != top or here in sys.path or "" in sys.path:
            raise
    sys.path.append(here)
    return importlib.import_module(module_name)


class Handlers:
    """The handlers a process loaded, by the name a crawl chooses them with.

    Parameters:
      specs(Iterable): Their names, ``package.module:function``.
      timeout(float): Seconds a handler may take on one page.
    """

    def __init__(self, specs: Iterable[str] = (), timeout: float = 1.5) -> None:
        self.timeout = timeout
        self._loaded: dict[str, Handler] = {}
        #: The item pipelines made of what was loaded (a class made once).
        self._pipelines: dict[str, ItemPipeline] = {}
        #: Where ``async`` handlers run: one event loop for the process's handlers.
        self.loop = EventLoop()
        for spec in specs:
            self.load(spec)

    def load(self, spec: str) -> None:
        """Load one more (a worker's ``CRAWLER_HANDLERS``); ValueError when it cannot be
        loaded."""
        self._loaded[spec] = load(spec)

    def with_handler(self, name: str | None, function: Handler | None = None) -> Handlers:
        """A crawl's own handlers: these, and its handler ``name`` (``--local
        --handler``), loaded unless this process has it, or ``function`` when given (a
        :class:`crawler.api.Crawl`'s); these are left as they are.  ValueError when it
        cannot be loaded."""
        own = Handlers(timeout=self.timeout)
        own._loaded, own.loop = dict(self._loaded), self.loop
        if name is not None and (function is not None or name not in own._loaded):
            own._loaded[name] = load(name) if function is None else function
        return own

    def with_pipelines(self, specs: Iterable[str]) -> Handlers:
        """These handlers and a crawl's item pipelines (``--local --pipeline``), each
        loaded unless this process has it, and made (a class once); these are left as
        they are.  ValueError naming the first that cannot be loaded or made."""
        own = self.with_handler(None)
        own._pipelines = dict(self._pipelines)
        for spec in specs:
            if spec in own._pipelines:
                continue
            try:
                loaded = own._loaded[spec] if spec in own._loaded else load(spec)
                own._pipelines[spec] = as_pipeline(loaded)
            except ValueError as e:
                raise ValueError(f"{spec}: {e}") from e
            except Exception as e:  # a class that cannot be made: the user's code
                raise ValueError(f"{spec}: {_one_line(e)}") from e
            own._loaded[spec] = loaded
        return own

    @property
    def names(self) -> list[str]:
        return list(self._loaded)

    def chosen(self, name: str | None) -> Handler | None:
        """The handler a crawl's messages name (None: none); a name this process did not
        load is an :class:`~crawler.errors.InvalidMessage`."""
        if name is None:
            return None
        handler = self._loaded.get(name)
        if handler is None:
            loaded = ", ".join(self._loaded) or "none"
            raise InvalidMessage(
                f"message options: handler {shown(repr(name))} is not one this worker"
                f" loaded (CRAWLER_HANDLERS: {loaded})"
            )
        return handler

    def pipelines(self, names: Iterable[str]) -> list[ItemPipeline]:
        """The item pipelines a crawl's messages name (``--pipeline``), in order: loaded
        by this process as its handlers are (a class made once); a name it did not load
        is an :class:`~crawler.errors.InvalidMessage`."""
        chosen = []
        for name in names:
            pipeline = self._pipelines.get(name)
            if pipeline is None:
                loaded = self._loaded.get(name)
                if loaded is None:
                    raise InvalidMessage(
                        f"message options: pipeline {shown(repr(name))} is not one this worker"
                        f" loaded (CRAWLER_HANDLERS: {', '.join(self._loaded) or 'none'})"
                    )
                try:
                    pipeline = self._pipelines[name] = as_pipeline(loaded)
                except Exception as e:  # a class that cannot be made: the crawl's error
                    raise InvalidMessage(
                        f"message options: pipeline {shown(repr(name))}: {_one_line(e)}"
                    ) from e
            chosen.append(pipeline)
        return chosen

    def timeout_for(self, requested: float | None, fetch_deadline: float) -> float:
        """The seconds a handler may take on a page of a crawl that asked for
        ``requested`` (``--handler-timeout``; None: :attr:`timeout`, the worker's
        ``CRAWLER_HANDLER_TIMEOUT``), whose fetch may take ``fetch_deadline``: no more
        than the actor's time limit leaves after the fetch, :data:`TIME_LIMIT_MARGIN`
        kept for the page's links and record."""
        if requested is None:
            return self.timeout
        left = ACTOR_TIME_LIMIT - fetch_deadline - TIME_LIMIT_MARGIN
        return max(min(requested, left), MIN_TIMEOUT)

    def run(
        self,
        handler: Handler,
        page: Page,
        timeout: float | None = None,
        pipelines: Sequence[ItemPipeline] = (),
    ) -> Outcome:
        """Call ``handler`` on ``page`` in a thread of its own, its items passed through
        the item ``pipelines`` there, and wait ``timeout`` seconds (:attr:`timeout` when
        None) at most for what it made of it; past that, the step fails and the thread
        is abandoned (see :data:`MAX_STUCK`)."""
        timeout = self.timeout if timeout is None else timeout
        call = _Call(handler, page, self.loop, pipelines)
        with _stuck.lock:
            if _stuck.count >= MAX_STUCK:
                return Outcome(
                    error=f"handler-failed: {_stuck.count} handler calls are still running"
                    " past their timeout in this process; not starting another"
                )
        try:
            threading.Thread(
                target=call, name=f"page-handler {shown(page.url)}", daemon=True
            ).start()
        except RuntimeError as e:  # no thread to be had
            return Outcome(error=f"handler-failed: cannot start its thread: {_one_line(e)}")
        try:
            call.finished.wait(timeout)
        finally:
            with _stuck.lock:
                if call.outcome is None:  # still running: left to itself
                    call.abandoned = True
                    _stuck.count += 1
        if call.abandoned:
            call.cancel()  # an async handler's task is cancelled (a thread cannot be)
            return Outcome(error=f"handler-failed: took longer than {timeout:g}s")
        assert call.outcome is not None
        return call.outcome


#: Seconds of the actor's time limit a crawl's ``--handler-timeout`` leaves, after the
#: fetch's deadline, for the page's links and record.
TIME_LIMIT_MARGIN = 0.5
#: Seconds a handler is given at least, whatever is left of the time limit.
MIN_TIMEOUT = 0.01

#: Handler calls a process leaves running past their timeout at most: beyond that, a
#: handler step fails at once (``... still running past their timeout ...``) rather
#: than start one more thread, until some of them return.
MAX_STUCK = 32

#: How deeply a handler's data may nest, in dicts and lists (the data itself is level 1).
MAX_DEPTH = 100


def stuck() -> int:
    """How many handler calls of this process run on past their timeout, abandoned."""
    with _stuck.lock:
        return _stuck.count


class _Stuck:
    """How many handler threads of this process run past their timeout."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0


_stuck = _Stuck()


class EventLoop:
    """An event loop in a daemon thread of its own, started on first use: where a
    process's ``async`` handlers run (one loop, whichever thread's page they handle)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run ``coroutine`` on the loop: its future."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop, ready = asyncio.new_event_loop(), threading.Event()
                threading.Thread(
                    target=_run_loop, args=(loop, ready), name="page-handlers", daemon=True
                ).start()
                ready.wait()
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)


def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


class _Call:
    """One handler call on one page, run in a thread of its own: the handler, and the
    check of what it returned, so that whatever of the user's code runs is bounded by
    the timeout (a ``dict`` subclass's ``items``, an exception's ``__str__``, a
    generator's next item...).  An ``async`` handler runs on ``loop``, this thread
    waiting for it."""

    def __init__(
        self, handler: Handler, page: Page, loop: EventLoop, pipelines: Sequence[ItemPipeline]
    ) -> None:
        self.handler = handler
        self.page = page
        self.loop = loop
        self.pipelines = pipelines
        self.finished = threading.Event()
        self.outcome: Outcome | None = None
        self.abandoned = False
        self.future: concurrent.futures.Future[Any] | None = None

    def cancel(self) -> None:
        """Cancel an async handler's task that is still running (past its timeout)."""
        if self.future is not None:
            self.future.cancel()

    def made(self, returned: Any) -> Any:
        """What the handler made: what it returned, a generator's yields (collected), a
        coroutine's result (awaited on the loop)."""
        if inspect.iscoroutine(returned):
            self.future = self.loop.submit(returned)
            return self.future.result()
        if inspect.isasyncgen(returned):
            self.future = self.loop.submit(_collected_async(returned))
            return self.future.result()
        if inspect.isgenerator(returned):
            return _yielded(returned)
        return returned

    def through_pipelines(self, outcome: Outcome) -> Outcome:
        """``outcome`` with its items passed through :attr:`pipelines`, in order: each
        kept, changed or dropped; a pipeline that fails leaves the item as it was
        before it, and its error is said (:mod:`crawler.items.pipelines`)."""
        kept, dropped, errors = [], 0, []
        for item in outcome.items:
            for pipeline in self.pipelines:
                try:
                    made = self.made(pipeline(copy.deepcopy(item), self.page))
                    if made is None:
                        raise DropItem("returned None")
                    if not isinstance(made, dict):
                        raise ValueError(f"returned {type(made).__name__}, not a dict")
                    item = _strict_json(made, "an item")
                except DropItem:
                    dropped += 1
                    break
                except BaseException as e:  # the user's code: the item goes on as it was
                    errors.append(f"pipeline-failed: {name_of(pipeline)}: {_one_line(e)}")
            else:
                kept.append(item)
        if len(errors) > MAX_ITEM_ERRORS:
            more = len(errors) - MAX_ITEM_ERRORS + 1
            errors[MAX_ITEM_ERRORS - 1 :] = [f"pipeline-failed: {more} more"]
        return replace(outcome, items=kept, dropped=dropped, item_errors=errors)

    def __call__(self) -> None:
        try:
            outcome = _checked(self.made(self.handler(self.page)))
            if self.pipelines and outcome.items:
                outcome = self.through_pipelines(outcome)
        except BaseException as e:  # the user's code: SystemExit, KeyboardInterrupt too
            try:
                text = _one_line(e, named=not isinstance(e, _Refused))
                outcome = Outcome(error=f"handler-failed: {text}")
            except BaseException:  # an exception whose text cannot be had
                outcome = Outcome(error=f"handler-failed: {type(e).__name__}")
        with _stuck.lock:
            self.outcome = outcome
            if self.abandoned:  # its page went on without it: its result is dropped
                _stuck.count -= 1
        del self.page  # an abandoned call keeps no body
        self.finished.set()


class _Refused(ValueError):
    """What a generator handler yielded cannot be taken: the step fails, saying why."""


def _yielded(generator: Iterable[Any]) -> Handled:
    """A generator handler's yields as a :class:`Handled`: each ``dict`` an item (each
    :class:`File` the item it makes), each :class:`Request` or string a URL to follow,
    a :class:`Handled` merged in, None ignored; what it returns is the data.
    ValueError for anything else, and past :data:`MAX_ITEMS` items."""
    data, follow, items = None, [], []
    iterator = iter(generator)
    while True:
        try:
            value = next(iterator)
        except StopIteration as stop:
            data = stop.value
            break
        if isinstance(value, (dict, File)):
            items.append(value.item() if isinstance(value, File) else value)
            if len(items) > MAX_ITEMS:
                raise _Refused(f"more than {MAX_ITEMS} items on one page")
        elif isinstance(value, (str, Request)):
            follow.append(value)
        elif isinstance(value, Handled):
            data = value.data if value.data is not None else data
            follow.extend(value.follow)
            items.extend(i.item() if isinstance(i, File) else i for i in value.items)
        elif value is not None:
            raise _Refused(
                f"yielded {type(value).__name__}: yield dicts (items), crawler.File,"
                " crawler.Request or URLs (to follow)"
            )
    return Handled(data=data, follow=follow, items=items)


async def _collected_async(generator: AsyncIterator[Any]) -> Handled:
    """An async generator handler's yields, as :func:`_yielded` takes a generator's."""
    collected = [value async for value in generator]
    return _yielded(iter(collected))


def _checked(returned: Any) -> Outcome:
    """What a handler returned, as an :class:`Outcome`: its data must be a JSON object
    that strict JSON carries (no NaN nor Infinity, no lone surrogate, at most
    :data:`MAX_DEPTH` levels deep), and its URLs to follow strings."""
    if isinstance(returned, Handled):
        data, follow = returned.data, list(returned.follow)
        items = [i.item() if isinstance(i, File) else i for i in returned.items]
    else:
        data, follow, items = returned, [], []
    if data is not None and not isinstance(data, dict):
        return Outcome(error=f"handler-failed: returned {type(data).__name__}, not a dict")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return Outcome(error="handler-failed: items must be a list of dicts")
    if len(items) > MAX_ITEMS:
        return Outcome(error=f"handler-failed: more than {MAX_ITEMS} items on one page")
    try:
        # Copies of plain JSON values: what the record holds is what its line says.
        data = _strict_json(data, "data")
        items = [_strict_json(item, "an item") for item in items]
    except ValueError as e:
        return Outcome(error=f"handler-failed: {e}")
    requests, refused = [], []
    for one in follow:  # a bad request is refused alone: the rest of the page stands
        try:
            requests.append(_request(one))
        except ValueError as e:
            refused.append(refusal(one, _one_line(e, named=False)))
    return Outcome(data=data, follow=requests, items=items, refused=refused)


def refusal(request: Any, reason: str) -> str:
    """The one line that says a handler's request was refused, and why."""
    url = request.url if isinstance(request, Request) else request
    shown_url = shown(repr(url)) if isinstance(url, str) else type(url).__name__
    return f"request-refused: {shown_url}: {reason}"


#: Items one page may yield at most.
MAX_ITEMS = 10_000
#: The item pipelines' error lines a page's record keeps at most.
MAX_ITEM_ERRORS = 20


def _strict_json(value: Any, what: str) -> Any:
    """A copy of ``value`` through strict JSON; ValueError saying why it cannot be."""
    if _deeper_than(value, MAX_DEPTH):
        raise ValueError(f"{what} is not strict JSON: nested deeper than {MAX_DEPTH} levels")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # a lone surrogate is no UTF-8
    except (TypeError, ValueError, RecursionError) as e:
        raise ValueError(f"{what} is not strict JSON: {_one_line(e, named=False)}") from e
    return json.loads(text)


def _request(value: Any) -> Request:
    """A URL to follow as a :class:`Request`, checked: a string, or a Request whose
    label and data JSON carries within :data:`MAX_REQUEST_BYTES`, whose method is one
    of :data:`METHODS`, whose headers are names and values HTTP can send and whose
    body (``body``, ``json`` or ``form``, made bytes here) is within
    :data:`MAX_BODY_BYTES`.  ValueError saying what is wrong."""
    request = Request(value) if isinstance(value, str) else value
    if not isinstance(request, Request) or not isinstance(request.url, str):
        raise ValueError("URLs to follow must be strings or crawler.Request")
    try:
        request.url.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"a URL to follow is not UTF-8: {_one_line(e, named=False)}") from e
    if request.plain and request.label is None and request.data is None:
        return request
    if request.label is not None and (
        not isinstance(request.label, str) or not 0 < len(request.label) <= MAX_LABEL
    ):
        raise ValueError(f"a request's label must be a string of 1 to {MAX_LABEL} characters")
    if request.data is not None and not isinstance(request.data, dict):
        raise ValueError(f"a request's data must be a dict, not {type(request.data).__name__}")
    data = _strict_json(request.data, "a request's data")
    size = len(json.dumps([request.label, data], ensure_ascii=False).encode())
    if size > MAX_REQUEST_BYTES:
        raise ValueError(
            f"a request's label and data take {size} bytes of JSON, over {MAX_REQUEST_BYTES}"
        )
    if request.plain:
        return Request(request.url, request.label, data)
    method = request.method.upper() if isinstance(request.method, str) else request.method
    if method not in METHODS:
        raise ValueError(
            f"method {shown(repr(request.method))} is not one the crawler sends"
            f" ({', '.join(METHODS)})"
        )
    headers = checked_headers(request.headers)
    body = _body(request, headers)
    if body is not None and method in ("GET", "HEAD"):
        raise ValueError(f"a {method} request carries no body")
    key = request.unique_key
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_UNIQUE_KEY):
        raise ValueError(
            f"a request's unique_key must be a string of 1 to {MAX_UNIQUE_KEY} characters"
        )
    if not isinstance(request.always, bool):
        raise ValueError("a request's always must be True or False")
    return Request(
        request.url, request.label, data, method, headers or None, body,
        unique_key=key, always=request.always,
    )  # fmt: skip


def checked_headers(given: Any) -> dict[str, str]:
    """A request's headers, checked: names HTTP allows, values without line breaks."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ValueError(f"a request's headers must be a dict, not {type(given).__name__}")
    if len(given) > MAX_HEADERS:
        raise ValueError(f"a request has {len(given)} headers, over {MAX_HEADERS}")
    headers: dict[str, str] = {}
    for name, value in given.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"{shown(repr(name))} is not a header name")
        if name.lower() in FORBIDDEN_HEADERS:
            raise ValueError(f"the header {name} is the crawler's to send")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"the header {name}'s value must be a string of one line")
        headers[name] = value
    return headers


#: An HTTP header's name (RFC 9110's token).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _body(request: Request, headers: dict[str, str]) -> bytes | None:
    """A request's body as bytes (``body``, ``json`` or ``form``, one of them), its
    ``Content-Type`` added to ``headers`` unless they name one; None: no body."""
    given = [v is not None for v in (request.body, request.json, request.form)]
    if sum(given) > 1:
        raise ValueError("a request takes one of body, json and form")
    typed = any(name.lower() == "content-type" for name in headers)
    body: bytes | str
    if request.json is not None:
        body = json.dumps(_strict_json(request.json, "a request's json"), ensure_ascii=False)
        content_type = "application/json"
    elif request.form is not None:
        if not isinstance(request.form, Mapping):
            raise ValueError(f"a request's form must be a dict, not {type(request.form).__name__}")
        body, content_type = urlencode(dict(request.form), doseq=True), FORM_TYPE
    elif isinstance(request.body, (bytes, str)):
        body, content_type = request.body, ""
    elif request.body is None:
        return None
    else:
        raise ValueError(
            f"a request's body must be bytes or str, not {type(request.body).__name__}"
        )
    data = body.encode("utf-8") if isinstance(body, str) else body
    if len(data) > MAX_BODY_BYTES:
        raise ValueError(f"a request's body takes {len(data)} bytes, over {MAX_BODY_BYTES}")
    if content_type and not typed:
        headers["Content-Type"] = content_type
    return data


#: The ``Content-Type`` of a form's body.
FORM_TYPE = "application/x-www-form-urlencoded"


def _deeper_than(data: Any, limit: int) -> bool:
    """Whether ``data`` nests dicts and lists more than ``limit`` levels deep; without
    recursion, as the data may be deeper than Python's recursion limit.  A container
    met twice is walked once (a cycle ends; ``json.dumps`` then names it)."""
    walked: set[int] = set()
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Iterable[Any] = value.values()
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            continue
        if depth > limit:
            return True
        if id(value) in walked:
            continue
        walked.add(id(value))
        stack.extend((child, depth + 1) for child in children)
    return False


def _one_line(error: BaseException, *, named: bool = True) -> str:
    text = " ".join(str(error).split())
    if not named:
        return shown(text or type(error).__name__)
    return shown(f"{type(error).__name__}: {text}" if text else type(error).__name__)
