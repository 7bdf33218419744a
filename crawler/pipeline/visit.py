"""What one page's trip through the ``crawl`` actor knows: :class:`PageVisit`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dramatiq
import requests

from crawler.archiving.files import FileStore
from crawler.archiving.warc import Keeper, Stored
from crawler.content.main_text import MainContent
from crawler.environment import Limits
from crawler.fetching import GET, Asking, Fetched
from crawler.fetching.http_cache import HttpCache
from crawler.frontier import claims
from crawler.frontier.recrawl import Earlier
from crawler.frontier.scope import request_name
from crawler.handlers import Handler, Outcome, Page, Request
from crawler.items.pipelines import ItemPipeline
from crawler.links.cleaning import clean_href
from crawler.links.extraction import html_links
from crawler.middleware import actor_for
from crawler.options import CrawlOptions
from crawler.records import Record, key_of
from crawler.rendering import Rendered
from crawler.rendering.adaptive import Choice


@dataclass
class PageVisit:
    """One ``crawl`` message's page, as the stages learn it, step by step.

    Parameters:
      actor(dramatiq.Actor): The ``crawl`` actor of the broker the message came from.
      message(dramatiq.Message): The message being processed.
      url(str): The URL the message names.
      depth(int): Its depth in the crawl (seeds: 0).
      options(dict|None): The crawl's options as the message carries them.
      crawl_options(CrawlOptions): The same, read.
      via_public(bool): Whether the page linking to it was on a public address.
      label(str|None): The label a handler's request gave it.
      data(dict|None): The data a handler's request gave it.
      asking(Asking): How the fetch asks for the page: a GET, or as a handler's
        request said (its method, headers, body).
      key(str|None): What a handler's keyed request is deduplicated by besides its URL
        (None: the URL alone).
      jar(int): The version of the crawl's shared cookies the message was sent with;
        the cookie stage raises it when the page's answer sets cookies.
      cookies_before(frozenset|None): What the session's jar held before the request
        (the cookie stage's, for a crawl whose cookies its workers share).
      bounds(Limits): The fetch's and the actor's bounds, with the crawl's ``--timeout``.
      links(Links|None): What sends the page's links, once the URL is claimed.
      skipped(str|None): The outcome of a page that is not fetched (a duplicate, over
        budget, disallowed, deferred...).
      session(requests.Session|None): The thread's session for the crawl.
      turn(object|None): The host's turn, held while the page is fetched.
      handler(Handler|None): The crawl's page handler (``--handler``).
      pipelines(list): The crawl's item pipelines (its handler's, then ``--pipeline``).
      keeper(Keeper|None): What keeps the responses in WARC files (``--warc``).
      cache(HttpCache|None): Where the fetch takes and keeps responses (``--cache``).
      files(FileStore|None): Where the files the items name are kept (``--files``).
      file(dict|None): A file's message: where its file was kept, its digest and type.
      markdown_dir(Path|None): Where the pages' Markdown files go (``--markdown``).
      main(MainContent|None): The page's main content (``--markdown``,
        ``--near-duplicates``).
      near_duplicate_of(str|None): The page seen before whose main text this one's
        nearly is (``--near-duplicates``).
      earlier(Earlier|None): What an earlier crawl saw of the page (``--recrawl-from``).
      conditions(dict|None): The conditional request's headers that asks about it.
      unchanged(Earlier|None): ``earlier``, when the server answered ``304``.
      fetched(Fetched|None): The response, once its headers are in.
      body(bytes|None): An HTML page's body, once read (None for anything else).
      takes_content(bool): The crawl's handler takes this response though it is not
        HTML (its content type is one the handler asked for): its body is read.
      content(bytes|None): That response's body, once read.
      stored(Stored|None): Where ``--warc`` kept the response.
      rendered(Rendered|None): The page as headless Chromium rendered it (``--render``).
      page_kind(str|None): Its kind (``--render auto``: what the crawl learns by).
      render_choice(Choice|None): Whether to render it and why (``--render auto``).
      render_sample(str|None): The place of its kind's samples it holds, if it is one.
      render_new_links(int|None): The links the browser found that the static page
        lacks (a sample or check of its kind).
      page(Page|None): What the handler is given of the page.
      handled(Outcome|None): What the handler made of it.
      asked(list[Request]): The requests the handler asked to follow.
      refused(list[str]): Those refused, one line each (``request-refused:``).
      anchors(list[str]|None): The page's links (None: it is not HTML).
      follow(list[str]): The links to send, in scope.
      own(dict): The arguments of their own of links a handler's request labelled.
      kwargs(dict): The arguments of every link's message.
      priority(int|None): The broker priority of the links' messages.
      dropped_links(int): How many of its links were malformed or cut.
      sent(list[str]): The ids of the messages sent for its new links.
      page_record(Record|None): The page's record, once the record stage began it (the
        stages after it add their fields to it as :attr:`record`).
      notes(dict): What the user's own stages (a handler's ``stages``) keep of the page
        from one hook to the next.
    """

    actor: dramatiq.Actor[Any, Any]
    message: dramatiq.Message[Any]
    url: str
    depth: int
    options: dict[str, Any] | None
    crawl_options: CrawlOptions
    via_public: bool
    label: str | None
    data: dict[str, Any] | None
    bounds: Limits
    asking: Asking = GET
    key: str | None = None
    jar: int = 0
    cookies_before: frozenset[tuple[Any, ...]] | None = None
    links: claims.Links | None = None
    skipped: str | None = None
    session: requests.Session | None = None
    turn: Any = None
    handler: Handler | None = None
    pipelines: list[ItemPipeline] = field(default_factory=list)
    keeper: Keeper | None = None
    cache: HttpCache | None = None
    files: FileStore | None = None
    file: dict[str, Any] | None = None
    markdown_dir: Path | None = None
    main: MainContent | None = None
    near_duplicate_of: str | None = None
    earlier: Earlier | None = None
    conditions: dict[str, str] | None = None
    unchanged: Earlier | None = None
    fetched: Fetched | None = None
    body: bytes | None = None
    takes_content: bool = False
    content: bytes | None = None
    stored: Stored | None = None
    rendered: Rendered | None = None
    page_kind: str | None = None
    render_choice: Choice | None = None
    render_sample: str | None = None
    render_new_links: int | None = None
    page: Page | None = None
    handled: Outcome | None = None
    asked: list[Request] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    anchors: list[str] | None = None
    follow: list[str] = field(default_factory=list)
    own: dict[str, dict[str, Any]] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int | None = None
    dropped_links: int = 0
    sent: list[str] = field(default_factory=list)
    page_record: Record | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        crawl: dramatiq.Actor[Any, Any],
        url: str,
        depth: int,
        options: dict[str, Any] | None,
        via_public: bool,
        limits: Limits,
        request: dict[str, Any] | None = None,
        jar: int = 0,
    ) -> PageVisit:
        """The visit of the message being processed by ``crawl`` (a fresh one when the
        actor is called as a function), its options read and its bounds set; its actor
        the one of the broker the message came from (:func:`actor_for`: a ``--local``
        crawl's has its own), where its links are sent."""
        actor = actor_for(crawl)
        crawl_options = CrawlOptions.from_message(options)
        message = claims.current_message(actor, url)
        bounds = limits.within(crawl_options.timeout)  # --timeout
        asking, key = Asking.of(request), key_of(request)
        return cls(
            actor, message, url, depth, options, crawl_options, via_public, None, None, bounds,
            asking, key, jar,
        )  # fmt: skip

    @property
    def claim(self) -> str:
        """What the message claims: its URL, or a keyed request's name."""
        return request_name(self.url, self.key)

    @property
    def response(self) -> requests.Response:
        """The response (only once it came)."""
        assert self.fetched is not None, "no response yet"
        return self.fetched.response

    @property
    def not_html(self) -> bool:
        """Upstream's "not HTML": no HTML body was read, no earlier links stand for it
        (a ``304``), and no handler takes its content."""
        return self.body is None and self.anchors is None and self.content is None

    @property
    def record(self) -> Record:
        """The page's record, as the stages fill it in (only once it is begun)."""
        assert self.page_record is not None, "no record yet"
        return self.page_record

    def parsed_links(self) -> list[str]:
        """``--follow-relative``: every ``<a href>`` of the page as an HTML parser (the
        handler's tree, when there is one) resolved it, or as the browser did (``--render``)."""
        if self.rendered is not None:
            return [clean_href(link) for link in self.rendered.links]
        tree = None if self.page is None else self.page.tree
        content_type = self.response.headers.get("Content-Type")
        return html_links(self.body or b"", self.response.url, content_type, tree)
