"""``--files``: the files a page's items name, downloaded by messages of their own and
kept by their content's digest, :class:`FilesStage`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crawler.archiving.files import FileStore
from crawler.environment import directory_under
from crawler.fetching import Fetched
from crawler.handlers import Request
from crawler.items.files import FILE_KEY, FILE_LABEL, FILE_URLS, FILES, PENDING
from crawler.links.canonical import canonical_url
from crawler.links.extraction import resolved
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit


class FilesStage(Stage):
    """On a page, give each item that names files (``file_urls``, a handler's
    :class:`~crawler.handlers.File`) its ``files`` entries, and ask for each file in the
    crawl's scope as a request of its own (:data:`~crawler.handlers.FILE_LABEL`, claimed
    apart from a page at its URL: once a crawl, however many items name it); a file out
    of scope, past ``--max-depth`` or not an http(s) URL is said so in its entry at once.
    The item sinks write the items once their files' fetches have ended
    (:mod:`crawler.items.files`).

    On a file's message: give it to no handler, read its body (within the worker's
    bounds, as a page's), keep it in the crawl's ``--files`` directory by its SHA-256
    (:class:`~crawler.archiving.files.FileStore`) and say where in its record
    (``file``).  A file that cannot be written fails its message as any failure does.

    Parameters:
      root(Path|None): The one directory under which crawls may name their files'
        directory (a worker's ``CRAWLER_FILES_DIR``, a ``--local`` crawl's ``--files``);
        None: a message naming one is refused.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root

    def before_claim(self, visit: PageVisit) -> None:
        name = visit.crawl_options.files
        visit.files = None if name is None else FileStore(directory_under("files", self.root, name))
        if visit.files is not None and visit.label == FILE_LABEL:
            visit.handler, visit.pipelines = None, []  # a file, not a page to handle

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        if visit.files is not None and visit.label == FILE_LABEL:
            visit.takes_content = True  # read whatever its type, never parsed

    def on_links(self, visit: PageVisit) -> None:
        if visit.files is None:
            return
        if visit.label == FILE_LABEL:
            if visit.content is not None:
                content_type = visit.response.headers.get("Content-Type")
                visit.file = visit.files.keep(visit.url, visit.content, content_type)
            return
        if visit.handled is None:
            return
        base = visit.response.url if visit.page is None else visit.page.base
        for item in visit.handled.items:
            if FILE_URLS in item:
                item[FILES] = [self._entry(visit, base, url) for url in _urls(item[FILE_URLS])]
        files = {request.url for request in visit.asked if request.label == FILE_LABEL}
        if files and visit.anchors:  # fetched as files, not again as the page's links
            visit.anchors = [link for link in visit.anchors if _canonical(link) not in files]

    def on_record(self, visit: PageVisit) -> None:
        if visit.file is not None:
            visit.record["file"] = visit.file

    @staticmethod
    def _entry(visit: PageVisit, base: str, url: Any) -> dict[str, Any]:
        """An item's entry of a file: pending, its request added to the page's; or what
        keeps it from being downloaded."""
        if not isinstance(url, str):
            return {"url": None, "status": "refused: file_urls holds a URL that is not a string"}
        try:
            link = canonical_url(resolved(base, url))
        except ValueError as e:
            return {"url": url, "status": f"refused: {e or 'not a URL'}"}
        options = visit.crawl_options
        if not link.startswith(("http://", "https://")):
            return {"url": link, "status": "refused: not an http(s) URL"}
        if not options.allows_url(link):
            return {"url": link, "status": "not downloaded: out of the crawl's scope"}
        if options.max_depth is not None and visit.depth + 1 > options.max_depth:
            return {"url": link, "status": "not downloaded: past --max-depth"}
        visit.asked.append(Request(link, label=FILE_LABEL, unique_key=FILE_KEY))
        return {"url": link, "status": PENDING}


def _canonical(link: str) -> str | None:
    try:
        return canonical_url(link)
    except ValueError:
        return None


def _urls(given: Any) -> list[Any]:
    """An item's ``file_urls``: a list, or one URL as a string."""
    return list(given) if isinstance(given, list) else [given]
