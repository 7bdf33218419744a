"""One page fetched and given to a handler as a crawl gives it, with no services (no
broker, no dedup store): what ``crawler parse URL --handler MODULE:ROUTER`` shows, the
loop to develop a handler in, as ``scrapy parse`` is Scrapy's.

The page is fetched by the crawl's own fetch (:func:`crawler.fetching.fetch`: its
bounds, redirects and network guard; from ``--cache`` when it holds it), made the
:class:`~crawler.handlers.Page` the handler stage makes (:func:`~crawler.handlers.page_of`:
its ``<base href>``, the content types a route asks for besides HTML), and handed to
:meth:`~crawler.handlers.Handlers.run`; what it made is resolved as a crawl resolves
it (:func:`~crawler.handlers.requests_followed`).  robots.txt is not asked, nothing is
claimed, and no request is sent on: this shows what a crawl would do with the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from crawler.environment import Limits
from crawler.errors import PermanentError, TransientError, why
from crawler.fetching import fetch, is_html, new_session, read_body
from crawler.fetching.http_cache import HttpCache
from crawler.handlers import (
    Handler,
    Handlers,
    Outcome,
    Request,
    media_type,
    page_of,
    requests_followed,
    takes,
    with_enqueued,
)  # fmt: skip
from crawler.items import pipelines as item_pipelines
from crawler.items.pipelines import ItemPipeline
from crawler.links.canonical import canonical_url
from crawler.links.extraction import absolute_links, html_links
from crawler.links.sites import site_of
from crawler.option_rules import DEFAULT_USER_AGENT


class FetchFailed(Exception):
    """The page could not be fetched, or was not one to give the handler: one line."""


@dataclass(frozen=True)
class Parsed:
    """What a handler made of one page, and what the crawl would follow of it.

    Parameters:
      url(str): The URL asked for.
      final_url(str): The URL the body came from, after redirects.
      status(int): The HTTP status.
      content_type(str|None): The response's ``Content-Type``.
      label(str|None): The label the page was given (``--label``).
      cached(bool): The response came from ``--cache``'s directory.
      outcome(Outcome): What the handler made of it (its data, items, requests, error).
      requests(list[Request]): The requests the crawl would follow, resolved.
      refused(list[str]): The requests refused, one line each.
      links(list[str]): The page's own links (an HTML page's: ``<a href>``, resolved).
      followed_links(list[str]): Those a crawl follows by default: on the page's site.
    """

    url: str
    final_url: str
    status: int
    content_type: str | None
    label: str | None
    cached: bool
    outcome: Outcome
    requests: list[Request] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    followed_links: list[str] = field(default_factory=list)


def checked_url(url: str) -> str:
    """``url``, if it is an http(s) URL the crawler fetches; ValueError saying why not."""
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise ValueError(f"{url!r} is not an http(s) URL")
    canonical_url(url)  # refuses a malformed host or port
    return url


def parse_page(
    url: str,
    handler: Handler,
    *,
    limits: Limits,
    label: str | None = None,
    data: Mapping[str, Any] | None = None,
    cache: HttpCache | None = None,
    user_agent: str = DEFAULT_USER_AGENT,
    handler_timeout: float = 1.5,
    pipelines: Sequence[ItemPipeline] = (),
) -> Parsed:
    """Fetch ``url`` within ``limits`` (from ``cache`` when it holds it) and give the
    page, labelled ``label`` with ``data`` as a :class:`~crawler.handlers.Request`
    passes them on, to ``handler``, for ``handler_timeout`` seconds at most, its items
    through its own item pipelines and then ``pipelines``.  Raises
    :class:`FetchFailed` for a page that cannot be fetched (or answers a 4xx, 5xx), and
    for a response neither HTML nor of a content type the handler's route takes."""
    session = new_session()
    try:
        with fetch(session, url, limits, user_agent, via_public=False, cache=cache) as fetched:
            response = fetched.response
            content_type = response.headers.get("Content-Type")
            html = is_html(response)
            if not html and not takes(handler, label, content_type):
                raise FetchFailed(
                    f"the page is not HTML ({media_type(content_type) or 'no Content-Type'})"
                    " and its handler takes no such content"
                    " (content_types, or route(label, content_types=...))"
                )
            body = read_body(fetched, limits)
    except (PermanentError, TransientError) as e:
        raise FetchFailed(f"cannot fetch {url}: {why(e)}") from e
    finally:
        session.close()
    page = page_of(url, response, body, label, dict(data) if data is not None else None)
    handlers = Handlers(timeout=handler_timeout)
    chosen = item_pipelines.of_crawl(handler, pipelines)
    outcome = with_enqueued(handlers.run(handler, page, None, chosen), page)
    requests, refused = requests_followed(outcome, page.base)
    links: list[str] = []
    if html:
        found = html_links(body, response.url, content_type, page.tree)
        links = absolute_links(dict.fromkeys(found), limits.max_links_per_page, url)
    site = site_of(urlsplit(url).hostname or "")  # the seed's, as --same-site keeps to
    followed = [link for link in links if site_of(urlsplit(link).hostname or "") == site]
    return Parsed(
        url=url,
        final_url=response.url,
        status=response.status_code,
        content_type=content_type,
        label=label,
        cached=fetched.cached,
        outcome=outcome,
        requests=requests,
        refused=[*outcome.refused, *refused],
        links=links,
        followed_links=followed,
    )
