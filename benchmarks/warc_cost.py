"""What ``--warc`` costs: pages/s with and without it, side by side, and the bytes of
WARC files per page, on the Python docs (real pages) or the generated site.

    python benchmarks/warc_cost.py --repeat 3                  # the Python docs
    python benchmarks/warc_cost.py --site generated --pages 2000

Each round crawls the site with workers (2 x 8) on RabbitMQ and on Redis, and with
``--local``, once without ``--warc`` and once with it, taking turns; the median round
is reported.  Every WARC file is read back with warcio: each round with ``--warc``
must hold a ``response`` or ``revisit`` record for every page it fetched.  Every
address is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.measuring import (
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    crawl_locally,
    crawl_with_workers,
    free_port,
    serve,
    write_site,
)
from benchmarks.measuring.real_sites import PACKAGE, docs_directory

RUNS = ("rabbitmq", "redis", "local")


def stored_pages(directory: Path) -> tuple[set[str], int]:
    """The URIs with a response or revisit record in ``directory``'s WARC files, and
    the files' bytes."""
    uris, size = set(), 0
    for path in directory.glob("*.warc.gz"):
        size += path.stat().st_size
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit"):
                    uris.add(record.rec_headers.get_header("WARC-Target-URI"))
    return uris, size


def one_crawl(run: str, seed: str, tmp: Path, options: tuple[str, ...]) -> dict[str, Any]:
    if run == "local":
        return crawl_locally(
            seed, threads=DEFAULT_PROCESSES * DEFAULT_THREADS, options=options, exits=(0, 1)
        )
    return crawl_with_workers(
        run, seed, tmp, processes=DEFAULT_PROCESSES, threads=DEFAULT_THREADS,
        options=options, exits=(0, 1),
    )  # fmt: skip


def measure(root: Path, seed: str, tmp: Path, options: tuple[str, ...], repeat: int) -> Any:
    rounds: dict[str, list[dict[str, Any]]] = {}
    for round_ in range(repeat):
        for run in RUNS:
            for warc in (False, True):
                prefix = tmp / f"{run}-{round_}-{'warc' if warc else 'plain'}"
                prefix.mkdir()
                prefix.chmod(0o777)
                extra = ("--warc", str(prefix / "warc")) if warc else ()
                outcome = one_crawl(run, seed, prefix, options + extra)
                if warc:
                    uris, size = stored_pages(prefix / "warc")
                    outcome["stored_pages"] = len(uris)
                    outcome["warc_bytes_per_page"] = size / max(outcome["pages"], 1)
                    outcome["every_page_stored"] = len(uris) >= outcome["pages"]
                rounds.setdefault(f"{run}{' --warc' if warc else ''}", []).append(outcome)
    results: dict[str, Any] = {}
    for name, outcomes in rounds.items():
        rates = [outcome["pages_per_s"] for outcome in outcomes]
        median = statistics.median_low(rates)
        results[name] = dict(outcomes[rates.index(median)], rounds=outcomes)
    return results


def table(results: dict[str, Any]) -> str:
    lines = [f"{'run':16} {'pages':>6} {'pages/s':>8} {'x plain':>8} {'WARC B/page':>12}"]
    for name, figures in results.items():
        plain = results[name.removesuffix(" --warc")]["pages_per_s"]
        size = figures.get("warc_bytes_per_page")
        lines.append(
            f"{name:16} {figures['pages']:6.0f} {figures['pages_per_s']:8.0f}"
            f" {figures['pages_per_s'] / plain:8.2f} {'' if size is None else round(size):>12}"
        )
    stored = "yes" if every_page_stored(results) else "NO"
    lines.append(f"every page fetched with --warc stored, every round: {stored}")
    return "\n".join(lines)


def every_page_stored(results: dict[str, Any]) -> bool:
    """Whether every round with ``--warc`` stored every page it fetched."""
    rounds = (outcome for figures in results.values() for outcome in figures["rounds"])
    return all(outcome.get("every_page_stored", True) for outcome in rounds)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--site", choices=["python-docs", "generated"], default="python-docs")
    parser.add_argument("--pages", type=int, default=2000, help="the generated site's")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        tmp.chmod(0o755)
        port = free_port()
        if arguments.site == "python-docs":
            root = docs_directory()
            if root is None:
                print(f"skipped: no {PACKAGE} here, and apt-get could not install it")
                return 0
            seed = f"http://127.0.0.1:{port}/index.html"
            options: tuple[str, ...] = ("--follow-relative", "--same-domain")
        else:
            root = tmp / "site"
            root.mkdir()
            write_site(root, f"http://127.0.0.1:{port}", arguments.pages, 10)
            seed, options = f"http://127.0.0.1:{port}/page/0.html", ()
        with serve(root, port, state=tmp):
            results = measure(root, seed, tmp, options, arguments.repeat)
    print(f"site: {arguments.site}; median of {arguments.repeat} round(s)")
    print(table(results))
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=2))
    return 0 if every_page_stored(results) else 1


if __name__ == "__main__":
    sys.exit(main())
