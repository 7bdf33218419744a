"""``--markdown`` and ``--near-duplicates``: a page's main content as Markdown, and the
pages nearly like one seen before in the crawl, :class:`ContentStage`."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

from crawler import outcomes
from crawler.content import fingerprints
from crawler.content.main_text import MainContent, main_content
from crawler.content.markdown_files import relative_path, write_page
from crawler.environment import Lifetimes, directory_under
from crawler.option_rules import NEAR_DUPLICATES_SKIP
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.stores import StorePool

logger = logging.getLogger(__name__)


class ContentStage(Stage):
    """For an HTML page of a crawl with ``--markdown`` or ``--near-duplicates``: its main
    content (:mod:`crawler.content.main_text`, from the rendered DOM with ``--render``),
    its text's digest in the record (``text_digest``), and

    * ``--near-duplicates``: its text's SimHash (:mod:`crawler.content.fingerprints`)
      looked up by its bands in the crawl's store, where every worker keeps the first
      page of each band value; a page within 4 bits of one seen before is
      ``near_duplicate_of`` it, and with ``skip`` its handler is not run and its links
      are not followed;
    * ``--markdown``: its file written (:mod:`crawler.content.markdown_files`), unless
      skipped as a near-duplicate; the record names it (``markdown_file``);
    * ``--recrawl-from`` of a crawl that kept its pages' ``text_digest``: a page
      downloaded again whose main text is the same is ``unchanged`` (its Markdown not
      written again, its handler not run, its links followed), and the record says
      which changed (``change``: ``markup`` alone, or the ``text``).

    Parameters:
      pool(StorePool): The store of the crawl's fingerprints.
      lifetimes(Lifetimes): How long they live (the crawl's grace, from each page's).
      root(Path|None): The one directory under which crawls may name their Markdown's
        (a worker's ``CRAWLER_MARKDOWN_DIR``, a ``--local`` crawl's ``--markdown``).
    """

    def __init__(self, pool: StorePool, lifetimes: Lifetimes, root: Path | None) -> None:
        self.pool, self.lifetimes, self.root = pool, lifetimes, root

    def before_claim(self, visit: PageVisit) -> None:
        name = visit.crawl_options.markdown
        visit.markdown_dir = None if name is None else directory_under("markdown", self.root, name)

    def on_page(self, visit: PageVisit) -> None:
        options = visit.crawl_options
        if visit.body is None or (visit.markdown_dir is None and not options.near_duplicates):
            return
        html = visit.body if visit.rendered is None else visit.rendered.html
        visit.main = main_content(html)
        if options.near_duplicates:
            visit.near_duplicate_of = self._near_duplicate_of(visit, visit.main)

    def on_links(self, visit: PageVisit) -> None:
        if visit.near_duplicate_of is not None and self._skipped(visit):
            visit.anchors, visit.page = [], None  # no handler, no links
        elif self._same_text(visit):
            visit.page = None  # its items made before; its links followed as found

    @staticmethod
    def _same_text(visit: PageVisit) -> bool:
        """A recrawl's page downloaded again whose main text is the earlier crawl's."""
        earlier, main = visit.earlier, visit.main
        return (
            earlier is not None and main is not None and earlier.text_digest is not None
            and earlier.text_digest == main.digest
        )  # fmt: skip

    def on_record(self, visit: PageVisit) -> None:
        main = visit.main
        if main is None:
            return
        visit.record["text_digest"] = main.digest
        if visit.near_duplicate_of is not None:
            visit.record["near_duplicate_of"] = visit.near_duplicate_of
        if visit.earlier is not None and visit.earlier.text_digest is not None:
            same = self._same_text(visit)  # a recrawl: what changed, said
            visit.record["change"] = "markup" if same else "text"
            if same:
                visit.record["outcome"] = outcomes.UNCHANGED
                return  # its Markdown written before
        if visit.markdown_dir is None or (visit.near_duplicate_of and self._skipped(visit)):
            return
        write_page(visit.markdown_dir, visit.url, _front_matter(visit, main), main.markdown)
        visit.record["markdown_file"] = relative_path(visit.url).as_posix()

    @staticmethod
    def _skipped(visit: PageVisit) -> bool:
        return visit.crawl_options.near_duplicates == NEAR_DUPLICATES_SKIP

    def _near_duplicate_of(self, visit: PageVisit, main: MainContent) -> str | None:
        """The page seen before in the crawl whose main text is within the threshold of
        this one's (or that page's own original), if any.

        Each band value's key holds the pages that had it, one line each, in the order
        they came (``add``, then ``append``).  A page goes through its bands in one
        order, adds its line to each and looks at the lines before it: the first near
        one makes it a near-duplicate.  Its lines in the bands after that say whose
        (``dup:URL``), so that a page near it is found near the original as well (pages
        of one template drift a few bits apart), and so that the original, which its
        own earlier line in their first shared band kept from seeing it, never takes
        it for an earlier page.  Of two near pages that come at once, the later in the
        first band they share is the near-duplicate: never both, nor neither."""
        fingerprint = fingerprints.simhash(main.text)
        crawl_id = visit.crawl_options.crawl_id or ""
        url, original = visit.url, None
        with self.pool.reserve() as client:
            for index, value in fingerprints.bands(fingerprint):
                key = f"near:{crawl_id}:{index}:{value:x}"  # no hash tag: spread in a cluster
                line = f"{fingerprint:016x} {url}" + (f" dup:{original}" if original else "")
                mine = (line + "\n").encode("utf-8", "surrogatepass")
                if client.add(key, mine, self.lifetimes.grace):
                    continue  # the first page of this band value
                client.append(key, mine)
                if original is None:
                    original = _earlier_near(client.get(key), url, fingerprint)
        return original


def _earlier_near(held: object, url: str, fingerprint: int) -> str | None:
    """The first page before ``url`` in a band's lines (``fingerprint url [dup:URL]``)
    within the threshold of ``fingerprint``: its original, for a near-duplicate's line;
    a line that is a near-duplicate of ``url`` itself is passed over."""
    text = held.decode("utf-8", "surrogatepass") if isinstance(held, bytes) else str(held or "")
    for line in text.splitlines():
        other, _, rest = line.partition(" ")
        other_url, _, of = rest.partition(" dup:")
        if other_url == url:  # this page's own line: none near it came before
            return None
        if of == url:
            continue
        try:
            if fingerprints.distance(int(other, 16), fingerprint) <= fingerprints.THRESHOLD:
                return of or other_url
        except ValueError:  # a line cut short by an eviction: not a page
            continue
    return None


def _front_matter(visit: PageVisit, main: MainContent) -> dict[str, object]:
    """Where a page's Markdown came from, for its front matter."""
    response = visit.response
    stored = visit.stored
    return {
        "url": visit.url,
        "final_url": response.url if response.url != visit.url else None,
        "title": main.title,
        "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "status": response.status_code,
        "content_digest": "sha256:" + hashlib.sha256(visit.body or b"").hexdigest(),
        "crawl_id": visit.crawl_options.crawl_id,
        "warc_record_id": stored.record_id if stored is not None and stored.record_id else None,
    }
