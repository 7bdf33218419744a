"""What a recrawl saves: the bytes downloaded and the seconds of a recrawl
(``--recrawl-from``) against a full crawl of the same changed site, side by side.

    python benchmarks/recrawl.py                                 # 2000 pages, local and RabbitMQ
    python benchmarks/recrawl.py --pages 500 --changed 0.2 --runs local,redis --repeat 3

The site: ``--pages`` generated HTML pages of ``--links`` links each (the benchmarks'
link graph), each padded with 10-15 KiB of text, served by nginx on 127.0.0.1 with
an access log of each answer's status and bytes.  For each run (``--local`` with 16
threads, or workers, 2 x 8, on a broker): a first full crawl, its records kept
(``-o first.jsonl``); then ``--changed`` of the pages changed (new text, another size,
a later mtime: a new ``ETag`` and ``Last-Modified``), a few new pages linked from
changed ones, and as many pages removed (their links kept: 404s); then a full crawl
of the changed site and a recrawl of it (``--recrawl-from first.jsonl``), taking
turns, the first to go alternating between rounds; the median round is reported.

Seconds are each crawl command's, from its start to its exit (Python's start-up and,
for the recrawl, reading the earlier records included); ``own s`` is the crawl's own
clock (its ``Finished after`` line); ``nginx s`` is the span from the crawl's first
answer to its last, as the access log has them.  Bytes are nginx's
(``$body_bytes_sent``: the bodies; ``$bytes_sent``: with the headers) for the crawl's
answers.  The recrawl must reach the same URLs, with the same answered statuses, as
the full crawl of the same site: else this says so and exits with status 1.

``--limit-rate RATE`` (nginx's size syntax: ``256k``, ``1m``, ``8000``) puts nginx's
``limit_rate RATE;`` in its config, to make downloads cost time as on a slow link.  nginx
limits each answer, not each connection, and lets an answer send at once as many bytes
as RATE x (its whole seconds so far + 1), pausing only after a send: an answer smaller
than RATE (a 304, or a page of 10-15 KiB with ``256k``) goes out unslowed, and the next
on the connection follows at once; a larger one takes about its size / RATE.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    ROOT,
    broker_env,
    flush_services,
    free_port,
    serve,
    start_workers,
    stop,
    write_site,
)
from scripts.services import apt_install

RUNS = ("local", "rabbitmq", "redis")
#: What the padding of a page is drawn from.
VOCABULARY = (
    "crawler broker worker message queue page link record store claim fetch answer "
    "status header body size change recrawl earlier later etag modified since unchanged "
    "site host path seed depth frontier memcached rabbitmq redis nginx server client "
    "request response second byte kilobyte round trip thread process the a of and to in"
)
WORDS = VOCABULARY.split()
#: How big a page's text is, in bytes: drawn anew for each page and each change.
TEXT_SIZES = (10 * 1024, 15 * 1024)
#: An nginx access log line: ``$msec $uri $status $body_bytes_sent $bytes_sent``.
LOG_FORMAT = "$msec $uri $status $body_bytes_sent $bytes_sent"
#: nginx's size syntax, for ``limit_rate``: bytes, or kilobytes and megabytes.
RATE = re.compile(r"[1-9][0-9]*[kKmM]?")
ANCHOR = re.compile(r'<a href="[^"]+">[^<]*</a>\n')


def text(rng: random.Random) -> str:
    """Paragraphs of words, 10-15 KiB of them."""
    size, paragraphs, length = rng.randint(*TEXT_SIZES), [], 0
    while length < size:
        paragraph = "<p>" + " ".join(rng.choices(WORDS, k=80)) + "</p>\n"
        paragraphs.append(paragraph)
        length += len(paragraph)
    return "".join(paragraphs)


def write_page(path: Path, anchors: str, rng: random.Random, later: float | None = None) -> None:
    """``path``: ``anchors``, then text; its mtime ``later`` when given."""
    path.write_text(
        f'<html><body>\n{anchors}<div class="text">\n{text(rng)}</div>\n</body></html>\n'
    )
    if later is not None:  # a new Last-Modified and ETag, within the same second too
        os.utime(path, (later, later))


def build_site(directory: Path, base: str, pages: int, links: int) -> None:
    """The site before its change: ``write_site``'s pages (``page/<i>.html``), padded."""
    shutil.rmtree(directory / "page", ignore_errors=True)
    write_site(directory, base, pages, links)
    rng = random.Random(2)
    for i in range(pages):
        path = directory / "page" / f"{i}.html"
        write_page(path, "".join(ANCHOR.findall(path.read_text())), rng)


def change_site(
    directory: Path, base: str, pages: int, links: int, changed: float
) -> dict[str, int]:
    """Change ``changed`` of the pages (never the first), add as many new pages as
    1% of them (at least 2), each linked from a changed page, and remove as many of
    the others (pages still link to them); how many of each."""
    rng = random.Random(3)
    others = list(range(1, pages))
    rng.shuffle(others)
    count = max(1, round(pages * changed))
    new = max(2, pages // 100)
    altered, removed = others[:count], others[count : count + new]
    later = time.time() + 10
    for j in range(new):
        targets = [rng.randrange(pages) for _ in range(links)]
        anchors = "".join(f'<a href="{base}/page/{t}.html">p{t}</a>\n' for t in targets)
        write_page(directory / "page" / f"new-{j}.html", anchors, rng, later)
    for k, i in enumerate(altered):
        path = directory / "page" / f"{i}.html"
        anchors = "".join(ANCHOR.findall(path.read_text()))
        for j in range(k, new, len(altered)):  # each new page, from one changed page
            anchors += f'<a href="{base}/page/new-{j}.html">new {j}</a>\n'
        write_page(path, anchors, rng, later)
    for i in removed:
        (directory / "page" / f"{i}.html").unlink()
    return {"changed": len(altered), "added": new, "removed": len(removed)}


@contextmanager
def nginx_with_bytes(
    directory: Path, port: int, access_log: Path, state: Path, limit_rate: str | None = None
) -> Iterator[None]:
    """nginx serving ``directory`` on 127.0.0.1:``port`` (``serve``'s), with an access log
    of each answer's time, path, status, body bytes and bytes sent; each answer sent at
    ``limit_rate`` (nginx's ``limit_rate``) when given."""
    if shutil.which("nginx") is None:
        apt_install("nginx")
    if shutil.which("nginx") is None:
        raise SystemExit("nginx is not installed: apt-get install nginx (its 304s are measured)")
    with serve(directory, port, access_log, state, log_format=LOG_FORMAT, limit_rate=limit_rate):
        yield


def answers_since(access_log: Path, offset: int) -> tuple[dict[str, Any], int]:
    """What nginx answered after ``offset`` bytes of its access log: statuses, bytes and
    the span from the first answer to the last; and the log's new end."""
    with access_log.open() as log:
        log.seek(offset)
        lines = log.read().splitlines()
        end = log.tell()
    statuses: Counter[str] = Counter()
    body = sent = 0
    times = []
    for line in lines:
        msec, _, status, body_bytes, bytes_sent = line.split()
        times.append(float(msec))
        statuses[status] += 1
        body, sent = body + int(body_bytes), sent + int(bytes_sent)
    return {
        "requests": len(lines),
        "statuses": dict(statuses),
        "body_bytes": body,
        "bytes_sent": sent,
        "nginx_seconds": max(times) - min(times) if times else 0.0,
    }, end


def records_of(path: Path) -> dict[str, dict[str, Any]]:
    return {r["url"]: r for r in map(json.loads, path.read_text().splitlines())}


def reached(records: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each URL and what became of it, as far as a full crawl and a recrawl agree:
    fetched (downloaded, or unchanged) or answered with its status."""
    return {
        url: f"answered {r['status']}" if r["outcome"] == "answered" else "fetched"
        for url, r in records.items()
    }


class Crawls:
    """The crawls of one run: ``--local``, or workers on a broker (started once)."""

    def __init__(self, run: str, tmp: Path, access_log: Path) -> None:
        self.run, self.tmp, self.access_log = run, tmp, access_log
        self.workers: subprocess.Popen[bytes] | None = None
        if run == "local":
            self.env = dict(os.environ, MEMCACHED_SERVERS="127.0.0.1:9")  # not the user's
        else:
            self.env = broker_env(run, dramatiq_prom_db=str(tmp / f"prom-{run}"))
            Path(self.env["dramatiq_prom_db"]).mkdir()
            flush_services(self.env)
            self.workers = start_workers(
                self.env, "crawler.example", processes=DEFAULT_PROCESSES, threads=DEFAULT_THREADS
            )

    def crawl(self, seed: str, output: Path, *options: str) -> dict[str, Any]:
        """One crawl from ``seed``, its records to ``output``: its figures."""
        mode = ["--local", "--threads", str(DEFAULT_PROCESSES * DEFAULT_THREADS)]
        if self.workers is not None:
            mode = ["--workers", "--wait"]
        offset = self.access_log.stat().st_size
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "crawler.command", "crawl", *mode, seed, "-o", str(output),
             *options],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        elapsed = time.monotonic() - started
        # 1: some page failed (the page sets then differ, and this says so).
        assert done.returncode in (0, 1), done.stdout + done.stderr
        time.sleep(0.2)  # nginx's last lines
        answers, _ = answers_since(self.access_log, offset)
        records = records_of(output)
        outcomes = Counter(r["outcome"] for r in records.values())
        summary = re.search(r"^Finished after ([\d.]+)s: .*$", done.stdout, re.MULTILINE)
        assert summary, done.stdout + done.stderr
        return dict(
            answers, pages=len(records), seconds=elapsed, own_seconds=float(summary.group(1)),
            exit_status=done.returncode, outcomes=dict(outcomes), summary=summary.group(0),
        )  # fmt: skip

    def close(self) -> None:
        if self.workers is not None:
            stop(self.workers)


def one_run(
    run: str, site: Path, base: str, tmp: Path, access_log: Path, arguments: argparse.Namespace
) -> dict[str, Any]:
    """The first crawl, the change, and ``--repeat`` rounds of a full crawl and a recrawl."""
    build_site(site, base, arguments.pages, arguments.links)
    seed = f"{base}/page/0.html"
    crawls = Crawls(run, tmp, access_log)
    rounds: dict[str, list[dict[str, Any]]] = {"full": [], "recrawl": []}
    same = []
    try:
        first = tmp / f"{run}-first.jsonl"
        first_figures = crawls.crawl(seed, first)
        change = change_site(site, base, arguments.pages, arguments.links, arguments.changed)
        for round_ in range(arguments.repeat):
            order = ("full", "recrawl") if round_ % 2 == 0 else ("recrawl", "full")
            outputs = {kind: tmp / f"{run}-{kind}-{round_}.jsonl" for kind in order}
            for kind in order:
                options = ("--recrawl-from", str(first)) if kind == "recrawl" else ()
                rounds[kind].append(crawls.crawl(seed, outputs[kind], *options))
            same.append(
                reached(records_of(outputs["full"])) == reached(records_of(outputs["recrawl"]))
            )
    finally:
        crawls.close()
    result: dict[str, Any] = {"first": first_figures, "change": change}
    for kind, outcomes in rounds.items():
        times = [outcome["seconds"] for outcome in outcomes]
        result[kind] = dict(outcomes[times.index(statistics.median_low(times))], rounds=outcomes)
    full, recrawl = result["full"], result["recrawl"]
    result["ratios"] = {
        name: recrawl[name] / full[name] if full[name] else None
        for name in ("body_bytes", "bytes_sent", "seconds", "own_seconds", "nginx_seconds")
    }
    result["same_page_set"] = all(same)
    result["limit_rate"] = arguments.limit_rate
    return result


def ratio(value: float | None, width: int) -> str:
    return f"{'-' if value is None else f'{value:.3f}':>{width}}"


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{'run':9} {'crawl':13} {'pages':>6} {'seconds':>8} {'own s':>6} {'nginx s':>8}"
        f" {'MB bodies':>10}"
        f" {'MB sent':>8} {'200s':>6} {'304s':>6} {'404s':>5}"
    ]
    for run, figures in results.items():
        for kind in ("first", "full", "recrawl"):
            crawl = figures[kind]
            statuses = crawl["statuses"]
            lines.append(
                f"{run:9} {kind:13} {crawl['pages']:6} {crawl['seconds']:8.2f}"
                f" {crawl['own_seconds']:6.1f} {crawl['nginx_seconds']:8.2f}"
                f" {crawl['body_bytes'] / 1e6:10.2f}"
                f" {crawl['bytes_sent'] / 1e6:8.2f} {statuses.get('200', 0):6}"
                f" {statuses.get('304', 0):6} {statuses.get('404', 0):5}"
            )
        ratios = figures["ratios"]
        seconds, own, nginx_seconds, bodies, sent = (
            ratio(ratios[name], width)
            for name, width in (
                ("seconds", 8), ("own_seconds", 6), ("nginx_seconds", 8), ("body_bytes", 10),
                ("bytes_sent", 8),
            )
        )  # fmt: skip
        lines.append(
            f"{run:9} {'recrawl/full':13} {'':6} {seconds} {own} {nginx_seconds} {bodies} {sent}"
        )
    same = all(figures["same_page_set"] for figures in results.values())
    lines.append(f"same page set as the full crawl: {'yes' if same else 'no'}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--links", type=int, default=10, help="links on each page")
    parser.add_argument("--changed", type=float, default=0.1, help="the share of pages changed")
    parser.add_argument("--runs", default="local,rabbitmq", help=f"of {','.join(RUNS)}")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--limit-rate",
        metavar="RATE",
        help="nginx's limit_rate for each answer, e.g. 256k (default: none, loopback speed)",
    )
    arguments = parser.parse_args()
    if arguments.limit_rate is not None and not RATE.fullmatch(arguments.limit_rate):
        parser.error("--limit-rate: a size as nginx writes it, e.g. 256k, 1m or 8000")
    runs = arguments.runs.split(",")
    if not set(runs) <= set(RUNS) or not runs:
        parser.error(f"--runs: a comma-separated list of {', '.join(RUNS)}")
    work = Path(tempfile.mkdtemp(prefix="crawler-recrawl-bench-"))
    try:
        work.chmod(0o755)  # nginx's workers (nobody) read the site
        site, access_log = work / "site", work / "access.log"
        site.mkdir()
        access_log.touch()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        results = {}
        with nginx_with_bytes(site, port, access_log, work, arguments.limit_rate):
            for run in runs:
                results[run] = one_run(run, site, base, work, access_log, arguments)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    change = next(iter(results.values()))["change"]
    print(
        f"site: {arguments.pages} pages of 10-15 KiB, {arguments.links} links each; then"
        f" {change['changed']} changed, {change['added']} added, {change['removed']} removed;"
        f" median of {arguments.repeat} round(s);"
        f" nginx limit_rate: {arguments.limit_rate or 'none'}"
    )
    print(table(results))
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=2))
    return 0 if all(figures["same_page_set"] for figures in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
