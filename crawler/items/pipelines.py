"""Item pipelines: the user's functions each item passes through on its way to the sink,
as Scrapy's item pipelines are; each may change an item, or drop it.

A pipeline is a function ``pipeline(item, page)`` (or ``async def``) that returns the
item to keep (the same ``dict`` changed, or another), or drops it by raising
:class:`DropItem` (its text says why) or by returning None.  An object with a
``process_item(item, page)`` method is taken as its method, and a class with one is
made once (``Pipeline()``) when loaded: a Scrapy pipeline's shape, the page where
Scrapy passes the spider.

A crawl's pipelines are its handler's own (a :class:`~crawler.handlers.Router`'s
:meth:`~crawler.handlers.Router.item_pipeline`, or a handler function's
``item_pipelines`` attribute: functions or objects, made already), then those the
crawl names (``--pipeline package.module:function``, repeatable), in that order.
Workers load the pipelines the crawls name as they load handlers (``crawler worker
--pipeline MODULE:FUNCTION``, or ``CRAWLER_HANDLERS``), never one a message names.

They run on the page's handler call, within its timeout (``--handler-timeout``), after
the handler: an item a pipeline returns is checked as the handler's items are (strict
JSON).  A pipeline that fails (raises anything but :class:`DropItem`, or returns
something that is not a JSON object) loses nothing: the item goes on as it was before
that pipeline, and the page's record says so in one line an error (``item_errors``,
``pipeline-failed: NAME: why``).  Items dropped are counted in the page's record
(``dropped_items``), in the crawl's summary, ``crawler status`` and the dashboard.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

#: An item pipeline: a function of an item and its page, which returns the item to
#: keep, or None (or raises :class:`DropItem`) to drop it.
ItemPipeline = Callable[[dict[str, Any], Any], Any]


class DropItem(Exception):
    """Raised by an item pipeline: the item is dropped; the text says why."""


def as_pipeline(value: Any) -> ItemPipeline:
    """``value`` as a pipeline, where it is declared or loaded (once): a function as it
    is, an object's ``process_item``, a class with one made first; TypeError for
    anything else."""
    if inspect.isclass(value) and callable(getattr(value, "process_item", None)):
        value = value()
    return _made(value)


def _made(value: Any) -> ItemPipeline:
    """A pipeline already made: a function as it is, an object's ``process_item``;
    TypeError for anything else (a class among them: it would be made again each time)."""
    if inspect.isclass(value):
        raise TypeError(
            f"an item pipeline here must be a function or an object, not the class {value!r}"
            " (a router's item_pipeline() or --pipeline makes a class once)"
        )
    method = getattr(value, "process_item", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(value):
        return value  # type: ignore[no-any-return]
    raise TypeError(f"an item pipeline must be a function or have process_item(), not {value!r}")


def name_of(pipeline: ItemPipeline) -> str:
    """What an error calls ``pipeline``: ``module:function`` (``Class.process_item``)."""
    module = getattr(pipeline, "__module__", None) or "?"
    return f"{module}:{getattr(pipeline, '__qualname__', type(pipeline).__name__)}"


def handler_pipelines(handler: Any) -> list[ItemPipeline]:
    """The pipelines a crawl's handler brings, read for each page: its
    ``item_pipelines`` (a Router's, made as they were declared; or a function's
    attribute: functions, or objects with ``process_item``)."""
    return [_made(one) for one in getattr(handler, "item_pipelines", None) or ()]


def of_crawl(handler: Any, named: Iterable[ItemPipeline]) -> list[ItemPipeline]:
    """A crawl's pipelines, in order: its handler's own, then those it names."""
    return [*handler_pipelines(handler), *named]
