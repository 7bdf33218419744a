"""A page's main content, without its navigation, sidebars, header and footer: as
Markdown (headings, lists, tables, code blocks with their language, links) and as plain
text (:func:`main_content`).

The main part is the page's ``<main>``, ``[role=main]`` or ``<article>``, else its
``<body>``; from it are dropped what is never content (scripts, styles, forms, frames),
what HTML and ARIA mark as navigation, banners, sidebars and footers, and the blocks
whose class or id says so (``nav``, ``menu``, ``sidebar``, ``footer``, ``breadcrumb``,
``related``...), with Lexbor (selectolax), the crawler's parser.  html-to-markdown
(Rust) writes the rest as Markdown; the plain text is that Markdown without its marks.

Chosen by measuring the candidates on the Python 3.11 and PostgreSQL 15 docs
(``docs/extracting.md``, "Clean text"): trafilatura took 8-36 ms a page and dropped
PostgreSQL's headings; readability lost headings and links; this keeps them all for
about 1 ms a PostgreSQL page and 4 ms a (much larger) Python one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING

from selectolax.lexbor import LexborHTMLParser

if TYPE_CHECKING:
    from html_to_markdown import ConversionOptions

#: Where a page says its main content is.
MAIN = "main, [role=main], article"
#: What is never a page's main content.
NOT_CONTENT = ", ".join([
    "script", "style", "noscript", "template", "svg", "iframe", "form", "button", "input",
    "select", "nav", "aside:not([class*=footnote])", "footer", "header:not(article header)",
    "[role=navigation]", "[role=banner]", "[role=contentinfo]", "[role=search]",
    "[role=complementary]", "[aria-hidden=true]", "[hidden]", "a.headerlink",
])  # fmt: skip
#: The blocks whose class or id is looked at (not every span of a highlighted listing).
BLOCKS = ", ".join(
    f"{tag}[class], {tag}[id]" for tag in ("div", "section", "ul", "ol", "table", "p")
)
_NOT_CONTENT_NAME = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navheader|navfooter|navigation|menu|sidebar|sphinxsidebar|"
    r"footer|breadcrumbs?|related|cookie|banner|share|social|skip-?link|toc|subscribe|"
    r"advert|ads?)(?:$|[\s_-])",
    re.IGNORECASE,
)
_LANGUAGE = re.compile(r"(?:highlight|language|lang)-([A-Za-z0-9_+#-]+)")


def options() -> ConversionOptions:
    """html-to-markdown's options (its own cleaning, ``preprocessing``, is off: what it
    would drop is gone already)."""
    from html_to_markdown import ConversionOptions, PreprocessingOptions

    return ConversionOptions(
        extract_metadata=False, skip_images=True, autolinks=False,
        code_block_style="backticks", sup_symbol="^",
        preprocessing=PreprocessingOptions(enabled=False),
    )  # fmt: skip


@cache
def _converter() -> Callable[[str], str]:
    """html-to-markdown's ``convert`` with :func:`options` made into its Rust form once:
    its public function makes them anew at every call (0.08 ms, a tenth of a PostgreSQL
    page's conversion).  The public function where its inner parts are not those of
    3.21 (``tests/test_clean_text.py`` checks that both give the same Markdown).  Made
    on first use: a process that makes no Markdown does not load the library (some
    10-15 ms of the command's and every worker's start)."""
    from html_to_markdown import convert

    chosen = options()

    def public(html: str) -> str:
        return convert(html, chosen).content or ""

    try:
        from html_to_markdown import api

        rust_options = api._to_rust_conversion_options(chosen, _visitor_override=None)
        rust_convert = api._rust.convert  # type: ignore[attr-defined]
    except (ImportError, AttributeError, TypeError):
        return public

    def once_made(html: str) -> str:
        return rust_convert(html=html, options=rust_options, visitor=None).content or ""

    return once_made


def to_markdown(html: str) -> str:
    """``html`` as Markdown, by the converter :func:`_converter` makes once."""
    return _converter()(html)


#: Markdown's inline marks, taken out for the plain text: images and links (the marks
#: of whole lines, code fences, headings, rules and tables, a line at a time).  A link's
#: target may hold one level of parentheses (written as runs between them: an
#: alternative tried at every character took twice the time).
_INLINE_MARKS = [
    ("![", re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),
    ("](", re.compile(r"\[([^\]]*)\]\([^()]*(?:\([^)]*\)[^()]*)*\)"), r"\1"),
]
#: A heading's mark.
_HEADING = re.compile(r"#{1,6} +")
#: A table's rule line (``| --- | :-: |``).
_TABLE_RULE = re.compile(r"^\|?(?: *:?-{3,}:? *\|)+ *:?-*:? *$")
#: The pipes between a table's cells.
_CELL_PIPE = re.compile(r" +\| +")


@dataclass(frozen=True)
class MainContent:
    """A page's main content.

    Parameters:
      markdown(str): As Markdown.
      text(str): As plain text.
      title(str|None): The page's ``<title>``.
    """

    markdown: str
    text: str
    title: str | None

    @cached_property
    def digest(self) -> str:
        """``sha256:`` and the SHA-256 of :attr:`text`: what a recrawl compares."""
        return "sha256:" + hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()


def main_content(html: str | bytes) -> MainContent:
    """The main content of the page ``html`` (see the module)."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else None
    root = tree.css_first(MAIN) or tree.body or tree.root
    if root is None:
        return MainContent("", "", title)
    for node in root.css(NOT_CONTENT):
        node.decompose()
    for node in root.css(BLOCKS):
        attributes = node.attributes
        if _NOT_CONTENT_NAME.search(
            f"{attributes.get('class') or ''} {attributes.get('id') or ''}"
        ):
            node.decompose()
    sphinx = b"highlight-" in html if isinstance(html, bytes) else "highlight-" in html
    for pre in root.css("div[class*=highlight-] pre") if sphinx else ():
        # Sphinx's listings: their language
        holder = pre.parent.parent if pre.parent is not None else None
        found = _LANGUAGE.search((holder.attributes.get("class") or "") if holder else "")
        language = found.group(1).replace("python3", "python") if found else ""
        if language not in ("", "default", "none"):
            pre.attrs["class"] = f"language-{language}"
    markdown = to_markdown(root.html or "").strip() + "\n"
    return MainContent(markdown, plain_text(markdown), title)


def plain_text(markdown: str) -> str:
    """``markdown`` without its marks: the text a reader reads (a table's rows as its
    cells a tab apart).  The marks of whole lines are read a line at a time (a line's
    first character tells which it may have: a regular expression anchored at each
    line's start tried every character)."""
    lines = markdown.split("\n")
    if "```" in markdown:  # a code fence's line, where a newline ends it
        last = lines.pop()
        lines = [line for line in lines if not line.startswith("```")]
        lines.append(last)
        markdown = "\n".join(lines)
    for needle, pattern, replacement in _INLINE_MARKS:
        if needle in markdown:  # most pages have few kinds of marks: skip the others
            markdown = pattern.sub(replacement, markdown)
            lines = markdown.split("\n")
    kept = []
    for line in lines:
        first = line[:1]
        if first == "#":
            heading = _HEADING.match(line)
            if heading is not None:
                line = line[heading.end() :]
                first = line[:1]
        if first == "-" and line.startswith("---") and not line.strip("-"):
            continue  # a rule
        if first == "|":  # a table's row as its cells, its rule lines left out
            if _TABLE_RULE.match(line):
                continue
            line = _table_row(line)
        kept.append(line)
    markdown = "\n".join(kept)
    for mark in ("**", "__", "`"):
        markdown = markdown.replace(mark, "")
    return markdown


def _table_row(line: str) -> str:
    """A Markdown table's row as its cells, a tab apart."""
    body = line.strip().removeprefix("|").removesuffix("|").strip(" ")
    return _CELL_PIPE.sub("\t", body)
