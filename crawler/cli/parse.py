"""``crawler parse URL --handler MODULE:ROUTER``: one page fetched and given to a
handler as a crawl would (:func:`crawler.page_parse.parse_page`), and what it made of it
printed, in sections a person reads (as ``scrapy parse`` prints them) or, with
``--json``, as one JSON document a program reads.  No broker, no dedup store.

Exit status: 0; 1 when the page cannot be fetched or the handler failed (what there is
still printed); 2 for a usage error (a URL the crawler does not fetch, a handler that
cannot be loaded, ``--data`` that is not a JSON object).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from crawler import environment, handlers
from crawler.cli.parser import Parser
from crawler.fetching.http_cache import HttpCache
from crawler.handlers import Request
from crawler.page_parse import FetchFailed, Parsed, checked_url, parse_page


def add_parse(command: Parser) -> None:
    """``crawler parse``'s subcommand and its flags."""
    parse = command.subcommand(
        "parse",
        help="fetch one page and show what a handler makes of it (no services needed)",
        description="Fetch one page as a crawl fetches it, give it to the handler as a"
        " crawl gives it, and show what the handler made of it: its items, the requests"
        " it asks to follow, its data, its error, and the page's links.",
    )
    parse.set_defaults(usage=parse)
    parse.add_argument("url", metavar="URL", help="the page to fetch")
    parse.add_argument(
        "--handler",
        required=True,
        metavar="MODULE:FUNCTION",
        help="the page handler: a function or a Router (package.module:name)",
    )
    parse.add_argument(
        "--label", metavar="LABEL", help="the page's label, as a Request(label=...) gives it"
    )
    parse.add_argument(
        "--data",
        metavar="JSON",
        help="the page's data, a JSON object, as a Request(data=...) passes it on",
    )
    parse.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="pass the items through this item pipeline too, after the handler's own"
        " (repeatable, in order)",
    )
    parse.add_argument(
        "--cache",
        metavar="DIR",
        help="take the page from this --cache directory when it holds it, else keep it there",
    )
    parse.add_argument(
        "--json", action="store_true", help="print one JSON document instead of sections"
    )


def parse(arguments: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``crawler parse`` as ``arguments`` say, printing to ``out`` (standard output
    when None): its exit status."""
    out = sys.stdout if out is None else out
    usage: argparse.ArgumentParser = arguments.usage
    try:
        url = checked_url(arguments.url)
    except ValueError as e:
        usage.error(f"URL: {e}")
    try:
        handler = handlers.load(arguments.handler)
    except ValueError as e:
        usage.error(f"--handler {arguments.handler}: {e}")
    try:
        pipelines = handlers.Handlers().with_pipelines(arguments.pipeline)
        named = pipelines.pipelines(arguments.pipeline)
    except ValueError as e:
        usage.error(f"--pipeline {e}")
    data = _data(usage, arguments.data)
    cache = None if arguments.cache is None else HttpCache(Path(arguments.cache).expanduser())
    try:
        parsed = parse_page(
            url,
            handler,
            limits=environment.limits_from_environment(),
            label=arguments.label,
            data=data,
            cache=cache,
            handler_timeout=environment.handler_timeout(),
            pipelines=named,
        )
    except FetchFailed as e:
        if arguments.json:
            _write_json(out, {"url": url, "error": str(e)})
        print(f"{usage.prog}: {e}", file=sys.stderr)
        return 1
    if arguments.json:
        _write_json(out, document(parsed))
    else:
        out.write(sections(parsed))
    if parsed.outcome.error is not None:
        print(f"{usage.prog}: the handler failed: {parsed.outcome.error}", file=sys.stderr)
        return 1
    return 0


def _data(usage: argparse.ArgumentParser, text: str | None) -> dict[str, Any] | None:
    """``--data``'s JSON object (None when not given); a usage error for anything else."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as e:
        usage.error(f"--data: not JSON: {e}")
    if not isinstance(data, dict):
        usage.error("--data: must be a JSON object ({...})")
    return data


def request_document(request: Request) -> dict[str, Any]:
    """A followed request as JSON: its URL, and what it carries besides a plain GET's."""
    shown: dict[str, Any] = {"url": request.url, "method": request.method}
    for name in ("label", "data", "unique_key"):
        if getattr(request, name) is not None:
            shown[name] = getattr(request, name)
    if request.headers:
        shown["headers"] = dict(request.headers)
    body = request.body
    if isinstance(body, str):
        body = body.encode()
    if body is not None:
        try:
            shown["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            shown["body_base64"] = base64.b64encode(body).decode("ascii")
    if request.always:
        shown["always"] = True
    return shown


def document(parsed: Parsed) -> dict[str, Any]:
    """What ``--json`` prints: the page, and what its handler made of it."""
    outcome = parsed.outcome
    return {
        "url": parsed.url,
        "final_url": parsed.final_url,
        "status": parsed.status,
        "content_type": parsed.content_type,
        "label": parsed.label,
        "cached": parsed.cached,
        "data": outcome.data,
        "items": outcome.items,
        "items_dropped": outcome.dropped,
        "item_errors": outcome.item_errors,
        "requests": [request_document(request) for request in parsed.requests],
        "refused_requests": parsed.refused,
        "handler_error": outcome.error,
        "links": parsed.links,
        "links_followed": len(parsed.followed_links),
    }


def sections(parsed: Parsed) -> str:
    """What ``crawler parse`` prints: the page, then a section for each of what the
    handler made (items, requests, refused requests, data, its error), then the count
    of the page's links a crawl follows by default."""
    outcome = parsed.outcome
    page = f"# Page\n{parsed.status} {parsed.url}"
    if parsed.final_url != parsed.url:
        page += f"\n  redirected to {parsed.final_url}"
    page += f"\n  {parsed.content_type or 'no Content-Type'}"
    if parsed.label is not None:
        page += f", label {parsed.label}"
    if parsed.cached:
        page += ", from the cache"
    parts = [page]
    parts.append(_section("Items", [_json(item) for item in outcome.items]))
    if outcome.dropped:
        parts.append(f"# Dropped by the item pipelines\n{outcome.dropped}")
    if outcome.item_errors:
        parts.append(_section("Item pipeline errors", outcome.item_errors))
    parts.append(_section("Requests", [_request_line(r) for r in parsed.requests]))
    if parsed.refused:
        parts.append(_section("Refused requests", parsed.refused))
    parts.append(f"# Data\n{_json(outcome.data)}")
    if outcome.error is not None:
        parts.append(f"# Handler error\n{outcome.error}")
    parts.append(
        f"# Links\n{len(parsed.followed_links)} of the page's {len(parsed.links)} links"
        " are on its site: a crawl follows them by default"
    )
    return "\n\n".join(parts) + "\n"


def _section(title: str, lines: list[str]) -> str:
    return "\n".join([f"# {title} ({len(lines)})", *lines])


def _request_line(request: Request) -> str:
    shown = request_document(request)
    rest = {k: v for k, v in shown.items() if k not in ("url", "method")}
    return f"{request.method} {request.url}" + (f" {_json(rest)}" if rest else "")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _write_json(out: TextIO, value: dict[str, Any]) -> None:
    out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
