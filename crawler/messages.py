"""What a crawl's message may carry: one check, before a worker acts on it.

A queue is an interface: seeders of other versions, other programs and corrupted
messages all reach the workers.  :func:`checked` wraps each actor (``crawl(url, depth,
options, via_public)`` for pages, ``crawl_sitemap(url, depth, options, via_public,
sitemap, listed)`` for ``--sitemaps``): a message whose arguments do not bind to its
actor's signature, or do not pass the rules below (the options:
:data:`crawler.options.RULES`, the very checks the seeder's command line uses), ends at
once as an :class:`~crawler.errors.InvalidMessage`: one log line naming what is wrong,
no retry, no claim, no fetch, and the message dead-lettered.  Options no rule names (a
newer seeder's) are ignored.

A message says its format in its ``format`` option (:data:`~crawler.frontier.scope.FORMAT`).
One without it is of format 1: upstream's, and this crawler's before sitemaps had an
actor of their own, when a ``crawl`` message carried ``sitemap`` and ``listed``; such a
message is checked as it was then, and one naming a sitemap goes to the sitemaps' actor,
so that workers of this release carry on a crawl seeded before it.  Format 2 is every
other message; format 3 a ``crawl`` message carrying what a handler's
:class:`~crawler.handlers.Request` passed on (``label``: 1 to
:data:`~crawler.handlers.MAX_LABEL` characters, ``data``: a JSON object; together at
most :data:`~crawler.handlers.MAX_REQUEST_BYTES` bytes of JSON); format 4 one carrying
how the request asks for its page (``request``: :func:`_asking`) or the version of the
crawl's shared cookies (``jar``).  A message of a format newer than this worker's is
refused as invalid (``--replay`` sends it again once the workers are upgraded).
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

import dramatiq
from dramatiq.middleware import CurrentMessage

from crawler.errors import InvalidMessage
from crawler.frontier.scope import FORMAT, KINDS, MAX_SITEMAP_LEVEL, SITEMAP_ACTOR
from crawler.handlers import (
    MAX_BODY_BYTES,
    MAX_LABEL,
    MAX_REQUEST_BYTES,
    MAX_UNIQUE_KEY,
    METHODS,
    checked_headers,
)
from crawler.option_rules import FLAG, WHOLE, Rule, canonical_http_url, utf8_text, whole_between
from crawler.options import CrawlOptions, quoted

P = ParamSpec("P")
R = TypeVar("R")


def checked(actor: Callable[P, R]) -> Callable[P, R]:
    """Wrap an actor's function: its message's format and arguments checked
    (:func:`check_call`) before it runs; a ``crawl`` message of format 1 naming a sitemap
    handed to the sitemaps' actor (:func:`former_crawl`)."""
    signature = inspect.signature(actor)
    rules = rules_of(signature)

    @functools.wraps(actor)
    def actor_checked(*args: P.args, **kwargs: P.kwargs) -> R:
        message = CurrentMessage.get_current_message()
        version = FORMAT if message is None else format_of(message.options)
        if version == 1 and rules is ARGUMENTS:  # the pages' actor: crawl, as it was
            return former_crawl(actor, args, kwargs)
        check_call(signature, args, kwargs, rules)
        return actor(*args, **kwargs)

    return actor_checked


def format_of(options: Mapping[str, Any]) -> int:
    """The format of a message with these ``options`` (1 when they name none); a format
    this worker does not read is an :class:`~crawler.errors.InvalidMessage`."""
    version = options.get("format", 1)
    if type(version) is not int or not 1 <= version <= FORMAT:
        raise InvalidMessage(
            f"message format {quoted(version)} is not one this worker reads (1 to {FORMAT}):"
            " a newer seeder's? Upgrade the workers, then --replay the crawl"
        )
    return version


def _crawl_format_1(
    url: str,
    depth: int = 0,
    options: dict[str, Any] | None = None,
    via_public: bool = False,
    sitemap: int = 0,
    listed: dict[str, list[str]] | None = None,
) -> None:
    """The ``crawl`` actor's signature in format 1: a page, a sitemap (``sitemap``: its
    level) or a part of a long sitemap's URLs (``listed``)."""


#: The ``crawl`` actor's signature in format 1.
CRAWL_FORMAT_1 = inspect.signature(_crawl_format_1)


def former_crawl(crawl: Callable[..., R], args: Any, kwargs: Any) -> R:
    """Act on a ``crawl`` message of format 1 with the function ``crawl`` of the pages'
    actor: checked as it was then; one naming a sitemap handed to the body of the
    sitemaps' actor (:data:`~crawler.frontier.scope.SITEMAP_ACTOR`, found on the process's
    broker: its function inside its own wrappers, whose work is this one's)."""
    arguments = check_call(CRAWL_FORMAT_1, args, kwargs, ARGUMENTS)
    if arguments.get("sitemap") or arguments.get("listed") is not None:
        read = inspect.unwrap(dramatiq.get_broker().get_actor(SITEMAP_ACTOR).fn)
        record: R = read(**{"sitemap": 0, **arguments})
        return record
    return crawl(**{k: v for k, v in arguments.items() if k not in ("sitemap", "listed")})


def check_message(broker: dramatiq.Broker, message: dramatiq.Message[Any]) -> None:
    """Raise :class:`~crawler.errors.InvalidMessage` for a message workers would refuse
    (``--replay`` leaves it a dead letter)."""
    try:
        actor = broker.get_actor(message.actor_name)
    except dramatiq.errors.ActorNotFound as e:
        raise InvalidMessage(f"no actor {message.actor_name!r}") from e
    signature = inspect.signature(actor.fn)
    rules = rules_of(signature)
    version = format_of(message.options if isinstance(message.options, dict) else {})
    if version == 1 and rules is ARGUMENTS:
        signature = CRAWL_FORMAT_1
    check_call(signature, message.args, message.kwargs, rules)


def rules_of(signature: inspect.Signature) -> dict[str, Rule[Any]]:
    """The rules of an actor's arguments: the sitemaps' actor's, or the ``crawl`` actor's."""
    return SITEMAP_ARGUMENTS if "listed" in signature.parameters else ARGUMENTS


def check_call(
    signature: inspect.Signature, args: Any, kwargs: Any, rules: Mapping[str, Rule[Any]]
) -> dict[str, Any]:
    """Raise :class:`~crawler.errors.InvalidMessage` unless a message's ``args`` and
    ``kwargs`` bind to ``signature`` (its actor's) and pass :func:`check_arguments` with
    ``rules``; the arguments, by name."""
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        raise InvalidMessage("message arguments: args must be a list and kwargs an object")
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:  # a missing URL, an argument this crawler does not know
        raise InvalidMessage(f"message arguments: {e}") from e
    check_arguments(bound.arguments, rules)
    _check_request_size(bound.arguments)
    return dict(bound.arguments)


def _check_request_size(arguments: Mapping[str, Any]) -> None:
    """Refuse a message whose ``label`` and ``data`` take more than
    :data:`~crawler.handlers.MAX_REQUEST_BYTES` bytes of JSON together."""
    label, data = arguments.get("label"), arguments.get("data")
    if label is None and data is None:
        return
    size = len(json.dumps([label, data], ensure_ascii=False).encode())
    if size > MAX_REQUEST_BYTES:
        raise InvalidMessage(
            f"message arguments: label and data take {size} bytes of JSON, over {MAX_REQUEST_BYTES}"
        )


def check_arguments(
    arguments: Mapping[str, Any], rules: Mapping[str, Rule[Any]] | None = None
) -> None:
    """Raise :class:`~crawler.errors.InvalidMessage` for the first argument of a
    message that breaks its rule (of ``rules``, the ``crawl`` actor's by default); the
    options are :meth:`~crawler.options.CrawlOptions.from_message`'s to check."""
    for name, value in arguments.items():
        if name == "options":
            CrawlOptions.from_message(value)
            continue
        (rules or ARGUMENTS)[name].apply("message arguments", name, value)


def _url(value: Any) -> str:
    """An absolute http(s) URL, as the seeder's command line takes one (a sitemap's
    part: with its ``#part-N``)."""
    canonical_http_url(utf8_text(value), sendable=False)
    return str(value)


def _listed(value: Any) -> dict[str, list[str]] | None:
    """A part of a long sitemap's URLs: ``{"pages": [...], "sitemaps": [...]}``."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(KINDS):
        raise ValueError
    if sum(len(urls) for urls in value.values() if isinstance(urls, list)) > MAX_LISTED:
        raise ValueError(f"more than {MAX_LISTED} URLs")
    for urls in value.values():
        if not isinstance(urls, list):
            raise ValueError
        for url in urls:
            try:
                _url(url)
            except ValueError as e:
                raise ValueError(f"{quoted(url)} is not an http(s) URL") from e
    return value


#: URLs a part of a long sitemap carries at most: as many as the sitemap protocol lets
#: one file list (a part holds ``CRAWLER_MAX_LINKS_PER_PAGE`` of its sender's, which
#: other workers need not share).
MAX_LISTED = 50_000


def _label(value: Any) -> str | None:
    """A :class:`~crawler.handlers.Request`'s label: 1 to ``MAX_LABEL`` characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_LABEL:
        raise ValueError
    return utf8_text(value)


def _data(value: Any) -> dict[str, Any] | None:
    """A :class:`~crawler.handlers.Request`'s data: a JSON object (its size is checked
    with the label's)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as e:  # a lone surrogate, NaN...
        raise ValueError("not strict JSON") from e
    return value


def _asking(value: Any) -> dict[str, Any] | None:
    """How a :class:`~crawler.handlers.Request` asks for its page: ``method`` (one of
    :data:`~crawler.handlers.METHODS`), ``headers`` (names and one-line values),
    ``body`` (base64, :data:`~crawler.handlers.MAX_BODY_BYTES` bytes at most; none for
    GET and HEAD) and ``key`` (what it is deduplicated by), each optional."""
    if value is None:
        return None
    if not isinstance(value, dict) or not set(value) <= set(ASKING):
        raise ValueError
    method = value.get("method", "GET")
    if method not in METHODS:
        raise ValueError(f"method {quoted(method)} is not one the crawler sends")
    checked_headers(value.get("headers"))
    body = value.get("body")
    if body is not None:
        try:
            size = len(base64.b64decode(body, validate=True))
        except (TypeError, ValueError, binascii.Error) as e:
            raise ValueError("its body is not base64") from e
        if size > MAX_BODY_BYTES:
            raise ValueError(f"its body takes {size} bytes, over {MAX_BODY_BYTES}")
        if method in ("GET", "HEAD"):
            raise ValueError(f"a {method} request carries no body")
    key = value.get("key")
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY):
        raise ValueError(f"its key must be a string of 1 to {MAX_KEY} characters")
    return value


#: What a message's ``request`` argument may hold.
ASKING = ("method", "headers", "body", "key")
#: A request's key, in characters at most: ``key:`` and a ``unique_key``.
MAX_KEY = MAX_UNIQUE_KEY + 4


#: The rules of ``crawl``'s arguments besides its options (``sitemap`` and ``listed``:
#: those of a ``crawl`` message of format 1).
ARGUMENTS: dict[str, Rule[Any]] = {
    "url": Rule("an http:// or https:// URL", _url),
    "depth": WHOLE,
    "via_public": FLAG,
    "label": Rule(f"null or a string of 1 to {MAX_LABEL} characters", _label),
    "data": Rule("null or a JSON object", _data),
    "request": Rule("null or a request's method, headers, body and key", _asking),
    "jar": WHOLE,
    "sitemap": Rule(
        f"a whole number from 0 to {MAX_SITEMAP_LEVEL}", whole_between(0, MAX_SITEMAP_LEVEL)
    ),
    "listed": Rule("null or lists of 'pages' and 'sitemaps' URLs", _listed),
}
#: The rules of ``crawl_sitemap``'s arguments: a sitemap is nested a level deep at least
#: (robots.txt is 1), where a ``crawl`` message of format 1 said 0 for a page.
SITEMAP_ARGUMENTS: dict[str, Rule[Any]] = {
    **ARGUMENTS,
    "sitemap": Rule(
        f"a whole number from 1 to {MAX_SITEMAP_LEVEL}", whole_between(1, MAX_SITEMAP_LEVEL)
    ),
}
