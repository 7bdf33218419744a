"""Scope and politeness options on real workers: sitemaps, URL patterns, same site,
per-host budgets and concurrency, breadth first; each checked against the test
server's own log, and against what ``--local`` does with the same options."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.site_server import (
    Page,
    SiteServer,
    depth_site,
    generate_site,
    html,
    overtaken,
    page_path,
)
from tests.support import (
    FAST_FAILURES,
    metric,
    metrics_port,
    read_metrics,
    read_records,
    wait_for_crawl,
    waited_crawl,
)
from tests.workers import PROJECT_ROOT, WorkerProcesses, environment, seed

#: Host names the tests crawl, all served on 127.0.0.1 (``tests/hosts/sitecustomize.py``),
#: by the prefix of each path: ``/www/...`` is www.example.co.uk's.
HOSTS = {
    "www": "www.example.co.uk",
    "blog": "blog.example.co.uk",
    "a": "a.github.io",
    "b": "b.github.io",
    "other": "other.test",
}


def with_hosts(env: dict[str, str]) -> dict[str, str]:
    """``env``, with the names of ``HOSTS`` resolving to 127.0.0.1."""
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "hosts"), str(PROJECT_ROOT)]),
        "TEST_HOSTS": ",".join(HOSTS.values()),
    }


@pytest.fixture
def workers(rabbitmq_env: dict[str, str]) -> Iterator[tuple[dict[str, str], WorkerProcesses]]:
    """RabbitMQ workers that resolve the test's host names, stopped cleanly after."""
    env = with_hosts(environment(**rabbitmq_env, **FAST_FAILURES))
    processes = WorkerProcesses(env, processes=1, threads=4)
    yield env, processes
    assert processes.stop() == 0


#: Where a test's crawls run: seeded for the ``workers`` fixture's, or ``--local``.
RUNS = ("workers", "local")


def crawl_to(run: str, env: dict[str, str], output: Path, *args: str) -> str:
    """A crawl with ``args`` writing ``output``, seeded with ``--wait`` for the running
    workers or with ``--local``; it must end with exit 0.  Returns what it printed."""
    if run == "workers":
        waiting = wait_for_crawl(env, *args, "--output", str(output))
        stdout, stderr = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, stdout + stderr
        return stdout
    done = seed(env, "--local", *args, "--output", str(output))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def fetched_urls(output: Path) -> set[str]:
    return {r["url"] for r in read_records(output) if r["outcome"] in ("crawled", "not-html")}


# --- include, exclude, same site -------------------------------------------------------


def multi_host_site(server: SiteServer) -> dict[str, list[str]]:
    """Five pages on each host of ``HOSTS``, in a chain; each host's first page links
    to every other host's, its second to a printable copy of itself (``?print=1``).
    Returns each URL's links (the site's graph, for the reference sets)."""
    port = urlsplit(server.base_url).port

    def url(prefix: str, path: str) -> str:
        return f"http://{HOSTS[prefix]}:{port}/{prefix}/{path}"

    graph: dict[str, list[str]] = {}
    for prefix in HOSTS:
        for i in range(5):
            links = [url(prefix, f"{i + 1}.html")] if i < 4 else []
            if i == 0:
                links += [url(other, "0.html") for other in HOSTS if other != prefix]
            if i == 1:
                links.append(url(prefix, "1.html?print=1"))
                server.pages[f"/{prefix}/1.html?print=1"] = html()
                graph[url(prefix, "1.html?print=1")] = []
            server.pages[f"/{prefix}/{i}.html"] = html(*links)
            graph[url(prefix, f"{i}.html")] = links
    return graph


def reachable(graph: dict[str, list[str]], seed: str, allowed: Callable[[str], bool]) -> set[str]:
    """The seed and every URL reached from it through links ``allowed`` says yes to."""
    seen, queue = {seed}, deque([seed])
    while queue:
        for link in graph[queue.popleft()]:
            if link not in seen and allowed(link):
                seen.add(link)
                queue.append(link)
    return seen


def host(url: str) -> str:
    return urlsplit(url).hostname or ""


def www_seed(graph: dict[str, list[str]]) -> str:
    """The first page of the www host of :func:`multi_host_site`'s graph."""
    return next(url for url in graph if host(url) == HOSTS["www"] and url.endswith("/0.html"))


def test_patterns_and_same_site_follow_exactly_the_reference_sets(
    site: SiteServer,
    workers: tuple[dict[str, str], WorkerProcesses],
    tmp_path: Path,
) -> None:
    env, _ = workers
    graph = multi_host_site(site)
    www = www_seed(graph)
    github_a = www.replace("www.example.co.uk", "a.github.io").replace("/www/", "/a/")
    cases = {
        # the seed's registrable domain, example.co.uk: its two hosts
        "same-site": (
            [www, "--same-site"],
            lambda url: host(url) in ("www.example.co.uk", "blog.example.co.uk"),
        ),
        # github.io is a public suffix: a.github.io is a site of its own
        "same-site-github": ([github_a, "--same-site"], lambda url: host(url) == "a.github.io"),
        "patterns": (
            [www, "--include", "/(www|blog|a)/", "--exclude", r"print=1$"],
            lambda url: re.search("/(www|blog|a)/", url) is not None and "print=1" not in url,
        ),
        "both": (
            [www, "--same-site", "--exclude", "/blog/[34]"],
            lambda url: (
                host(url).endswith(".example.co.uk")
                and "/blog/3" not in url
                and "/blog/4" not in url
            ),
        ),
    }
    for name, (args, allowed) in cases.items():
        expected = reachable(graph, args[0], allowed)
        assert 1 < len(expected) < len(graph), name  # each case leaves some pages out
        for run in RUNS:
            output = tmp_path / f"{name}-{run}.jsonl"
            crawl_to(run, env, output, *args)
            assert fetched_urls(output) == expected, (name, run)


def test_max_pages_per_host_fetches_that_many_of_each_host(
    site: SiteServer,
    workers: tuple[dict[str, str], WorkerProcesses],
    tmp_path: Path,
) -> None:
    env, _ = workers
    graph = multi_host_site(site)
    www = www_seed(graph)
    args = [www, "--max-pages-per-host", "3", "--same-site"]
    for run in RUNS:
        output = tmp_path / f"{run}.jsonl"
        stdout = crawl_to(run, env, output, *args)
        per_host = Counter(host(url) for url in fetched_urls(output))
        # Both hosts of the site have more than 3 pages within reach of any 3 fetched.
        assert per_host == {"www.example.co.uk": 3, "blog.example.co.uk": 3}, run
        assert "over the page budget" in stdout


# --- sitemaps -----------------------------------------------------------------------------


def urlset(*urls: str) -> bytes:
    """An XML sitemap listing ``urls``."""
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    ).encode()


def sitemap_index(*urls: str) -> bytes:
    """A sitemap index naming the sitemaps ``urls``."""
    entries = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex'
        f' xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>'
    ).encode()


def sitemap_site(server: SiteServer) -> set[str]:
    """robots.txt -> a sitemap index -> an XML sitemap, a gzip one and a text one, and
    one on another site; pages no page links to.  Returns the orphan pages' paths."""
    base = server.base_url
    other = base.replace("127.0.0.1", HOSTS["other"])
    orphans = {f"/orphan/{i}.html" for i in range(12)}
    for path in orphans:
        server.pages[path] = html()
    server.pages["/"] = html(f"{base}/sitemaps/index.xml")  # a page linking a sitemap
    server.pages["/robots.txt"] = Page(
        f"User-agent: *\nAllow: /\nSitemap: {base}/sitemaps/index.xml\n".encode(),
        content_type="text/plain",
    )
    index = sitemap_index(
        f"{base}/sitemaps/one.xml",
        f"{base}/sitemaps/two.xml.gz",
        f"{base}/sitemaps/three.txt",
        f"{other}/other/sitemap.xml",  # another site's: not followed
    )
    server.pages["/sitemaps/index.xml"] = Page(index, content_type="application/xml")
    server.pages["/sitemaps/one.xml"] = Page(
        urlset(*(f"{base}/orphan/{i}.html" for i in range(5)), f"{other}/other/page.html"),
        content_type="application/xml",
    )
    server.pages["/sitemaps/two.xml.gz"] = Page(
        gzip.compress(urlset(*(f"{base}/orphan/{i}.html" for i in range(5, 10)))),
        content_type="application/x-gzip",
    )
    server.pages["/sitemaps/three.txt"] = Page(
        "".join(f"{base}/orphan/{i}.html\n" for i in range(10, 12)).encode(),
        content_type="text/plain",
    )
    server.pages["/other/sitemap.xml"] = Page(urlset(f"{other}/other/page.html"))
    server.pages["/other/page.html"] = html()
    return orphans


SITEMAPS = {"/robots.txt", "/sitemaps/index.xml", "/sitemaps/one.xml"}
SITEMAPS |= {"/sitemaps/two.xml.gz", "/sitemaps/three.txt"}


def test_sitemaps_seed_every_listed_page_once_and_stay_on_the_site(
    site: SiteServer,
    workers: tuple[dict[str, str], WorkerProcesses],
    tmp_path: Path,
) -> None:
    env, _ = workers
    orphans = sitemap_site(site)
    for run in RUNS:
        site.requests.clear()
        output = tmp_path / f"{run}.jsonl"
        stdout = crawl_to(run, env, output, site.url("/"), "--sitemaps")
        counts = site.fetch_counts()
        # The index is fetched twice: as the seed's link (not HTML), and as a sitemap.
        expected = Counter({"/": 1, **dict.fromkeys(orphans | SITEMAPS, 1)})
        assert counts == expected + Counter({"/sitemaps/index.xml": 1}), run
        assert not any(path.startswith("/other/") for path in counts), run
        records = read_records(output)
        assert {r["url"].removeprefix(site.base_url) for r in records} == {"/"} | orphans | SITEMAPS
        assert "5 sitemaps read" in stdout, stdout
        assert ", 0 failed" in stdout


def test_a_long_sitemap_is_sent_on_in_parts_and_nested_indexes_stop(tmp_path: Path) -> None:
    server = SiteServer().start()
    try:
        base = server.base_url
        server.pages["/"] = html()

        def index(*urls: str) -> Page:
            return Page(sitemap_index(*urls))

        # robots.txt and its /sitemap.xml (1) -> index (2) -> index (3) -> index (4)
        # -> a sitemap: not read
        server.pages["/sitemap.xml"] = index(f"{base}/i2.xml", f"{base}/long.txt")
        server.pages["/i2.xml"] = index(f"{base}/i3.xml")
        server.pages["/i3.xml"] = index(f"{base}/i4.xml")
        server.pages["/i4.xml"] = index(f"{base}/too-deep.txt")
        server.pages["/too-deep.txt"] = Page(f"{base}/never.html\n".encode())
        server.pages["/long.txt"] = Page("".join(f"{base}/p/{i}\n" for i in range(35)).encode())
        for i in range(35):
            server.pages[f"/p/{i}"] = html()
        done = seed(
            environment(CRAWLER_MAX_LINKS_PER_PAGE="10"),
            "--local",
            server.url("/"),
            "--sitemaps",
            "--output",
            str(tmp_path / "out.jsonl"),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        counts = server.fetch_counts()
        assert all(counts[f"/p/{i}"] == 1 for i in range(35)), counts
        assert "/too-deep.txt" not in counts and "/never.html" not in counts
        assert "nested too deep" in done.stderr
        parts = {r["url"] for r in read_records(tmp_path / "out.jsonl") if "#part-" in r["url"]}
        assert parts == {f"{base}/long.txt#part-{n}" for n in (1, 2, 3)}  # 10 + 3 x 10 (5)
    finally:
        server.stop()


def test_without_robots_sitemap_lines_the_well_known_sitemap_is_read_and_none_is_no_error(
    tmp_path: Path,
) -> None:
    with_sitemap, bare = SiteServer().start(), SiteServer().start()
    try:
        with_sitemap.pages["/"] = bare.pages["/"] = html()
        with_sitemap.pages["/sitemap.xml"] = Page(urlset(with_sitemap.url("/p.html")))
        with_sitemap.pages["/p.html"] = html()
        seeds = (with_sitemap.url("/"), bare.url("/"))
        done = seed(environment(), "--local", *seeds, "--sitemaps", "-v")
        assert done.returncode == 0, done.stdout + done.stderr
        assert with_sitemap.fetch_counts() == Counter(
            {"/": 1, "/robots.txt": 1, "/sitemap.xml": 1, "/p.html": 1}
        )
        assert bare.fetch_counts() == Counter({"/": 1, "/robots.txt": 1, "/sitemap.xml": 1})
        assert ", 0 failed" in done.stdout
    finally:
        with_sitemap.stop()
        bare.stop()


# --- per-host concurrency -----------------------------------------------------------------


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_max_per_host_2_keeps_two_requests_in_flight_at_most_and_loses_nothing(
    request: pytest.FixtureRequest, broker: str, site: SiteServer
) -> None:
    env = environment(**request.getfixturevalue(f"{broker}_env"), **FAST_FAILURES)
    site.pages.update(generate_site(site.base_url, pages=30, links_per_page=3))
    site.delay = 0.2
    workers = WorkerProcesses(env, processes=2, threads=8)
    try:
        peaks = {}
        for args in ([], ["--max-per-host", "2"]):
            site.requests.clear()
            site.peak_in_flight = 0
            waiting = wait_for_crawl(env, site.url(page_path(0)), *args)
            stdout, stderr = waiting.communicate(timeout=90)
            assert waiting.returncode == 0, stdout + stderr
            assert site.fetch_counts() == Counter({page_path(i): 1 for i in range(30)})
            peaks[" ".join(args) or "none"] = site.peak_in_flight
    finally:
        assert workers.stop() == 0
    if broker == "rabbitmq":  # and --local, its 8 threads sharing the process's store
        site.requests.clear()
        site.peak_in_flight = 0
        done = seed(env, "--local", site.url(page_path(0)), "--max-per-host", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        assert site.fetch_counts() == Counter({page_path(i): 1 for i in range(30)})
        peaks["--local --max-per-host 2"] = site.peak_in_flight
        assert site.peak_in_flight == 2
    print(f"{broker}: requests in flight at once, at most: {peaks}")
    assert peaks["--max-per-host 2"] == 2
    assert peaks["none"] > 2  # without the option the same crawl goes wider


# --- breadth first ------------------------------------------------------------------------

#: Slow pages' first answers outlast the fetch deadline; their retries come back soon.
STALLING = {"CRAWLER_FETCH_DEADLINE": "0.3", "CRAWLER_MIN_BACKOFF_MS": "200"}


@pytest.mark.serial  # how far retries fall behind deeper pages: no other test's load
@pytest.mark.parametrize("where", ["rabbitmq", "local"])
def test_breadth_first_fetches_slow_shallow_pages_before_most_deeper_ones(
    request: pytest.FixtureRequest, where: str, memcached: object
) -> None:
    env = environment(**STALLING)
    if where == "rabbitmq":
        env.update(request.getfixturevalue("rabbitmq_env"))
    figures = {}
    for args in ([], ["--breadth-first"]):
        server = SiteServer().start()
        try:
            depth = depth_site(server, wide=10)
            if where == "local":
                done = seed(env, "--local", depth.seed, "--threads", "2", *args)
                assert done.returncode == 0, done.stdout + done.stderr
            else:
                waiting, stdout, stderr, _ = waited_crawl(
                    env, depth.seed, *args, processes=1, threads=2, timeout=90
                )
                assert waiting.returncode == 0, stdout + stderr
            figures[" ".join(args) or "arrival order"] = overtaken(server.requests)
        finally:
            server.stop()
    print(f"{where}: of {depth.depth_3} depth-3 pages, fetched before the last depth-1 page:")
    print(f"  {figures}")
    # In arrival order the retries wait behind every deeper page queued meanwhile (most
    # of them: fewer on a slow machine, whose retries come back before the deeper pages
    # are all queued: 195 and 230 of 300 on one at half its speed; the site has 150
    # since, as 10 depth-2 pages link 15 each: all 150 on both, here, at full speed).
    assert figures["arrival order"] >= depth.depth_3 * 0.5
    # Breadth first, deeper pages go only while the retries wait out their backoff
    # (the slow pages fail one after the other, over about a second here) and past
    # what a worker holds already: Dramatiq's prefetch (2 a thread), fetches in flight.
    assert figures["--breadth-first"] < figures["arrival order"] / 3


def test_a_queue_declared_before_without_priorities_is_used_as_it_is_with_a_warning(
    rabbitmq_env: dict[str, str], site: SiteServer
) -> None:
    """As a RabbitMQ that an older crawler used: its queues have no ``x-max-priority``."""
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    from crawler.brokers import QUEUE

    plain = RabbitmqBroker(url=rabbitmq_env["RABBITMQ_URL"])
    plain.declare_queue(QUEUE, ensure=True)
    plain.close()
    site.pages.update(generate_site(site.base_url, pages=20, links_per_page=3))
    env = environment(**rabbitmq_env, **FAST_FAILURES)
    waiting, stdout, stderr, workers = waited_crawl(env, site.url(page_path(0)), "--breadth-first")
    assert waiting.returncode == 0, stdout + stderr
    assert site.fetch_counts() == Counter({page_path(i): 1 for i in range(20)})
    warning = f"RabbitMQ queue {QUEUE!r} was declared without priorities (x-max-priority)"
    assert warning in stderr  # the seeder's
    assert workers.logged_any(warning)


# --- the parts, without services ----------------------------------------------------------


def test_sitemap_formats_are_read_and_a_gzip_bomb_is_refused() -> None:
    from crawler.errors import PermanentError
    from crawler.links.sitemap_links import sitemap_links

    atom = (
        b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
        b'<entry><title>e</title><link href="http://a.test/atom"/></entry></feed>'
    )
    rss = (
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
        b"<item><title>i</title><link>http://a.test/rss</link></item></channel></rss>"
    )
    text = b"\xef\xbb\xbfhttp://a.test/one\n\nnot a url\nhttp://a.test/two\n"
    two_members = gzip.compress(b"http://a.test/x\n") + gzip.compress(b"http://a.test/y\n")
    assert sitemap_links(atom, "http://a.test/feed", 10**6) == (["http://a.test/atom"], [])
    assert sitemap_links(rss, "http://a.test/rss.xml", 10**6) == (["http://a.test/rss"], [])
    assert sitemap_links(text, "http://a.test/s.txt", 10**6) == (
        ["http://a.test/one", "http://a.test/two"],
        [],
    )
    assert sitemap_links(two_members, "http://a.test/s.gz", 10**6)[0] == [
        "http://a.test/x",
        "http://a.test/y",
    ]
    with pytest.raises(PermanentError, match="over 100000 bytes once decompressed"):
        sitemap_links(gzip.compress(b"\n" * 10**7), "http://a.test/bomb.gz", 10**5)
    assert sitemap_links(b"<?xml version='1.0'?><urlset><url><loc>", "http://a.test/", 10) == (
        [],
        [],
    )


def test_sites_are_registrable_domains_from_the_bundled_list() -> None:
    from crawler.links.sites import site_of

    assert site_of("blog.example.co.uk") == site_of("www.example.co.uk") == "example.co.uk"
    assert site_of("a.github.io") == "a.github.io" != site_of("b.github.io")
    assert site_of("WWW.Python.ORG.") == "python.org"
    assert site_of("127.0.0.1") == "127.0.0.1"
    assert site_of("localhost") == "localhost"


def test_the_new_options_travel_in_messages_and_bad_ones_are_refused_on_the_command_line() -> None:
    from crawler.options import CrawlOptions

    options = CrawlOptions(
        crawl_id="c",
        include=("/docs/",),
        exclude=("print",),
        allowed_sites=("example.co.uk",),
        max_per_host=2,
        max_pages_per_host=5,
        sitemaps=True,
        breadth_first=True,
    )
    message = options.to_message()
    assert message is not None and message["include"] == ["/docs/"]
    assert CrawlOptions.from_message(message) == options
    assert options.allows_url("http://blog.example.co.uk/docs/a")
    assert not options.allows_url("http://blog.example.co.uk/docs/a?print=1")
    assert not options.allows_url("http://blog.example.co.uk/blog/")
    assert not options.allows_url("http://example.com/docs/")
    for bad, said in (
        (["--include", "(unclosed"], "is not a regular expression"),
        (["--max-per-host", "0"], "is not a whole number from 1 to 1000"),
        (["--max-pages-per-host", "x"], "is not a whole number above zero"),
    ):
        done = seed(environment(), "--local", "http://127.0.0.1:9/", *bad)
        assert done.returncode == 2 and said in done.stderr, done.stderr


@pytest.mark.serial  # a turn 50 ms late is deferred, and arrival times are checked
@pytest.mark.parametrize("where", ["local", "rabbitmq_env", "redis_env"])
def test_pages_of_a_host_asking_for_a_crawl_delay_come_once_each_at_its_pace(
    where: str, site: SiteServer, request: pytest.FixtureRequest, tmp_path: Path, memcached: object
) -> None:
    """Each page's turn is booked when its link is sent (robots.txt's Crawl-delay, no
    --max-rate) and its message waits for it in the broker: it comes once, not once to
    find its turn later and again deferred to it."""
    site.pages["/robots.txt"] = Page(
        b"User-agent: *\nCrawl-delay: 0.1\nDisallow:\n", content_type="text/plain"
    )
    site.pages.update(generate_site(site.base_url, pages=30, links_per_page=5))
    stats = tmp_path / "stats.json"
    args = ["crawl", site.url(page_path(0)), "--stats", str(stats)]
    if where == "local":
        done = subprocess.run(
            [str(Path(sys.executable).parent / "crawler"), *args, "--local"],
            cwd=PROJECT_ROOT, env=environment(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    else:
        prometheus = tmp_path / "prometheus"
        prometheus.mkdir()
        env = environment(
            **request.getfixturevalue(where), **FAST_FAILURES, dramatiq_prom_db=str(prometheus)
        )
        workers = WorkerProcesses(env, processes=1, threads=4)
        try:
            done = subprocess.run(
                [str(Path(sys.executable).parent / "crawler"), *args, "--workers", "--wait"],
                cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            metrics = read_metrics(metrics_port(env))  # the workers' counts, while they run
        finally:
            assert workers.stop() == 0
    assert done.returncode == 0, done.stderr[-2000:]

    figures = json.loads(stats.read_text())
    assert figures["pages"] == 30
    deferred = figures["deferred"]
    if where != "local":  # the workers' own count of them, as the statistics read it
        assert metric(metrics, 'crawler_rate_limit_waits_total{result="deferred"}') == deferred
    assert deferred <= 3, figures  # of 30 pages: each came once
    times = sorted(r.wall_time for r in site.requests if r.path != "/robots.txt")
    # The Crawl-delay held as docs/usage.md promises a host's pace: a turn is taken at
    # most half an interval late, so any one second holds at most 10 + 1 requests.
    busiest = max(sum(1 for t in times if start <= t < start + 1) for start in times)
    assert busiest <= 10 + 1, times
