"""One benchmark run, side by side: this crawler on RabbitMQ and on Redis, ``--local``,
Scrapy, and a no-op Dramatiq actor as the ceiling, all on the same local site.

    python benchmarks/run.py --pages 2000 --links 10 --repeat 3   # the full run
    python benchmarks/run.py --pages 100 --links 5 --quick --repeat 2  # the smoke run CI does
    python benchmarks/run.py --site python-docs --repeat 3         # a real site, heavy pages
    python benchmarks/run.py --site postgresql-docs --repeat 3     # a real site, light pages

``--site python-docs`` crawls the Python 3 documentation of Debian's ``python3-doc``,
``--site postgresql-docs`` the PostgreSQL 15 documentation of ``postgresql-doc-15``
(each installed with apt-get when missing, if it can be; else it says so and exits 0
having measured nothing) with ``--follow-relative --same-domain`` on both brokers and
``--local``, next to Scrapy's ``CrawlSpider`` with the same scope and concurrency, and
``wget -r -l inf`` as the reference for the page set.  nginx's access log says which
HTML pages each contender fetched: every one must have fetched wget's.

Prints one table with ratios and writes the figures as JSON (``--json``,
``benchmark.json`` by default).

**Whole builds side by side** (``--against REV``): this tree against other revisions of
it, such as the upstream example it began as (the first commit), on the generated site.

    python benchmarks/run.py --against 7e633be --pages 300 --repeat 1    # a quick look
    python benchmarks/run.py --against 7e633be --against ee880a4 --pages 2000 --links 10 \\
        --repeat 2 --brokers rabbitmq,redis --processes 2 --threads 8 --json versus.json

"this" is the working tree with this Python; each ``--against REV`` is that revision,
checked out with ``git worktree add --detach`` into a temporary directory (removed at
the end) and run by a virtualenv with that revision's ``requirements.txt`` installed
(made once, kept in ``~/.cache/crawler-benchmarks/venv-<its sha256, 12 digits>``).
Each build runs its own code: ``<venv>/bin/dramatiq crawler.example -p P -t T`` and
``<venv>/bin/python -m crawler.example SEED`` in the build's tree, which Python
puts first on ``sys.path`` (checked once: where ``crawler`` is imported from).

What is measured, for each build on each broker of ``--brokers``, in ``--repeat``
rounds that take turns (round 1: every build on every broker, then round 2 the
same...) so that a slow spell of a shared machine hits all alike:

- seconds, from the seed command's start to the last request nginx logged (``$msec``),
  once every page was served with status 200 and then nothing more for a second (so
  that a build's redundant fetches count too); the seeder is never asked to wait, as
  the upstream example has no ``--wait``;
- pages/s, distinct pages over those seconds;
- CPU ms per page: the worker processes, their Dramatiq parent, the broker's and
  Memcached's processes and the seeder, up to that quiet second, per distinct page;
- fetches per page: requests answered 200 over distinct pages (1.00: no page twice).

Each run starts on emptied services (the benchmark's own Memcached, Redis and RabbitMQ
virtual host, never the user's) and an emptied access log. A build that fails (its
workers die, the seeder fails, the pages are not all served within ``--timeout``) is
reported as failed with the last lines of its output, and the others go on.

Prints one table with each build's median seconds over this tree's (``/this``), and the
upstream example's over the build's (``x upstream``) when it is one of them; writes the
figures as JSON (``--json``, ``benchmark-versus.json`` by default).

Every address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pika

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    BIN,
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    ROOT,
    CrawlCpu,
    broker_env,
    crawl_locally,
    crawl_with_defaults,
    crawl_with_scrapy,
    crawl_with_wget,
    crawl_with_workers,
    flush_services,
    free_port,
    noop_ceiling,
    serve,
    served,
    start_workers,
    stop,
    write_site,
)
from benchmarks.measuring.generated_site import access_entry
from benchmarks.measuring.real_sites import SITES

BROKERS = ("rabbitmq", "redis")


def main() -> int:
    """Parse the options, measure, write the figures to ``--json`` and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--noop-messages", type=int, default=20000)
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES, help="worker processes")
    parser.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help="per worker process; Scrapy and --local get processes x threads",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="skip Scrapy and the ceilings (with --site: Scrapy and --local on one process)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds, taking turns; the median is reported"
    )
    parser.add_argument(
        "--json", type=Path,
        help="where the figures go (benchmark.json; with --against benchmark-versus.json)",
    )  # fmt: skip
    parser.add_argument(
        "--site", choices=["generated", *SITES], default="generated",
        help="the generated site (--pages x --links), or a real one: the Python docs "
        "(heavy pages) or the PostgreSQL docs (light pages)",
    )  # fmt: skip
    parser.add_argument(
        "--against", metavar="REV", action="append", default=[],
        help="whole builds side by side: this tree and this revision (repeatable), such as"
        " 7e633be, on the generated site",
    )  # fmt: skip
    parser.add_argument(
        "--brokers",
        default=",".join(BROKERS),
        help="with --against or --site: the brokers whose workers crawl, comma-separated",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0,
        help="with --against: seconds a crawl may take before its build is reported failed",
    )  # fmt: skip
    args = parser.parse_args()
    brokers = [broker.strip() for broker in args.brokers.split(",") if broker.strip()]
    unknown = set(brokers) - set(BROKERS)
    if unknown or not brokers:
        parser.error(f"--brokers: {', '.join(sorted(unknown)) or 'none'}; known: {BROKERS}")
    if args.against:
        return versus(args, brokers, args.json or Path("benchmark-versus.json"))
    args.json = args.json or Path("benchmark.json")
    if args.site in SITES:
        site = SITES[args.site]
        directory = site.directory()
        if directory is None:
            print(f"skipped: no {site.package} here, and apt-get could not install it (not root?)")
            return 0
        docs = measure_docs(
            args.site,
            directory, processes=args.processes, threads=args.threads, repeat=args.repeat,
            quick=args.quick, brokers=brokers,
        )  # fmt: skip
        args.json.write_text(json.dumps(docs, indent=2))
        print(docs_table(docs))
        return 0 if docs["same_pages"] else 1

    results = measure(
        pages=args.pages,
        links=args.links,
        processes=args.processes,
        threads=args.threads,
        repeat=args.repeat,
        quick=args.quick,
        noop_messages=args.noop_messages,
    )
    args.json.write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


def measure(
    *,
    pages: int,
    links: int,
    processes: int,
    threads: int,
    repeat: int,
    quick: bool,
    noop_messages: int,
) -> dict[str, Any]:
    """Every contender's figures on one generated site, as ``benchmark.json`` holds them.

    Rounds take turns, so that a slow spell of a shared machine hits every contender
    alike; each contender's figures are its median round's, with every round under
    ``rounds``.

    Parameters:
      pages(int): The site's pages.
      links(int): Links on each page.
      processes(int): Worker processes, for the crawl and the no-op ceiling.
      threads(int): Threads per worker process; Scrapy gets processes x threads,
        ``crawler crawl --local`` runs with its defaults.
      repeat(int): Rounds.
      quick(bool): Whether to skip Scrapy and the no-op ceilings.
      noop_messages(int): Messages the no-op ceiling consumes on each broker.
    """
    results: dict[str, Any] = {
        "pages": pages, "links": links, "processes": processes, "threads": threads
    }  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)  # nginx workers read the site as an unprivileged user
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        (tmp / "site").mkdir()
        write_site(tmp / "site", base, pages, links)
        seed = f"{base}/page/0.html"
        with serve(tmp / "site", port) as server:
            results["server"] = server
            for round_ in range(repeat):
                prefix = tmp / f"round-{round_}"
                prefix.mkdir()
                for broker in BROKERS:
                    runs.setdefault(broker, []).append(
                        crawl_with_workers(
                            broker, seed, prefix, processes=processes, threads=threads
                        )
                    )
                runs.setdefault("local", []).append(
                    crawl_locally(seed, threads=processes * threads)
                )
                # --state: the same local crawl kept on disk as it goes (SQLite).
                state = ("--state", str(prefix / "state"))
                runs.setdefault("local_state", []).append(
                    crawl_locally(seed, threads=processes * threads, options=state)
                )
                # Page handlers: one that does nothing, and examples/titles.py's.
                for run, handler in HANDLERS.items():
                    runs.setdefault(run, []).append(
                        crawl_locally(
                            seed, threads=processes * threads, options=("--handler", handler)
                        )
                    )
                if not quick:
                    scrapy = crawl_with_scrapy(seed, prefix, concurrency=processes * threads)
                    if scrapy is not None:
                        runs.setdefault("scrapy", []).append(scrapy)
        if not quick:
            for broker in BROKERS:
                for round_ in range(repeat):
                    prefix = tmp / f"round-{round_}"
                    runs.setdefault(f"noop_{broker}", []).append(
                        noop_ceiling(
                            broker, noop_messages, prefix, processes=processes, threads=threads
                        )
                    )
    results["repeat"] = repeat
    for run, figures in runs.items():
        results[run] = median_run(figures)
        results[run]["rounds"] = figures
    return results


#: The ``--local`` runs with a page handler, by name.
HANDLERS = {
    "local_noop": "benchmarks.measuring.handlers:noop",
    "local_title": "examples.titles:title_and_description",
}


#: The crawl options of the real-site run, and Scrapy's spider with the same scope.
DOCS_OPTIONS = ("--follow-relative", "--same-domain")
DOCS_SPIDER = "scrapy_docs_spider.py"


def html_pages(access_log: Path) -> tuple[set[str], float]:
    """The HTML pages served with status 200 since the log was emptied, and the seconds
    from the first request to the last; empties the log."""
    pages = {path for path in served(access_log) if path.endswith((".html", "/"))}
    times = [when for when, _, _ in map(access_entry, access_log.read_text().splitlines()) if when]
    access_log.write_text("")
    return pages, (max(times) - min(times) if times else 0.0)


def on_the_server_clock(
    crawl: Callable[[], dict[str, Any] | None], access_log: Path
) -> tuple[dict[str, Any] | None, set[str]]:
    """``crawl``'s figures, its pages/s on nginx's clock (its HTML pages from the first
    request to the last) and its CPU per page (its processes' and their children's);
    the HTML pages it fetched."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcome = crawl()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    fetched, seconds = html_pages(access_log)
    if outcome is None:
        return None, fetched
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    outcome.update(
        html_pages=len(fetched), first_to_last_s=round(seconds, 3),
        pages_per_s=len(fetched) / seconds if seconds else float("nan"),
        cpu_ms_per_page=1000 * cpu / max(1, len(fetched)),
    )  # fmt: skip
    return outcome, fetched


def measure_docs(
    name: str,
    directory: Path,
    *,
    processes: int,
    threads: int,
    repeat: int,
    quick: bool,
    brokers: Sequence[str] = BROKERS,
) -> dict[str, Any]:
    """Every contender's figures on a real site, rounds taking turns, and whether
    each fetched the same HTML pages as wget in every round.

    Parameters:
      name(str): The site's name in :data:`SITES`.
      directory(Path): The docs' HTML directory (``index.html`` is the seed).
      processes(int): Worker processes.
      threads(int): Threads per worker process; Scrapy gets processes x threads,
        ``crawler crawl --local`` runs with its defaults.
      repeat(int): Rounds.
      quick(bool): Whether to skip Scrapy, and ``--local`` on one process.
      brokers(list): The brokers whose workers crawl.
    """
    pages = sorted(directory.rglob("*.html"))
    results: dict[str, Any] = {
        "site": f"{name} ({directory})", "files": len(pages),
        "kib_per_page": round(sum(p.stat().st_size for p in pages) / len(pages) / 1024, 1),
        "processes": processes, "threads": threads, "repeat": repeat,
    }  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {}
    differences: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        tmp.chmod(0o755)
        port = free_port()
        seed = f"http://127.0.0.1:{port}/index.html"
        log = tmp / "access.log"
        with serve(directory, port, access_log=log, state=tmp) as server:
            results["server"] = server
            for round_ in range(repeat):
                prefix = tmp / f"round-{round_}"
                prefix.mkdir()
                log.write_text("")
                contenders: dict[str, Callable[[], dict[str, Any] | None]] = {
                    "wget": partial(crawl_with_wget, seed, prefix),
                    # `crawler crawl --local SEED` as a user runs it: its defaults (one
                    # process a core), then on one process, as before --processes.
                    "local": partial(crawl_with_defaults, seed),
                }
                if not quick:
                    contenders["local_1"] = partial(crawl_with_defaults, seed, "--processes", "1")
                for broker in brokers:
                    contenders[broker] = partial(
                        crawl_with_workers, broker, seed, prefix, processes=processes,
                        threads=threads, options=DOCS_OPTIONS, exits=(0, 1),
                    )  # fmt: skip
                if not quick:
                    contenders["scrapy"] = partial(
                        crawl_with_scrapy, seed, prefix, concurrency=processes * threads,
                        spider=DOCS_SPIDER,
                    )  # fmt: skip
                reference: set[str] = set()
                for run, crawl in contenders.items():
                    outcome, fetched = on_the_server_clock(crawl, log)
                    if run == "wget":
                        reference = fetched
                    if outcome is None:
                        continue
                    differences.setdefault(run, []).append(len(fetched ^ reference))
                    runs.setdefault(run, []).append(outcome)
    for run, rounds in runs.items():
        results[run] = median_run(rounds)
        results[run]["rounds"] = rounds
    results["pages_differing_from_wget"] = differences
    results["same_pages"] = all(not any(counts) for counts in differences.values())
    return results


def docs_table(results: dict[str, Any]) -> str:
    """The real-site figures as the README's table."""
    scrapy = (results.get("scrapy") or {}).get("pages_per_s")
    wget = results["wget"]["pages_per_s"]
    lines = [
        f"site: {results['site']}, {results['files']} HTML files of "
        f"{results['kib_per_page']} KiB on average, served by {results['server']}; "
        f"workers {results['processes']} processes x {results['threads']} threads; "
        f"median of {results['repeat']} round(s); HTML pages as wget's: "
        f"{'yes' if results['same_pages'] else 'NO'} {results['pages_differing_from_wget']}",
        f"{'run':<10} {'pages':>6} {'pages/s':>8} {'CPU ms/page':>11} {'/Scrapy':>7} {'/wget':>7}",
    ]
    for run in ("rabbitmq", "redis", "local", "local_1", "scrapy", "wget"):
        figures = results.get(run)
        if not figures:
            continue
        rate = figures["pages_per_s"]
        pages = figures["html_pages"]
        lines.append(
            f"{run:<10} {pages:>6} {rate:>8.0f} "
            f"{figures.get('cpu_ms_per_page', float('nan')):>11.2f} "
            f"{(rate / scrapy if scrapy else float('nan')):>7.2f} {rate / wget:>7.2f}"
        )
    return "\n".join(lines)


def median_run(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median rate (the lower middle one of an even number)."""
    key = "pages_per_s" if "pages_per_s" in rounds[0] else "messages_per_s"
    ordered = sorted(rounds, key=lambda figures: float(figures[key]))
    return dict(ordered[(len(ordered) - 1) // 2])


def table(results: dict[str, Any]) -> str:
    """The figures of ``results`` (as :func:`measure` returns them) as the README's table."""
    scrapy = (results.get("scrapy") or {}).get("pages_per_s")
    lines = [
        f"site: {results['pages']} pages x {results['links']} links, "
        f"served by {results['server']}; "
        f"workers {results['processes']} processes x {results['threads']} threads; "
        f"median of {results['repeat']} round(s)",
        f"{'run':<10} {'pages/s':>8} {'msgs/page':>9} {'CPU ms/page':>11} {'RSS MiB':>8} "
        f"{'/Scrapy':>7} {'/no-op':>7}",
    ]
    for run in ("rabbitmq", "redis", "local", "local_state", *HANDLERS, "scrapy"):
        figures = results.get(run)
        if not figures:
            continue
        rate = figures["pages_per_s"]
        ceiling = (results.get(f"noop_{run}") or {}).get("messages_per_s")
        lines.append(
            f"{run:<10} {rate:>8.0f} {figures.get('messages_per_page', float('nan')):>9.2f} "
            f"{figures.get('cpu_ms_per_page', float('nan')):>11.2f} "
            f"{figures.get('peak_worker_rss_mib', float('nan')):>8.1f} "
            f"{(rate / scrapy if scrapy else float('nan')):>7.2f} "
            f"{(rate / ceiling if ceiling else float('nan')):>7.2f}"
        )
    for broker in BROKERS:
        ceiling = results.get(f"noop_{broker}")
        if ceiling:
            lines.append(f"no-op actor on {broker}: {ceiling['messages_per_s']:.0f} messages/s")
    return "\n".join(lines)


# --against: whole builds of the crawler side by side.

#: Where the builds' virtualenvs are kept, one per ``requirements.txt``.
CACHE = Path.home() / ".cache" / "crawler-benchmarks"
#: Dramatiq's queues for actors without a ``queue_name``, as the older builds declare them.
DEFAULT_QUEUES = ("default", "default.DQ", "default.XQ")
#: Seconds without a new line in the access log, all pages served, that end a run.
QUIET = 1.0
#: Lines of a failed build's output shown with it.
TAIL = 15


def versus(args: argparse.Namespace, brokers: list[str], output: Path) -> int:
    """``--against``: measure the builds, write the figures to ``output`` and print the
    table; 1 when a build failed on a broker in every round."""
    revisions = list(dict.fromkeys(args.against))  # each once, in order
    results = measure_builds(
        revisions, pages=args.pages, links=args.links, rounds=args.repeat, brokers=brokers,
        processes=args.processes, threads=args.threads, timeout=args.timeout,
    )  # fmt: skip
    output.write_text(json.dumps(results, indent=2))
    print(builds_table(results))
    every_measured = all(
        "seconds" in figures
        for by_broker in results["results"].values()
        for figures in by_broker.values()
    )
    return 0 if every_measured else 1


@dataclass(frozen=True)
class Build:
    """One build of the crawler: its tree, and the Python that runs it.

    Parameters:
      name(str): ``"this"``, or the revision as given.
      sha(str): Its commit (this tree's HEAD, edits included).
      root(Path): Its tree: the workers' and seeder's working directory.
      bin_dir(Path): Where its ``python`` and ``dramatiq`` are.
    """

    name: str
    sha: str
    root: Path
    bin_dir: Path

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"


class BuildFailed(Exception):
    """A build's run that measured nothing: workers dead, seeder failed, or too slow."""


def git(*args: str) -> str:
    """``git args`` in this repository, its output stripped."""
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def slug(name: str) -> str:
    """``name`` as a file name: a revision such as ``main~3`` as ``main_3``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def clean_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without what could put another ``crawler`` package before the build's."""
    return {name: value for name, value in env.items() if name not in ("PYTHONPATH", "PYTHONHOME")}


def virtualenv(requirements: Path) -> Path:
    """A virtualenv with ``requirements`` installed, made the first time, then reused.

    Parameters:
      requirements(Path): A build's ``requirements.txt``.
    """
    key = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    venv = CACHE / f"venv-{key}"
    installed = venv / "installed.txt"  # written last: a half-made one is made again
    if installed.exists():
        return venv
    print(f"making {venv} for {requirements.relative_to(requirements.parent.parent)}", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
        check=True,
    )
    installed.write_text(requirements.read_text())
    return venv


def check_imports(build: Build) -> str:
    """Where ``build``'s Python imports ``crawler`` from, in its tree: it must be there."""
    found = subprocess.run(
        [str(build.python), "-c", "import crawler; print(crawler.__file__)"],
        cwd=build.root, env=clean_env(dict(os.environ)), check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    if not Path(found).resolve().is_relative_to(build.root.resolve()):
        raise SystemExit(f"build {build.name} imports crawler from {found}, not its tree")
    return found


@contextmanager
def builds(revisions: list[str], directory: Path) -> Iterator[list[Build]]:
    """This tree, and each revision checked out in ``directory`` with its virtualenv;
    the checkouts removed on exit.

    Parameters:
      revisions(list): Revisions to check out, as ``git rev-parse`` reads them.
      directory(Path): Where the checkouts go.
    """
    made: list[Path] = []
    this = Build("this", git("rev-parse", "HEAD"), ROOT, BIN)
    every = [this]
    try:
        for revision in revisions:
            sha = git("rev-parse", "--verify", f"{revision}^{{commit}}")
            tree = directory / slug(revision)
            git("worktree", "add", "--detach", str(tree), sha)
            made.append(tree)
            venv = virtualenv(tree / "requirements.txt")
            every.append(Build(revision, sha, tree, venv / "bin"))
        yield every
    finally:
        for tree in made:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False
            )


def empty_default_queues(env: dict[str, str]) -> None:
    """Delete Dramatiq's default queues on the benchmark's own RabbitMQ virtual host,
    which builds from before the crawler's own queue use (``flush_services`` deletes that
    one)."""
    assert env.get("CRAWLER_OWN_SERVICES") == "1", "own services first: never the user's"
    connection = pika.BlockingConnection(pika.URLParameters(env["RABBITMQ_URL"]))
    try:
        channel = connection.channel()
        for queue in DEFAULT_QUEUES:
            channel.queue_delete(queue)
    finally:
        connection.close()


def tail(*files: Path) -> str:
    """The last lines of each of ``files`` that exists."""
    lines: list[str] = []
    for file in files:
        if file.exists():
            text = file.read_text(errors="replace").splitlines()[-TAIL:]
            lines += [f"--- {file.name}", *text]
    return "\n".join(lines)


def watch_log(
    access_log: Path,
    pages: int,
    timeout: float,
    workers: subprocess.Popen[bytes],
    seeder: subprocess.Popen[bytes],
) -> tuple[float, int, int]:
    """Read ``access_log`` as it grows until it shows ``pages`` distinct paths served
    with 200 and then no new line for :data:`QUIET` seconds.

    Returns the latest ``$msec`` in it, the requests answered 200 and the distinct paths.
    Raises :class:`BuildFailed` when the workers exit, the seeder fails or ``timeout``
    seconds pass first.
    """
    seen: set[str] = set()
    fetches, last, pending = 0, 0.0, b""
    started = grew = time.monotonic()
    with access_log.open("rb") as log:
        while True:
            chunk = log.read()
            now = time.monotonic()
            if chunk:
                grew = now
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    msec, path, status = access_entry(line.decode(errors="replace"))
                    last = max(last, msec or 0.0)
                    if status == "200":
                        fetches += 1
                        seen.add(path)
            elif len(seen) >= pages and now - grew >= QUIET:
                return last, fetches, len(seen)
            if workers.poll() is not None:
                raise BuildFailed(f"the workers exited with status {workers.returncode}")
            if seeder.poll() not in (None, 0):
                raise BuildFailed(f"the seeder exited with status {seeder.returncode}")
            if now - started > timeout:
                raise BuildFailed(
                    f"timed out after {timeout:g} s: {len(seen)} of {pages} pages served"
                    f" ({fetches} fetches)"
                )
            time.sleep(0.05)


def crawl_build(
    build: Build,
    broker: str,
    seed: str,
    run_dir: Path,
    access_log: Path,
    *,
    pages: int,
    processes: int,
    threads: int,
    timeout: float,
) -> dict[str, Any]:
    """One crawl of the site by ``build``'s workers on ``broker``, and its figures.

    Parameters:
      build(Build): Whose workers and seeder.
      broker(str): ``"rabbitmq"`` or ``"redis"``.
      seed(str): The first page's URL.
      run_dir(Path): A new directory of this run's: the workers' Prometheus files, the
        workers' and seeder's output (``workers.log``, ``seeder.log``).
      access_log(Path): The site's access log, emptied here.
      pages(int): The site's pages: the crawl is over once each was served.
      processes(int): Worker processes.
      threads(int): Worker threads in each process.
      timeout(float): Seconds the pages may take before the build is reported failed.
    """
    env = clean_env(broker_env(broker, dramatiq_prom_db=str(run_dir / "prometheus")))
    (run_dir / "prometheus").mkdir()
    flush_services(env)
    if broker == "rabbitmq":
        empty_default_queues(env)
    access_log.write_text("")  # nginx appends: this run's requests only
    with (
        (run_dir / "workers.log").open("wb") as workers_output,
        (run_dir / "seeder.log").open("wb") as seeder_output,
    ):
        try:
            workers = start_workers(
                env, "crawler.example", processes=processes, threads=threads,
                root=build.root, bin_dir=build.bin_dir, output=workers_output,
            )  # fmt: skip
        except RuntimeError as error:
            raise BuildFailed(str(error)) from error
        try:
            meter = CrawlCpu.start(workers.pid, broker)
            started = time.time()
            seeder = subprocess.Popen(
                [str(build.python), "-m", "crawler.example", seed],
                cwd=build.root, env=env, stdout=seeder_output, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                last, fetches, distinct = watch_log(access_log, pages, timeout, workers, seeder)
                seeder.wait(timeout=60)
            except subprocess.TimeoutExpired as error:
                raise BuildFailed(
                    "the seeder did not exit within 60 s of the last fetch"
                ) from error
            finally:
                if seeder.poll() is None:
                    seeder.kill()
                    seeder.wait()
            cpu_by_part = meter.by_part()
        finally:
            try:
                stop(workers)
            except subprocess.TimeoutExpired:
                workers.kill()
                workers.wait()
    if seeder.returncode != 0:
        raise BuildFailed(f"the seeder exited with status {seeder.returncode}")
    seconds = last - started
    return {
        "seconds": round(seconds, 3),
        "pages": distinct,
        "fetches": fetches,
        "pages_per_s": round(distinct / seconds, 1),
        "fetches_per_page": round(fetches / distinct, 3),
        "cpu_ms_per_page": round(1000 * sum(cpu_by_part.values()) / distinct, 3),
        "cpu_ms_per_page_by_part": {
            part: round(1000 * cpu / distinct, 3) for part, cpu in cpu_by_part.items()
        },
    }


def measure_builds(
    revisions: list[str],
    *,
    pages: int,
    links: int,
    rounds: int,
    brokers: list[str],
    processes: int,
    threads: int,
    timeout: float,
) -> dict[str, Any]:
    """Every build's rounds on every broker, and their medians, as the JSON holds them.

    Parameters:
      revisions(list): The revisions to measure besides this tree.
      pages(int): The site's pages.
      links(int): Links on each page.
      rounds(int): Rounds, taking turns.
      brokers(list): ``"rabbitmq"``, ``"redis"`` or both.
      processes(int): Worker processes.
      threads(int): Worker threads in each process.
      timeout(float): Seconds a crawl may take before its build is reported failed.
    """
    upstream = set(git("rev-list", "--max-parents=0", "HEAD").split())
    results: dict[str, Any] = {
        "pages": pages, "links": links, "processes": processes, "threads": threads,
        "rounds": rounds, "brokers": brokers,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        tmp.chmod(0o755)  # nginx workers read the site as an unprivileged user
        (tmp / "builds").mkdir()
        with builds(revisions, tmp / "builds") as every:
            results["builds"] = {
                build.name: {
                    "sha": build.sha,
                    "python": str(build.python),
                    "crawler": check_imports(build),
                    "upstream": build.sha in upstream,
                }
                for build in every
            }
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            (tmp / "site").mkdir()
            write_site(tmp / "site", base, pages, links)
            seed = f"{base}/page/0.html"
            access_log = tmp / "access.log"
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {
                build.name: {broker: [] for broker in brokers} for build in every
            }
            with serve(tmp / "site", port, access_log=access_log, state=tmp) as server:
                results["server"] = server
                for round_ in range(1, rounds + 1):
                    for broker in brokers:
                        for number, build in enumerate(every):
                            run_dir = tmp / f"round-{round_}-{broker}-{number}-{slug(build.name)}"
                            run_dir.mkdir()
                            try:
                                figures = crawl_build(
                                    build, broker, seed, run_dir, access_log, pages=pages,
                                    processes=processes, threads=threads, timeout=timeout,
                                )  # fmt: skip
                            except BuildFailed as error:
                                output = tail(run_dir / "workers.log", run_dir / "seeder.log")
                                figures = {"failed": str(error), "output": output}
                                print(f"round {round_} {build.name} on {broker}: FAILED: "
                                      f"{error}\n{output}", flush=True)  # fmt: skip
                            else:
                                print(f"round {round_} {build.name} on {broker}: "
                                      f"{json.dumps(figures)}", flush=True)  # fmt: skip
                            runs[build.name][broker].append(figures)
    results["results"] = {
        name: {broker: builds_summary(rounds_) for broker, rounds_ in by_broker.items()}
        for name, by_broker in runs.items()
    }
    return results


def builds_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the rounds that measured, with every round."""
    done = [figures for figures in rounds if "failed" not in figures]
    result: dict[str, Any] = {"rounds": rounds, "failed": len(rounds) - len(done)}
    if done:
        for figure in ("seconds", "pages_per_s", "cpu_ms_per_page", "fetches_per_page"):
            result[figure] = statistics.median(float(one[figure]) for one in done)
    return result


def builds_table(results: dict[str, Any]) -> str:
    """The medians of ``results`` (as :func:`measure_builds` returns them), one line a
    build and broker, with seconds over this tree's and the upstream example's over each."""
    upstream = next((name for name, build in results["builds"].items() if build["upstream"]), None)
    lines = [
        f"site: {results['pages']} pages x {results['links']} links, served by "
        f"{results['server']}; workers {results['processes']} processes x "
        f"{results['threads']} threads; median of {results['rounds']} round(s); seconds "
        "from the seed command to the last fetch",
        f"{'build':<10} {'broker':<8} {'seconds':>8} {'pages/s':>8} {'CPU ms/page':>11} "
        f"{'fetches/page':>12} {'/this':>6}" + (f" {'x upstream':>10}" if upstream else ""),
    ]
    for broker in results["brokers"]:
        this = results["results"]["this"][broker].get("seconds")
        base = results["results"][upstream][broker].get("seconds") if upstream else None
        for name, by_broker in results["results"].items():
            figures = by_broker[broker]
            label = f"{name:<10} {broker:<8}"
            if "seconds" not in figures:
                reason = figures["rounds"][-1]["failed"]
                lines.append(f"{label} FAILED in every round: {reason}")
                continue
            seconds = figures["seconds"]
            line = (
                f"{label} {seconds:>8.2f} {figures['pages_per_s']:>8.0f} "
                f"{figures['cpu_ms_per_page']:>11.2f} {figures['fetches_per_page']:>12.2f} "
                f"{(seconds / this if this else float('nan')):>6.2f}"
            )
            if upstream:
                line += f" {(base / seconds if base else float('nan')):>10.2f}"
            if figures["failed"]:
                line += f"  ({figures['failed']} round(s) FAILED)"
            lines.append(line)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
