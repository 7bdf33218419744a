"""``--render auto``: a crawl renders only the pages that need a browser, learning
which kinds of page do from samples, in the crawl's store (every worker's samples serve
every worker); its records say which pages were rendered and why."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from crawler.rendering import adaptive
from crawler.stores.memory import MemoryClient
from tests.scripted_site import PAGES, chromium, mixed_site, scripted_site
from tests.site_server import Page, SiteServer
from tests.support import FAST_FAILURES, read_records, waited_crawl
from tests.test_rendering import pages_reached, run_local
from tests.workers import environment


@pytest.fixture(scope="module", autouse=True)
def system_chromium() -> str:
    return chromium()


#: The site's one host paced by nothing but its answers: the test is of what is rendered.
UNPACED = ("--no-auto-throttle",)


def rendered_share(records: list[dict[str, Any]]) -> float:
    crawled = [r for r in records if r["outcome"] == "crawled"]
    return float(sum(r["rendered"] for r in crawled) / len(crawled))


def check_mixed_crawl(records: list[dict[str, Any]], site: SiteServer, every: list[str]) -> None:
    """Every page reached (what rendering them all reaches), at most 20% rendered, each
    app page rendered because its kind needs a browser, and every record says why."""
    crawled = [r for r in records if r["outcome"] == "crawled"]
    assert pages_reached(records, site) == sorted(every)
    assert rendered_share(records) <= 0.20, collections.Counter(r["render_reason"] for r in crawled)
    assert all(isinstance(r["rendered"], bool) and r["render_reason"] for r in crawled)
    apps = {r["url"]: r for r in crawled if "/app/" in r["url"]}
    assert all(r["rendered"] for r in apps.values())
    assert {r["page_kind"] for r in apps.values()} == {"127.0.0.1/app/{n}.html"}
    reasons = collections.Counter(r["render_reason"] for r in apps.values())
    assert reasons[adaptive.KIND_NEEDS] >= len(apps) - adaptive.SAMPLES, reasons
    samples = [r for r in apps.values() if r["render_reason"] == adaptive.SAMPLE]
    assert samples and all(r["render_new_links"] >= 1 for r in samples)  # what it learnt from
    docs = [r for r in crawled if "/docs/" in r["url"]]
    static = [r for r in docs if r["render_reason"] == adaptive.KIND_STATIC]
    assert len(static) >= 0.8 * len(docs) and not any(r["rendered"] for r in static)


def test_local_render_auto_renders_only_the_section_built_by_script(
    site: SiteServer, tmp_path: Path
) -> None:
    every = mixed_site(site)
    plain = run_local(site.url("/"), *UNPACED, "-o", str(tmp_path / "plain.jsonl"))
    assert plain.returncode == 0, plain.stderr[-2000:]
    missed = set(every) - set(pages_reached(read_records(tmp_path / "plain.jsonl"), site))
    assert missed == {f"/app/{i}.html" for i in range(1, 40)}  # what only a browser finds

    auto = run_local(
        site.url("/"), "--render", "auto", *UNPACED, "-o", str(tmp_path / "auto.jsonl")
    )
    assert auto.returncode == 0, auto.stderr[-2000:]
    check_mixed_crawl(read_records(tmp_path / "auto.jsonl"), site, every)


@pytest.mark.parametrize("broker_env", ["rabbitmq_env", "redis_env"])
def test_workers_render_auto_learn_across_the_fleet(
    broker_env: str, site: SiteServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    every = mixed_site(site)
    env = environment(**request.getfixturevalue(broker_env), **FAST_FAILURES)
    output = tmp_path / "records.jsonl"
    waiting, stdout, stderr, _ = waited_crawl(
        env, site.url("/"), "--render", "auto", "--follow-relative", "-o", str(output),
        processes=2, threads=4, timeout=240,
    )  # fmt: skip
    assert waiting.returncode == 0, stdout + stderr
    check_mixed_crawl(read_records(output), site, every)


def test_a_site_that_needs_a_browser_everywhere_renders_every_page(
    site: SiteServer, tmp_path: Path
) -> None:
    scripted_site(site)
    auto = run_local(site.url("/"), "--render=auto", "-o", str(tmp_path / "auto.jsonl"))
    assert auto.returncode == 0, auto.stderr[-2000:]
    records = read_records(tmp_path / "auto.jsonl")
    assert pages_reached(records, site) == sorted(PAGES)
    assert all(r["rendered"] for r in records), [(r["url"], r["render_reason"]) for r in records]


def test_with_a_handler_a_kind_whose_items_only_a_browser_sees_is_rendered(
    site: SiteServer, tmp_path: Path
) -> None:
    """Shop pages whose links are all in their HTML but whose products a script writes:
    the links agree, the handler's items do not, so every shop page is rendered and
    every one gives its two items."""
    shops = [f"/shop/{i}.html" for i in range(12)]
    site.pages["/"] = Page(b"".join(f'<a href="{s}">{s}</a>'.encode() for s in shops))
    for path in shops:
        site.pages[path] = Page(
            b'<html><body><a href="/">home</a><div id="list"></div><script>'
            b"for (const n of ['a', 'b']) { const d = document.createElement('div');"
            b" d.className = 'product'; d.textContent = n;"
            b" document.getElementById('list').appendChild(d); }</script></body></html>"
        )
    output = tmp_path / "pages.jsonl"
    done = run_local(
        site.url("/"), "--render", "auto", "--handler", "tests.page_handlers:products",
        *UNPACED, "--records", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = {r["url"].removeprefix(site.base_url): r for r in read_records(output)}
    assert all(records[path]["rendered"] for path in shops), records
    assert all(len(records[path].get("items", [])) == 2 for path in shops)
    samples = [records[p] for p in shops if records[p]["render_reason"] == adaptive.SAMPLE]
    assert samples and samples[0]["render_new_links"] == 0
    assert samples[0]["render_new_items"] == 2  # what made its kind need a browser


def test_page_kinds_generalise_numbers_and_ids_and_keep_labels() -> None:
    kind = adaptive.page_kind
    assert kind("http://shop.test/item/17.html") == kind("http://shop.test/item/18.html")
    assert kind("http://shop.test/item/17.html") == "shop.test/item/{n}.html"
    assert kind("http://a.test/u/3f2a9c1e-77b0-4c1e-9d7e-0a1b2c3d4e5f/") == "a.test/u/{id}/"
    assert kind("http://a.test/p?id=3&sort=x") == kind("http://a.test/p?sort=y&id=9")
    assert kind("http://a.test/p?id=3") != kind("http://a.test/p")
    assert kind("http://a.test/about") != kind("http://a.test/contact")
    assert kind("http://a.test/x/1", label="product") == "label:product"


def test_the_static_page_says_when_it_needs_a_browser() -> None:
    signal = adaptive.page_signal
    assert signal(b"<noscript>Please enable JavaScript to use this app.</noscript>")
    assert signal(b'<body><div id="root"></div><script src="/main.js"></script></body>')
    assert signal(b"<body><script>render()</script></body>")  # scripts and no link
    assert signal(b'<body><a href="/x">x</a><script>track()</script></body>') is None
    assert signal(b"<body><p>plain</p></body>") is None


def test_a_kind_is_static_after_agreeing_samples_and_needs_a_browser_after_one_that_differs() -> (
    None
):
    client = MemoryClient()
    for _ in range(adaptive.SAMPLES - 1):
        adaptive.learn(client, "c", "k", 0, 60)
    assert adaptive.verdict_of(client, "c", "k") is None  # not enough samples yet
    adaptive.learn(client, "c", "k", 0, 60)
    assert adaptive.verdict_of(client, "c", "k") == adaptive.STATIC
    adaptive.learn(client, "c", "k", 2, 60)  # a check found links the static page lacks
    assert adaptive.verdict_of(client, "c", "k") == adaptive.NEEDS
    adaptive.learn(client, "c", "k", 0, 60)
    assert adaptive.verdict_of(client, "c", "k") == adaptive.NEEDS  # for good

    places = [adaptive.take_sample(client, "c", "j") for _ in range(adaptive.SAMPLES + 1)]
    assert None not in places[:-1] and places[-1] is None  # SAMPLES at once
    adaptive.give_back(client, str(places[0]))
    assert adaptive.take_sample(client, "c", "j") == places[0]

    checks = [adaptive.checked_now(client, "c", "s", 60) for _ in range(2 * adaptive.RECHECK)]
    assert checks.count(True) == 2
