"""Clean text (issue 58): each page's main content as Markdown (``page.markdown``,
``--markdown DIR`` with its front matter) and near-duplicate pages found across the
fleet (``--near-duplicates mark|skip``), on ``--local`` and on workers of both brokers."""

from __future__ import annotations

import collections
import hashlib
import json
import random
import re
from pathlib import Path

import pytest
from html_to_markdown import convert

from crawler.content import fingerprints, main_text
from crawler.content.main_text import main_content
from crawler.content.markdown_files import relative_path, write_page
from tests.site_server import Page, SiteServer
from tests.support import FAST_FAILURES, read_records, waited_crawl
from tests.workers import environment, seed

ARTICLE = b"""<html><head><title>Numeric Types</title></head><body>
<nav class="navheader"><a href="/">Home</a> <a href="/next">Next</a></nav>
<div class="sphinxsidebar"><ul><li><a href="/toc">Table of contents</a></li></ul></div>
<main><h1>Numeric Types</h1><p>Integers are <a href="/int">whole numbers</a>.</p>
<h2>Sizes</h2><table><tr><th>Name</th><th>Bytes</th></tr><tr><td>smallint</td><td>2</td></tr>
</table><pre><code class="language-sql">SELECT 1::smallint;</code></pre></main>
<footer>Copyright 2026, the authors. Privacy policy.</footer></body></html>"""


def test_the_main_content_keeps_headings_tables_and_code_and_drops_the_navigation() -> None:
    content = main_content(ARTICLE)
    markdown = content.markdown
    assert "# Numeric Types" in markdown and "## Sizes" in markdown
    assert "| smallint | 2 |" in re.sub(" +", " ", markdown)
    assert "```sql\nSELECT 1::smallint;\n```" in markdown
    assert "[whole numbers](/int)" in markdown
    for left_out in ("Home", "Next", "Table of contents", "Copyright", "Privacy"):
        assert left_out not in markdown
    assert "Integers are whole numbers." in content.text and "```" not in content.text
    assert content.title == "Numeric Types"


def test_the_markdown_made_with_options_made_once_is_html_to_markdown_s_own() -> None:
    """``to_markdown`` calls html-to-markdown's inner function with its options made once;
    a version of it whose inner parts differ must give what its public one gives."""
    html = ARTICLE.decode()
    assert main_text.to_markdown(html) == convert(html, main_text.options()).content
    assert "# Numeric Types" in main_text.to_markdown(html)


def test_a_text_of_more_words_than_a_lane_holds_has_the_fingerprint_of_their_shares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SimHash's votes are summed in lanes of ``LANE`` bits; a text with more words
    than that has wider lanes made for it: the same fingerprint as the same shares."""
    text = words(random.Random(7), 40)
    monkeypatch.setattr(fingerprints, "LANE", 8)  # 255 words at most a lane
    monkeypatch.setattr(fingerprints, "_SPREAD", fingerprints._Spreads(8, 1000))
    wide = fingerprints.simhash(" ".join([text] * 20))  # 800 words
    assert wide == fingerprints.simhash(text) != 0


def words(rng: random.Random, count: int) -> str:
    return " ".join(f"w{rng.randrange(20_000)}" for _ in range(count))


def test_the_fingerprint_is_charikar_s_simhash_of_the_words() -> None:
    """The lanes' sum gives each bit what a vote bit by bit gives: a bit set where the
    words whose hash has it (each as often as it appears) outweigh those without."""
    rng = random.Random(11)
    for count in (1, 2, 7, 300, 3000):
        text = " ".join(f"W{rng.randrange(count * 2)}" for _ in range(count))
        weights = collections.Counter(text.lower().split())
        expected = 0
        for bit in range(64):
            votes = 0
            for word, weight in weights.items():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                votes += weight if int.from_bytes(digest, "little") >> bit & 1 else -weight
            expected |= (votes > 0) << bit
        assert fingerprints.simhash(text) == expected
    assert fingerprints.simhash(" \n ") == 0


def test_a_date_line_moves_few_bits_and_another_text_about_half() -> None:
    rng = random.Random(5)
    body = words(rng, 300)
    first = fingerprints.simhash(body + " updated 2026 01 02")
    again = fingerprints.simhash(body + " updated 2026 11 30")
    other = fingerprints.simhash(words(rng, 300))
    assert fingerprints.distance(first, again) <= fingerprints.THRESHOLD
    assert fingerprints.distance(first, other) > 16
    shared = {b for b in fingerprints.bands(first)} & {b for b in fingerprints.bands(again)}
    assert shared  # near ones share a band: the store finds them by it


def test_a_page_s_file_is_named_by_its_url_and_never_outside_its_directory(tmp_path: Path) -> None:
    assert relative_path("http://a.example/docs/intro.html") == Path("a.example/docs/intro.md")
    assert relative_path("http://a.example:8080/") == Path("a.example_8080/index.md")
    assert relative_path("http://a.example/d/") == Path("a.example/d/index.md")
    assert relative_path("http://a.example/x?q=1") != relative_path("http://a.example/x?q=2")
    for url in ("http://a.example/%2e%2e/%2e%2e/etc/passwd", "http://a.example/a/..%2F..%2Fb",
                "http://a.example/CON", "http://a.example/a%3Cb%3E%7C", "http://a.example/%00nul",
                "http://a.example/" + "x" * 400, "http://a.example/aux.txt"):  # fmt: skip
        path = write_page(tmp_path, url, {"url": url}, "# x\n")
        assert path.resolve().is_relative_to(tmp_path.resolve()), url
        assert all(len(part.encode()) <= 200 for part in path.relative_to(tmp_path).parts)
        name = path.name.split(".")[0].lower()
        assert name not in ("con", "aux", "nul") and not set('<>:"|?*\\\x00') & set(path.name)
    assert not list(tmp_path.rglob("*.part"))  # written whole, renamed into place


#: The site: 50 distinct pages (the first links to every page) and 200 that differ from
#: one another only in a date line.
DISTINCT, NEAR = 50, 200


def serve(site: SiteServer) -> str:
    rng = random.Random(58)
    template = words(rng, 400)
    paths = [f"/d/{i}.html" for i in range(DISTINCT)] + [f"/n/{i}.html" for i in range(NEAR)]
    links = "".join(f'<a href="{site.url(path)}">{path}</a>\n' for path in paths)
    for i, path in enumerate(paths):
        if path.startswith("/d/"):
            text = words(rng, 400)
        else:
            text = (
                f"{template}<p>Updated on 2026-{1 + i % 12:02}-{1 + i % 28:02} at {i % 24}:00</p>"
            )
        nav = links if i == 0 else f'<a href="{site.url(paths[0])}">home</a>'
        site.pages[path] = Page(
            f"<html><title>{path}</title><nav>{nav}</nav><main><h1>Page</h1><p>{text}</p>"
            "</main></html>".encode()
        )
    return site.url(paths[0])


def check(markdown: Path, records: list[dict[str, object]], site: SiteServer) -> None:
    files = sorted(markdown.rglob("*.md"))
    assert len(files) == DISTINCT + 1, [f.name for f in files]
    near = [r for r in records if r.get("near_duplicate_of")]
    assert len(near) == NEAR - 1
    assert all(str(r["near_duplicate_of"]).startswith(site.url("/n/")) for r in near)
    assert all("markdown_file" not in r for r in near)
    first = files[0].read_text()
    front = dict(line.split(": ", 1) for line in first.split("---\n")[1].splitlines())
    assert set(front) >= {"url", "title", "fetched", "status", "content_digest", "crawl_id"}
    assert json.loads(front["status"]) == 200 and "# Page" in first


def test_a_local_crawl_writes_one_markdown_file_for_the_near_duplicates(
    site: SiteServer, tmp_path: Path
) -> None:
    markdown, output = tmp_path / "md", tmp_path / "pages.jsonl"
    done = seed(
        environment(), serve(site), "--local", "--markdown", str(markdown),
        "--near-duplicates", "skip", "-o", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    check(markdown, read_records(output), site)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_find_the_near_duplicates_one_another_fetched(
    site: SiteServer, tmp_path: Path, broker_env: str, request: pytest.FixtureRequest
) -> None:
    root, output = tmp_path / "markdown", tmp_path / "pages.jsonl"
    env = environment(
        **request.getfixturevalue(broker_env), **FAST_FAILURES, CRAWLER_MARKDOWN_DIR=str(root)
    )
    waiting, stdout, stderr, _ = waited_crawl(
        env, serve(site), "--markdown", "site", "--near-duplicates", "skip", "-o", str(output),
        processes=2, threads=4, timeout=120,
    )  # fmt: skip
    assert waiting.returncode == 0, stdout + stderr
    check(root / "site", read_records(output), site)


def serve_articles(site: SiteServer, footer: str, changed: frozenset[int] = frozenset()) -> str:
    """30 articles, each linked from the first, with a footer (outside the main
    content) that says ``footer``; the articles in ``changed`` with a new paragraph."""
    rng = random.Random(30)
    paths = [f"/a/{i}.html" for i in range(30)]
    links = "".join(f'<a href="{site.url(path)}">{path}</a>\n' for path in paths)
    for i, path in enumerate(paths):
        extra = "<p>A new paragraph.</p>" if i in changed else ""
        site.pages[path] = Page(
            f"<html><title>{path}</title><nav>{links if i == 0 else ''}</nav><main><h1>{i}</h1>"
            f"<p>{words(rng, 60)}</p>{extra}</main><footer>Built {footer}</footer></html>".encode()
        )
    return site.url(paths[0])


@pytest.mark.parametrize("where", ["local", "rabbitmq_env", "redis_env"])
def test_a_recrawl_counts_a_page_changed_only_outside_its_text_unchanged(
    where: str, site: SiteServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    root = tmp_path / "markdown"

    def crawl(seed_url: str, *args: str) -> None:
        if where == "local":
            done = seed(environment(), seed_url, "--local", *args)
            assert done.returncode == 0, done.stderr[-2000:]
            return
        env = environment(
            **request.getfixturevalue(where), **FAST_FAILURES, CRAWLER_MARKDOWN_DIR=str(root)
        )
        waiting, stdout, stderr, _ = waited_crawl(env, seed_url, *args, threads=4)
        assert waiting.returncode == 0, stdout + stderr

    crawl(serve_articles(site, "2026-12-01"), "--markdown", str(root / "md1"), "-o", str(first))
    assert len(list((root / "md1").rglob("*.md"))) == 30
    changed = frozenset({3, 7, 11})
    seed_url = serve_articles(site, "2026-12-07", changed)  # every footer's date, 3 texts
    crawl(
        seed_url, "--recrawl-from", str(first), "--markdown", str(root / "md2"), "-o", str(second)
    )
    records = {r["url"]: r for r in read_records(second)}
    assert len(records) == 30
    for i in range(30):
        record = records[site.url(f"/a/{i}.html")]
        if i in changed:
            assert record["outcome"] == "crawled" and record["change"] == "text"
        else:
            assert record["outcome"] == "unchanged" and record["change"] == "markup", record
    written = sorted(p.name for p in (root / "md2").rglob("*.md"))
    assert written == sorted(f"{i}.md" for i in changed)  # none again but the 3
