"""Crawl options on real workers and services, checked against the server's request log."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from crawler.options import DEFAULT_USER_AGENT
from tests.site_server import Page, SiteServer, generate_site, page_path
from tests.support import FAST_FAILURES, metric, metrics_port, read_metrics
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, queued_messages, seed

#: Ways of writing a link, for the parser to cope with: ``{href}`` is relative
#: (to the page, or to its ``<base href>``), ``{absolute}`` and ``{odd}`` are absolute,
#: ``{odd}`` with an upper-case scheme and a needless percent-escape.
STYLES = [
    '<a href="{href}">x</a>',
    "<A HREF='{href}'>x</A>",
    '<a class="nav" href="{href}#top" title="t">x</a>',
    '<a\n  data-x="1"\n  href="{absolute}">x</a>',
    '<a href="{odd}">x</a>',
    "<a href={href} >x</a>",
]
QUERY_PAGE = "/p/q.html?a=1&b=2"


@dataclass
class RichSite:
    """A site of ``pages`` HTML pages and a few assets, links written every which way."""

    server: SiteServer
    links: dict[str, list[str]]

    @property
    def seed(self) -> str:
        return self.server.url("/p/0.html")

    def reachable(self, max_depth: int | None = None) -> set[str]:
        """Paths a crawl from the seed reaches, by breadth-first search of ``links``."""
        depth = {"/p/0.html": 0}
        queue = deque(["/p/0.html"])
        while queue:
            page = queue.popleft()
            if max_depth is not None and depth[page] >= max_depth:
                continue
            for target in self.links.get(page, []):
                if target not in depth:
                    depth[target] = depth[page] + 1
                    queue.append(target)
        return set(depth)


def reachable_through(
    site: SiteServer, start: str, allowed: Callable[[str], bool] = lambda path: True
) -> set[str]:
    """Paths reached from ``start`` over the upstream-style links of ``site``'s pages,
    never passing through a path that ``allowed`` refuses."""
    seen, queue = {start}, deque([start])
    while queue:
        page = site.pages.get(queue.popleft())
        for href in re.findall(rb'<a href="([^"]+)">', page.body if page else b""):
            path = href.decode().removeprefix(site.base_url)
            if path not in seen and allowed(path):
                seen.add(path)
                queue.append(path)
    return seen


def build_rich_site(server: SiteServer, pages: int = 40) -> RichSite:
    base = server.base_url
    off_site = base.replace("127.0.0.1", "localhost") + "/off.html"
    links: dict[str, list[str]] = {}
    for i in range(pages):
        page = f"/p/{i}.html"
        links[page] = [f"/p/{(i * 3 + 1) % pages}.html", f"/p/{(i * 7 + 2) % pages}.html"]
        if i % 5 == 0:
            links[page].append(f"/asset/{i}.png")
            server.pages[f"/asset/{i}.png"] = Page(b"\x89PNG", content_type="image/png")
        with_base = i % 6 == 0  # relative links then resolve against /p/sub/
        anchors = [
            STYLES[(i + n) % len(STYLES)].format(
                href=("../" if with_base else "") + target.rsplit("/", 1)[1]
                if target.startswith("/p/")
                else target,
                absolute=base + target,
                odd=base.replace("http://", "HTTP://") + target.replace(".html", "%2Ehtml"),
            )
            for n, target in enumerate(links[page])
        ]
        if i == 2:
            links[page].append(QUERY_PAGE)
            anchors.append('<a href="q.html?a=1&amp;b=2">entity</a>')
        anchors += [f'<a href="{off_site}">off</a>', '<a href="mailto:x@example.invalid">m</a>']
        head = f'<base href="{base}/p/sub/">' if with_base else ""
        html = f"<html><head>{head}</head><body>\n" + "\n".join(anchors) + "\n</body></html>"
        server.pages[page] = Page(html.encode())
    server.pages[QUERY_PAGE] = Page(b"<html><body>leaf</body></html>")
    return RichSite(server, links)


def fetched(site: SiteServer) -> Counter[str]:
    return Counter(r.path for r in site.requests if r.host.startswith("127.0.0.1"))


def crawl_until(
    env: dict[str, str], site: SiteServer, *args: str, done: Callable[[], bool]
) -> WorkerProcesses:
    """Seed with ``args``, let workers crawl until ``done()``, stop them gracefully and
    check that nothing was left in the queues (so nothing more would have been fetched)."""
    workers = WorkerProcesses(env, processes=2, threads=4)
    try:
        result = seed(env, *args)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("crawl ")
        workers.wait_until(done, timeout=60)
    finally:
        assert workers.stop() == 0
    assert queued_messages(env) == 0
    return workers


def test_follow_relative_reaches_exactly_the_reference_set_once_each(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    rich = build_rich_site(site)
    expected = rich.reachable()

    crawl_until(
        env, site, rich.seed, "--follow-relative", "--same-domain",
        done=lambda: set(fetched(site)) >= expected,
    )  # fmt: skip

    assert fetched(site) == dict.fromkeys(expected, 1)
    assert not [r for r in site.requests if r.host.startswith("localhost")]


def test_follow_relative_decodes_a_latin1_page_s_links_by_its_content_type(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    # The same bytes as UTF-8 would be bad UTF-8; read as the header says, they are "é".
    latin1 = "text/html; charset=ISO-8859-1"
    site.pages["/start.html"] = Page(b'<a href="caf\xe9.html?q=\xe9t\xe9">x</a>', latin1)
    browser_sends = "/caf%C3%A9.html?q=%E9t%E9"  # path in UTF-8, query in latin-1
    site.pages[browser_sends] = Page(b"<html><body>leaf</body></html>")

    crawl_until(
        env, site, site.url("/start.html"), "--follow-relative",
        done=lambda: len(site.requests) >= 2,
    )  # fmt: skip

    assert fetched(site) == {"/start.html": 1, browser_sends: 1}


def test_max_depth_2_fetches_exactly_the_pages_within_two_hops(
    site: SiteServer, rabbitmq_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    rich = build_rich_site(site)
    expected = rich.reachable(max_depth=2)
    assert len(expected) < len(rich.reachable())

    crawl_until(
        env, site, rich.seed, "--follow-relative", "--same-domain", "--max-depth", "2",
        done=lambda: set(fetched(site)) >= expected,
    )  # fmt: skip

    assert fetched(site) == dict.fromkeys(expected, 1)


def test_robots_txt_disallowed_pages_are_never_requested(
    site: SiteServer, rabbitmq_env: dict[str, str], dedup_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **dedup_env, **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=60, links_per_page=4))
    private = {page_path(i) for i in range(60) if i % 3 == 2}
    rules = "User-agent: *\n" + "".join(f"Disallow: {path}\n" for path in sorted(private))
    site.pages["/robots.txt"] = Page(rules.encode(), content_type="text/plain")
    allowed = reachable_through(site, page_path(0), lambda path: path not in private)
    assert len(allowed) > 20

    workers = crawl_until(
        env, site, site.url(page_path(0)), "--obey-robots",
        done=lambda: set(fetched(site)) >= allowed,
    )  # fmt: skip

    assert set(fetched(site)) == allowed | {"/robots.txt"}
    assert fetched(site)["/robots.txt"] == 1  # fetched once, shared by every worker
    assert all(n == 1 for n in fetched(site).values())
    assert workers.count("since robots.txt disallows it") >= 1


def test_max_pages_50_fetches_at_most_50(
    site: SiteServer, redis_env: dict[str, str], dedup_env: dict[str, str]
) -> None:
    env = environment(**redis_env, **dedup_env, **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=200, links_per_page=5))

    workers = crawl_until(
        env, site, site.url(page_path(0)), "--max-pages", "50",
        # On Redis the count includes messages in hand: 0 means the crawl is over.
        done=lambda: len(site.requests) >= 50 and queued_messages(env) == 0,
    )  # fmt: skip

    assert len(site.requests) == 50
    assert workers.count("budget is spent") > 0


@pytest.mark.serial  # a request's arrival time is what it checks: no other test's load
def test_max_rate_20_keeps_every_second_under_20_and_loses_nothing(
    site: SiteServer, rabbitmq_env: dict[str, str], dedup_env: dict[str, str], tmp_path: Path
) -> None:
    env = environment(**rabbitmq_env, **dedup_env, **FAST_FAILURES, dramatiq_prom_db=str(tmp_path))
    site.pages.update(generate_site(site.base_url, pages=90, links_per_page=5))
    every_page = {page_path(i) for i in range(90)}
    metrics: list[str] = []

    def done() -> bool:
        if set(fetched(site)) < every_page:
            return False
        metrics.append(read_metrics(metrics_port(env)))  # the workers' counts, while they run
        return True

    workers = crawl_until(env, site, site.url(page_path(0)), "--max-rate", "20", done=done)

    per_second = Counter(math.floor(r.wall_time) for r in site.requests)
    times = sorted(r.wall_time for r in site.requests)
    busiest_sliding_second = max(sum(1 for t in times if start <= t < start + 1) for start in times)
    print(
        f"max-rate 20: busiest calendar second {max(per_second.values())}, "
        f"busiest sliding second {busiest_sliding_second}, "
        f"{len(times)} requests in {times[-1] - times[0]:.1f}s"
    )
    # Turns 50 ms apart, one taken at most 25 ms late (half an interval): any second
    # holds at most 20 + 1 of them, and one more whose request landed a moment late.
    assert busiest_sliding_second <= 20 + 1 + 1
    assert fetched(site) == dict.fromkeys(every_page, 1)
    # Each page's turn was booked when its link was sent, its message delayed to it:
    # it came once, not once to find its turn later and again deferred to it.
    deferred = metric(metrics[0], 'crawler_rate_limit_waits_total{result="deferred"}')
    assert deferred <= 9, f"{deferred:.0f} of 90 pages deferred"
    assert workers.count("Giving up") == 0 and workers.count("Attempt ") == 0


def test_two_crawls_with_different_options_on_the_same_workers_keep_their_own(
    site: SiteServer, rabbitmq_env: dict[str, str], dedup_env: dict[str, str]
) -> None:
    env = environment(**rabbitmq_env, **dedup_env, **FAST_FAILURES)
    rich = build_rich_site(site)
    shallow = rich.reachable(max_depth=1)
    other = SiteServer().start()
    try:
        other.pages.update(generate_site(other.base_url, pages=50, links_per_page=3))
        workers = WorkerProcesses(env, processes=2, threads=4)
        try:
            first = seed(env, rich.seed, "--follow-relative", "--same-domain", "--max-depth", "1")
            second = seed(env, other.url(page_path(0)), "--user-agent", "second-crawl/1.0")
            assert first.returncode == second.returncode == 0
            workers.wait_until(
                lambda: (
                    set(fetched(site)) >= shallow and other.fetched(page_path(i) for i in range(50))
                )
            )
        finally:
            assert workers.stop() == 0
        assert queued_messages(env) == 0
        assert fetched(site) == dict.fromkeys(shallow, 1)
        assert other.fetch_counts() == {page_path(i): 1 for i in range(50)}
        assert {r.user_agent for r in other.requests} == {"second-crawl/1.0"}
        assert {r.user_agent for r in site.requests} == {DEFAULT_USER_AGENT}
    finally:
        other.stop()


def test_local_mode_takes_the_same_options_and_reaches_the_same_pages(
    site: SiteServer,
) -> None:
    rich = build_rich_site(site)
    expected = rich.reachable(max_depth=2)

    result = subprocess.run(
        [sys.executable, "-m", "crawler.example", "--local", rich.seed,
         "--follow-relative", "--same-domain", "--max-depth", "2", "--obey-robots"],
        cwd=PROJECT_ROOT, env=environment(MEMCACHED_SERVERS="127.0.0.1:9"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert fetched(site) == dict.fromkeys(expected | {"/robots.txt"}, 1)
