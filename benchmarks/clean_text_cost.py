"""What ``--markdown`` and ``--near-duplicates`` cost a page, in CPU, on real pages:

    python benchmarks/clean_text_cost.py [--pages 200]

For each of Debian's PostgreSQL 15 and Python 3.11 docs (``postgresql-doc-15``,
``python3.11-doc``, installed with apt-get when missing; a set that cannot be is skipped,
said so), single-threaded, on
the same ``--pages`` pages (a seeded sample): Lexbor's parse of the page alone (what a
crawl with ``--follow-relative`` pays already, for scale), the main content made
Markdown and plain text (:func:`crawler.content.main_text.main_content`), and its
SimHash (:func:`crawler.content.fingerprints.simhash`).  Prints the median and mean
CPU milliseconds of each; ``--json FILE`` writes them too.

``--against REV`` measures the same two steps of a git revision too (its
``crawler/content/main_text.py`` and ``fingerprints.py``, loaded beside this tree's),
page by page, each page's two runs in turns, ``--rounds`` times: side by side, as a
shared machine's speed moves by half within minutes.  It prints both and their ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.content.fingerprints import simhash  # noqa: E402
from crawler.content.main_text import main_content  # noqa: E402
from scripts.services import apt_install  # noqa: E402

PACKAGES = ("postgresql-doc-15", "python3.11-doc")


def pages_of(package: str, count: int) -> list[bytes]:
    """``count`` HTML pages of ``package`` (installed with apt-get when missing, if it
    can be), the same sample each run."""
    listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
    if ".html" not in listed:
        apt_install(package)
        listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
    files = sorted(line for line in listed.split() if line.endswith(".html"))
    random.Random(0).shuffle(files)
    return [Path(f).read_bytes() for f in files[:count]]


def cpu_ms(step: Callable[[Any], object], argument: Any) -> float:
    started = time.process_time()
    step(argument)
    return (time.process_time() - started) * 1000


def measure(pages: list[bytes]) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {"parse": [], "main_content": [], "simhash": []}
    for html in pages:
        times["parse"].append(cpu_ms(LexborHTMLParser, html))
        times["main_content"].append(cpu_ms(main_content, html))
        times["simhash"].append(cpu_ms(simhash, main_content(html).text))
    return {
        step: {"median_ms": statistics.median(ms), "mean_ms": statistics.mean(ms)}
        for step, ms in times.items()
    }


def revision_modules(revision: str) -> tuple[ModuleType, ModuleType]:
    """``main_text`` and ``fingerprints`` as they are at ``revision``, loaded apart."""
    loaded = []
    for name in ("main_text", "fingerprints"):
        source = subprocess.run(
            ["git", "show", f"{revision}:crawler/content/{name}.py"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        module_name = f"against_{name}"
        spec = importlib.util.spec_from_loader(module_name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # its dataclasses look themselves up there
        exec(compile(source, f"{revision}:{name}.py", "exec"), module.__dict__)
        loaded.append(module)
    return loaded[0], loaded[1]


def measure_against(
    pages: list[bytes], against: tuple[ModuleType, ModuleType], rounds: int
) -> dict[str, dict[str, float]]:
    """Markdown and SimHash of this tree's and ``against``'s, a page's two in turns."""
    builds: dict[str, tuple[Callable[[Any], Any], Callable[[str], int]]] = {
        "this": (main_content, simhash),
        "against": (against[0].main_content, against[1].simhash),
    }
    times: dict[str, list[float]] = {name: [] for name in builds}
    for round_ in range(rounds):
        for index, html in enumerate(pages):
            order = list(builds) if (index + round_) % 2 == 0 else list(reversed(builds))
            for name in order:
                make, fingerprint = builds[name]
                started = time.process_time()
                fingerprint(make(html).text)
                times[name].append((time.process_time() - started) * 1000)
    return {
        name: {"median_ms": statistics.median(ms), "mean_ms": statistics.mean(ms)}
        for name, ms in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--against", metavar="REV", help="a git revision to measure beside")
    parser.add_argument("--rounds", type=int, default=3, help="with --against (3)")
    args = parser.parse_args()
    against = revision_modules(args.against) if args.against else None
    results: dict[str, object] = {}
    for package in PACKAGES:
        pages = pages_of(package, args.pages)
        if not pages:
            print(f"{package}: skipped, not installed (apt-get install {package})")
            continue
        figures = measure(pages)
        result: dict[str, Any] = {"pages": len(pages), **figures}
        results[package] = result
        kib = statistics.median(len(page) for page in pages) / 1024
        print(f"{package}: {len(pages)} pages, median {kib:.0f} KiB")
        for step, values in figures.items():
            median, mean = values["median_ms"], values["mean_ms"]
            print(f"  {step:<13} median {median:6.2f} ms   mean {mean:6.2f} ms")
        if against is not None:
            both = measure_against(pages, against, args.rounds)
            result["against"] = {"revision": args.against, **both}
            print(f"  markdown and simhash, side by side ({args.rounds} rounds):")
            for name, label in (("this", "this tree"), ("against", args.against)):
                median, mean = both[name]["median_ms"], both[name]["mean_ms"]
                print(f"    {label:<11} median {median:6.2f} ms   mean {mean:6.2f} ms")
            ratio = both["this"]["mean_ms"] / both["against"]["mean_ms"]
            print(f"    this / {args.against}: {ratio:.3f} of the mean")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
