"""Which HTML parser finds ``--follow-relative``'s links fastest on real pages?

    python benchmarks/extractors.py [DIRECTORY]   # default: the Python docs of python3-doc

Reads every ``*.html`` file under DIRECTORY and times, per page, single-threaded:

- upstream's regex (``rb'<a href="([^"]+)">'``, the default without ``--follow-relative``);
- Python's ``html.parser`` tokenizer (what ``--follow-relative`` used before);
- lxml (libxml2's HTML parser), ``iterparse``-free: the tree, then ``//a/@href``;
- selectolax on Lexbor (a WHATWG HTML parser in C), ``css("a[href]")``;
- the crawler's :func:`crawler.links.extraction.html_links` as shipped: parsing,
  decoding, cleaning and resolving each link.

Prints links found and milliseconds per page for each (best of ``--repeat`` passes).
lxml is a benchmark-only dependency (``pip install lxml``); without it, its row says so.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measuring.real_sites import docs_directory  # noqa: E402
from crawler.links.extraction import html_links  # noqa: E402

UPSTREAM = re.compile(rb'<a href="([^"]+)">')


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href is not None:
                self.hrefs.append(href)


def with_html_parser(body: bytes) -> int:
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "surrogateescape"))
    parser.close()
    return len(parser.hrefs)


def with_lxml(body: bytes) -> int:
    import lxml.html  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return len(lxml.html.fromstring(body).xpath("//a/@href"))


def with_selectolax(body: bytes) -> int:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(body.decode("utf-8", "surrogateescape"))
    return sum(a.attributes.get("href") is not None for a in tree.css("a[href]"))


def with_upstream_regex(body: bytes) -> int:
    return len(UPSTREAM.findall(body))


def with_the_crawler(body: bytes) -> int:
    return len(html_links(body, "http://127.0.0.1/library/index.html", "text/html"))


EXTRACTORS: dict[str, Callable[[bytes], int]] = {
    "upstream regex": with_upstream_regex,
    "html.parser": with_html_parser,
    "lxml": with_lxml,
    "selectolax (Lexbor)": with_selectolax,
    "crawler html_links": with_the_crawler,
}


def measure(pages: list[bytes], repeat: int) -> dict[str, tuple[int, float] | str]:
    """Links found and the best milliseconds per page of each extractor."""
    results: dict[str, tuple[int, float] | str] = {}
    for name, extract in EXTRACTORS.items():
        try:
            links = sum(extract(body) for body in pages[:1])
        except ImportError as e:
            results[name] = f"not installed ({e.name})"
            continue
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            links = sum(extract(body) for body in pages)
            best = min(best, time.perf_counter() - started)
        results[name] = (links, 1000 * best / len(pages))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    directory = arguments.directory or docs_directory()
    if directory is None:
        print("no pages: pass a directory, or install python3-doc", file=sys.stderr)
        return 2
    pages = [path.read_bytes() for path in sorted(directory.rglob("*.html"))]
    size = sum(map(len, pages)) / len(pages) / 1024
    print(f"{len(pages)} pages under {directory}, {size:.0f} KiB on average")
    print(f"{'extractor':<22} {'links':>9} {'ms/page':>8}")
    for name, result in measure(pages, arguments.repeat).items():
        if isinstance(result, str):
            print(f"{name:<22} {result}")
        else:
            print(f"{name:<22} {result[0]:>9} {result[1]:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
