"""Write docs/api.md, the Python API's reference, from the docstrings.

    python scripts/api_reference.py > docs/api.md

``tests/test_api_reference.py`` checks that the page is what this writes: a docstring
changed without the page made again fails the tests.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import crawler
from crawler import handlers, option_table
from crawler.items import pipelines
from crawler.pipeline import stage, visit


def plain(text: str) -> str:
    """A docstring's reStructuredText roles and literals as Markdown's code."""
    text = re.sub(r":\w+:`~?([^`<]*?)\s*<[^>]+>`", r"`\1`", text)  # :meth:`name <target>`
    text = re.sub(r":\w+:`~([\w.]*\.)?(\w+)`", r"`\2`", text)  # :class:`~a.b.Name`
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


#: The page's parts: a title, what it says, and the names it documents.
SECTIONS: tuple[tuple[str, str, tuple[Any, ...]], ...] = (
    (
        "Running crawls",
        "A crawl in this process (`Crawl`), or one handed to the workers (`seed`).",
        (crawler.Crawl, crawler.WorkersCrawl, crawler.seed, crawler.status, crawler.CrawlError),
    ),
    (
        "Page handlers",
        "What a handler is given and what it may return or yield (`docs/extracting.md`).",
        (crawler.Page, crawler.Request, crawler.Handled, crawler.Router, handlers.content_types),
    ),
    (
        "Item pipelines",
        plain(inspect.cleandoc(pipelines.__doc__ or "")),
        (crawler.DropItem,),
    ),
    (
        "Stages of your own",
        "Request and response hooks: a router's `stages` (`docs/extracting.md`, \"Beyond a"
        ' handler: the page pipeline").',
        (stage.Stage, visit.PageVisit),
    ),
)


def _doc(thing: Any) -> str:
    return plain(inspect.cleandoc(thing.__doc__ or "")).strip()


def _signature(thing: Callable[..., Any]) -> str:
    """Its parameters and defaults, without annotations (the types are the source's and
    `Keywords`'; their text differs between Python versions)."""
    try:
        signature = inspect.signature(thing)
    except (TypeError, ValueError):
        return "(...)"
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """A class's own public methods and properties, in the order of its source."""
    for name, member in vars(cls).items():
        if name.startswith("_") or not (callable(member) or isinstance(member, property)):
            continue
        yield name, member


def entry(thing: Any) -> str:
    """One name's part of the page: its heading, signature, docstring, and a class's
    public methods and properties."""
    name = f"{thing.__module__}.{thing.__qualname__}"
    if thing.__module__.startswith("crawler.") and hasattr(crawler, thing.__name__):
        name = f"crawler.{thing.__name__}"
    lines = [f"### `{name}`", ""]
    if not (inspect.isclass(thing) and issubclass(thing, BaseException)):
        lines += ["```text", f"{thing.__name__}{_signature(thing)}", "```", ""]
    lines += [_doc(thing), ""]
    if inspect.isclass(thing) and not issubclass(thing, BaseException):
        for member_name, member in _members(thing):
            if isinstance(member, property):
                lines += [f"- `{member_name}` (property): {_doc(member) or '-'}"]
            else:
                function = (
                    member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                )
                doc = _doc(function).replace("\n", " ") or "-"
                lines += [f"- `{member_name}{_signature(function)}`: {doc}"]
        lines.append("")
    return "\n".join(lines)


def keywords() -> str:
    """The options `Crawl` and `seed` take, a row each, from the option table."""
    rows = ["| keyword | type | flag | what it does |", "| --- | --- | --- | --- |"]
    for option in option_table.TABLE:
        if option.name in option_table.API_OWN:
            continue
        what, typed = option.help.replace("|", "\\|"), option.typed.replace("|", "\\|")
        rows.append(f"| `{option.name}` | `{typed}` | `{option.flag}` | {what} |")
    return "\n".join(rows)


def page() -> str:
    parts = [
        "# The Python API",
        "",
        "Made from the docstrings by `python scripts/api_reference.py > docs/api.md` (a test"
        ' checks the two agree). How to use it: "From Python" in [usage.md](usage.md) and'
        " [extracting.md](extracting.md).",
        "",
    ]
    for title, said, things in SECTIONS:
        parts += [f"## {title}", "", said, ""]
        parts += [entry(thing) for thing in things]
        if title == "Running crawls":
            parts += [
                "### Options",
                "",
                "Keyword arguments of `Crawl` and `seed`, each a flag of `crawler crawl`"
                " (`crawler.option_table.Keywords` types them for mypy):",
                "",
                keywords(),
                "",
            ]
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
