"""The benchmark's smoke run: every part runs and reports; no timing is asserted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.workers import PROJECT_ROOT


def run_benchmark(
    script: str, output: Path, *arguments: str, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python benchmarks/SCRIPT ARGUMENTS --json OUTPUT`` as a user runs it: its run,
    which must succeed, and the figures it wrote."""
    result = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *arguments, "--json", str(output)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert output.exists(), result.stdout  # measured, not skipped (say, for want of the docs)
    return result, json.loads(output.read_text())


def test_benchmark_smoke_run_crawls_the_site_on_each_broker_and_locally(
    tmp_path: Path, memcached: object
) -> None:
    # Two rounds: each run's figures are its lower median round's, taken in turns.
    result, figures = run_benchmark(
        "run.py", tmp_path / "benchmark.json", "--pages", "100", "--links", "5", "--quick",
        "--repeat", "2",
    )  # fmt: skip

    for run in ("rabbitmq", "redis", "local", "local_state", "local_noop", "local_title"):
        assert figures[run]["pages"] == 100
        assert figures[run]["pages_per_s"] > 0
        rates = sorted(r["pages_per_s"] for r in figures[run]["rounds"])
        assert len(rates) == 2 and figures[run]["pages_per_s"] == rates[0]  # lower median
    for broker in ("rabbitmq", "redis"):
        assert figures[broker]["messages_per_page"] <= 1.2
        assert figures[broker]["cpu_ms_per_page"] > 0
        assert figures[broker]["peak_worker_rss_mib"] > 0
    assert "pages/s" in result.stdout and "msgs/page" in result.stdout


def test_floor_smoke_run_prices_each_part_of_a_page_on_each_broker(memcached: object) -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/floor.py", "--times", "100", "--noop-messages", "3000"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    for broker in ("rabbitmq", "redis"):
        floor = re.search(
            rf"^{broker} +floor ([\d.]+) CPU ms/page -> at most (\d+) pages/s = ([\d.]+) of",
            result.stdout,
            re.MULTILINE,
        )
        assert floor, result.stdout
        assert float(floor.group(1)) > 0 and int(floor.group(2)) > 0
        parts = re.findall(rf"^{broker} +.+? +[\d.]+ +[\d.]+$", result.stdout, re.MULTILINE)
        assert len(parts) == 4, result.stdout


def test_scale_smoke_run_crawls_the_site_with_the_redis_store() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/scale.py", "--pages", "300", "--broker", "redis",
         "--store", "redis"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    runs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(run["broker"], run["store"]) for run in runs] == [("redis", "redis")]
    for run in runs:
        assert run["wait_exit"] == 0 and run["pages_fetched"] == 300
        assert run["pages_served"] == 300 and run["pages_served_twice"] == 0
        assert run["peak_worker_rss_mib"] > 0
        assert run["store_bytes_per_url"] > 0
    assert "| broker | store | p/s at 10% |" in result.stdout


def test_extractors_smoke_run_finds_the_same_links_with_every_parser(tmp_path: Path) -> None:
    page = b'<html><body><a href="a.html">a</a><A HREF=b.html>b</A><a href="#top">t</a></body>'
    for i in range(3):
        (tmp_path / f"{i}.html").write_bytes(page)

    result = subprocess.run(
        [sys.executable, "benchmarks/extractors.py", str(tmp_path), "--repeat", "1"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    found = dict(re.findall(r"^(.+?) +(\d+) +[\d.]+$", result.stdout, re.MULTILINE))
    assert found["upstream regex"] == "6"  # not <A HREF=b.html>: written otherwise
    for parser in ("html.parser", "selectolax (Lexbor)", "crawler html_links"):
        assert found[parser] == "9", result.stdout


def test_budget_smoke_run_splits_each_broker_s_cpu_per_page_into_parts(
    tmp_path: Path, memcached: object
) -> None:
    result, figures = run_benchmark(
        "budget.py", tmp_path / "budget.json", "--pages", "200", "--links", "5"
    )

    for broker in ("rabbitmq", "redis"):
        run = figures[broker]
        assert run["pages"] == 200 and run["samples"] > 0
        # The parts are the workers' CPU split by samples: together, that CPU.
        assert sum(run["workers"].values()) == pytest.approx(run["processes"]["workers"], rel=0.01)
        assert run["workers"]["GET and body (requests)"] > 0
        assert run["workers"]["links claimed and sent"] > 0
    assert "all processes" in result.stdout


# Each site on one broker (both brokers crawl both sites in `benchmarks/run.py --site`).
@pytest.mark.parametrize(
    ("site", "least_pages", "broker"),
    [("python-docs", 500, "rabbitmq"), ("postgresql-docs", 1000, "redis")],
)
def test_docs_smoke_run_fetches_wget_s_pages_of_a_real_site_on_a_broker_and_locally(
    tmp_path: Path, memcached: object, site: str, least_pages: int, broker: str
) -> None:
    # Installs the docs with apt-get when missing, as a newcomer's run would; the
    # figures file exists only when it measured (not skipped for want of the docs).
    result, figures = run_benchmark(
        "run.py", tmp_path / "docs.json", "--site", site, "--quick", "--repeat", "1",
        "--brokers", broker, timeout=600,
    )  # fmt: skip
    assert figures["same_pages"], figures["pages_differing_from_wget"]
    assert figures["wget"]["html_pages"] > least_pages
    assert sorted(run for run in ("rabbitmq", "redis", "local_1") if run in figures) == [broker]
    for run in (broker, "local"):
        assert figures[run]["html_pages"] == figures["wget"]["html_pages"]
        assert figures[run]["pages_per_s"] > 0 and figures[run]["cpu_ms_per_page"] > 0
    assert "/wget" in result.stdout


def test_run_against_smoke_run_measures_this_tree_against_a_revision_in_a_worktree(
    tmp_path: Path, memcached: object
) -> None:
    # HEAD in a worktree of its own, run by a virtualenv of its requirements.txt.
    result, figures = run_benchmark(
        "run.py", tmp_path / "versus.json", "--against", "HEAD", "--pages", "100",
        "--links", "5", "--repeat", "1", "--brokers", "redis", timeout=900,
    )  # fmt: skip
    for build in ("this", "HEAD"):
        run = figures["results"][build]["redis"]
        assert run["failed"] == 0 and run["fetches_per_page"] == 1.0
        assert run["pages_per_s"] > 0 and run["cpu_ms_per_page"] > 0
    assert "HEAD" in result.stdout and "/this" in result.stdout


def test_floor_python_smoke_run_crawls_the_postgresql_docs_bare_as_wget_does(
    tmp_path: Path,
) -> None:
    result, figures = run_benchmark(
        "floor.py", tmp_path / "floor.json", "--python", "--requests", "50", timeout=300
    )
    for threads in ("1", "16"):
        assert figures["bare"][threads]["pages"] == figures["wget"]["pages"] > 1000
    assert set(figures["cpu_us_per_get"]) >= {"http.client", "the crawler's fetch"}
    assert "bare Python loop" in result.stdout


def test_seeder_memory_smoke_run_follows_fed_records_to_the_end_on_rabbitmq(
    tmp_path: Path, memcached: object
) -> None:
    result, figures = run_benchmark(
        "seeder_memory.py", tmp_path / "seeder.json", "--records", "3000", "--broker",
        "rabbitmq",
    )  # fmt: skip
    (run,) = figures["runs"]
    assert run["records"] == 3000 and run["peak_rss_mib"] > 0
    assert "seeder peak RSS MiB" in result.stdout


def test_claim_path_smoke_run_reports_each_store_at_each_checkpoint(
    tmp_path: Path, memcached: object
) -> None:
    result, figures = run_benchmark(
        "claim_path.py", tmp_path / "claims.json", "--checkpoints", "2000", "5000",
        "--window", "500",
    )  # fmt: skip
    rows: list[dict[str, Any]] = figures  # type: ignore[assignment]
    assert [(row["store"], row["urls"]) for row in rows] == [
        ("memcached", 2000), ("memcached", 5000), ("redis", 2000), ("redis", 5000),
        ("redis-cluster", 2000), ("redis-cluster", 5000),
    ]  # fmt: skip
    for row in rows:
        assert row["claims_per_s"] > 0 and row["bytes_from_store_per_new_url"] > 0
    assert "B from store" in result.stdout


def test_warc_cost_smoke_run_crawls_with_and_without_warc_and_finds_every_page_stored(
    tmp_path: Path, memcached: object
) -> None:
    result, figures = run_benchmark(
        "warc_cost.py", tmp_path / "warc.json", "--site", "generated", "--pages", "150"
    )

    for run in ("rabbitmq", "redis", "local"):
        assert figures[run]["pages"] == figures[f"{run} --warc"]["pages"] == 150
        assert figures[f"{run} --warc"]["stored_pages"] == 150
        assert figures[f"{run} --warc"]["warc_bytes_per_page"] > 0
    assert "every page fetched with --warc stored, every round: yes" in result.stdout


def test_fault_loops_smoke_run_loses_nothing_through_a_fault(tmp_path: Path) -> None:
    """CI's short version of ``benchmarks/faults.py``: one run of a worker group killed,
    on services of its own.  (The suite has the other faults each a test of its own:
    RabbitMQ's and Redis's restarts in ``tests/test_service_outages.py``; a smoke run of
    three took 69 s.)"""
    faults = ["worker-kill-9"]
    _, figures = run_benchmark(
        "faults.py", tmp_path / "faults.json", *(f"--fault={fault}" for fault in faults),
        "--runs", "1", "--pages", "120",
    )  # fmt: skip

    assert sorted(figures) == sorted(faults)
    for fault in faults:
        assert figures[fault]["runs"] == figures[fault]["ended"] == 1, figures
        assert figures[fault]["never_fetched"] == figures[fault]["missing_from_output"] == 0
        assert figures[fault]["over_promise"] == 0


def test_render_cost_smoke_run_crawls_with_and_without_render(
    tmp_path: Path, memcached: object
) -> None:
    """CI's short version (``--local``, 20 pages: the browser's CPU is the run's, and the
    suite's other processes share the machine); workers render in tests/test_rendering.py."""
    result, figures = run_benchmark(
        "render_cost.py", tmp_path / "render.json", "--pages", "20", "--runs", "local"
    )

    for run in ("local",):
        assert figures[run]["pages"] == figures[f"{run} --render"]["pages"] == 20
        rendered = figures[f"{run} --render"]
        assert rendered["rendered_pages"] == 20 and rendered["browsers_left"] == []
        assert rendered["pages_per_s"] > 0 and rendered["cpu_ms_per_page"] > 0
        assert rendered["peak_memory_mib"] > 0 and rendered["x_plain_cpu_per_page"] > 0
    assert "same pages, every page rendered, no browser left: yes" in result.stdout


def test_render_cost_smoke_run_crawls_the_mixed_site_with_render_auto(tmp_path: Path) -> None:
    """``--render auto`` beside the static crawl on a small mixed site (``--local``, 60
    pages: 54 static, 6 scripted): it reaches the 5 pages only a browser finds, rendering
    far fewer pages than all."""
    result, figures = run_benchmark(
        "render_cost.py", tmp_path / "auto.json", "--site", "mixed", "--modes", "static,auto",
        "--runs", "local", "--pages", "60",
    )  # fmt: skip

    static, auto = figures["local"], figures["local --render auto"]
    assert static["pages"] == 56 and static["rendered_pages"] == 0
    assert auto["pages"] == 61 and auto["browsers_left"] == []
    assert 6 <= auto["rendered_pages"] <= 30  # every app page, few docs pages
    assert auto["x_static_seconds"] > 0 and auto["x_static_cpu"] > 0
    assert "local --render auto: " in result.stdout
    assert "(without --render: all but the 5 script-only ones)" in result.stdout
    assert "no browser left: yes" in result.stdout


def test_median_run_is_the_middle_round_or_the_lower_middle_of_an_even_number() -> None:
    from benchmarks.run import median_run

    rounds = [{"pages_per_s": rate, "round": i} for i, rate in enumerate([30.0, 10.0, 20.0])]
    assert median_run(rounds)["round"] == 2
    assert median_run(rounds[:2])["round"] == 1  # 10 of 10 and 30
    assert median_run([{"messages_per_s": 5.0}]) == {"messages_per_s": 5.0}


def test_render_cost_s_floor_is_the_static_crawl_and_the_needed_renders_at_full_s_price() -> None:
    """The least a ``--render auto`` crawl could cost: each page at the static crawl's
    CPU a page, and each page that needs a browser at what a render added to the full
    crawl's pages (its 110 pages' 12 s less 1.1 s at 10 ms a page: 99.1 ms a render)."""
    from benchmarks.render_cost import floor

    static = {"cpu_seconds": 1.0, "pages": 100}
    full = {"cpu_seconds": 12.0, "pages": 110}
    render_ms, least = floor(static, full, pages=110, needs_browser=10)
    assert render_ms == pytest.approx(99.09, abs=0.01)
    assert least == pytest.approx((1.1 + 0.9909) / 1.0, abs=0.001)


def test_recrawl_smoke_run_reaches_the_full_crawl_s_pages_downloading_less(
    tmp_path: Path, memcached: object
) -> None:
    result, figures = run_benchmark(
        "recrawl.py", tmp_path / "recrawl.json", "--pages", "120", "--runs", "local,rabbitmq"
    )

    for run in ("local", "rabbitmq"):
        full, recrawl = figures[run]["full"], figures[run]["recrawl"]
        assert figures[run]["same_page_set"], figures[run]
        assert full["pages"] == recrawl["pages"] > 100
        assert 0 < recrawl["body_bytes"] < full["body_bytes"]
        assert recrawl["statuses"]["304"] > 0 and "304" not in full["statuses"]
    assert "same page set as the full crawl: yes" in result.stdout


@pytest.mark.serial  # how many requests a host got in one second: no other test's load
def test_polite_pace_smoke_run_crawls_every_host_locally_within_its_rate() -> None:
    """CI's short version of ``benchmarks/polite_pace.py``: 2 hosts of 10 pages at 5
    requests a second each (more pages than a second's worth, so the limit is what
    paces them), ``--local`` only; the workers and Scrapy run in its full run."""
    result = subprocess.run(
        [sys.executable, "benchmarks/polite_pace.py", "--hosts", "2", "--pages", "10",
         "--rate", "5", "--contenders", "local"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    runs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [run["contender"] for run in runs] == ["local"]
    (run,) = runs
    assert run["pages"] == run["expected_pages"] == 20 and run["fewest_pages_of_a_host"] == 10
    assert run["duplicates"] == 0 and run["cpu_ms_per_page"] > 0
    assert run["max_page_requests_per_s"] <= run["bound_per_s"] == 6 and run["rate_held"]
    assert run["seconds"] >= 1.5  # 10 pages at 5 a second: 1.8 s apart, a bucket's slack
    assert re.search(r"^local +[\d.]+ +[\d.]+ +[\d.]+ +20 +0 +- +\d+ +\d+ +yes$",
                     result.stdout, re.MULTILINE), result.stdout  # fmt: skip


def test_server_pace_smoke_run_crawls_every_page_of_both_servers_locally(tmp_path: Path) -> None:
    """CI's short version of ``benchmarks/server_pace.py``: 40 pages, ``--local`` only,
    against the server that answers 429 and the one that slows under load; the workers
    and Scrapy with AutoThrottle run in its full run.  No pace is asserted (the tests of
    ``tests/test_server_pace.py`` do): every part runs and reports."""
    result, figures = run_benchmark(
        "server_pace.py", tmp_path / "server_pace.json", "--pages", "40", "--contenders",
        "local", timeout=120,
    )  # fmt: skip

    assert sorted(figures) == ["defending", "loaded"]
    for server in ("defending", "loaded"):
        run = figures[server]["local"]
        assert run["exit"] == 0 and run["pages"] == run["expected_pages"] == 40
        assert run["duplicates"] == 0 and run["requests"] >= 41  # robots.txt too
        assert run["cpu_ms_per_page"] > 0 and run["seconds"] > 0
    assert figures["defending"]["local"]["refused"] >= 0
    assert 0 <= figures["defending"]["local"]["refused_share_after_settling"] <= 1
    assert figures["loaded"]["local"]["peak_in_flight"] >= 1
    assert figures["loaded"]["local"]["median_answer_ms"] >= 5.0
    for server in ("defending", "loaded"):
        assert re.search(rf"^{server} +local +[\d.]+ +40/40 +\d+ ", result.stdout, re.M), (
            result.stdout
        )


def test_clean_text_cost_smoke_run_prices_markdown_and_simhash_on_both_docs(
    tmp_path: Path,
) -> None:
    _, figures = run_benchmark("clean_text_cost.py", tmp_path / "clean.json", "--pages", "5")
    for package in ("postgresql-doc-15", "python3.11-doc"):
        assert figures[package]["pages"] == 5
        assert all(figures[package][step]["mean_ms"] > 0 for step in ("main_content", "simhash"))


def test_the_benchmarks_count_the_cpu_of_their_own_redis_and_memcached_only(
    memcached: object, tmp_path: Path
) -> None:
    """``service_pids`` names the servers listening on the session's own ports, not
    every ``redis-server`` or ``memcached`` of the machine: one more of each, started
    here, is not among them."""
    import os

    from benchmarks.measuring.accounting import listening_pids, service_pids
    from tests.support import MemcachedProcess, RedisProcess

    other_redis, other_memcached = RedisProcess(tmp_path), MemcachedProcess(memory_mb=8)
    try:
        pids = service_pids()
        assert other_redis.process is not None and other_memcached.process is not None
        for name, program, other in (
            ("redis", b"redis-server", other_redis.process),
            ("memcached", b"memcached", other_memcached.process),
        ):
            assert len(pids[name]) == 1 and other.pid not in pids[name], (name, pids)
            assert Path(f"/proc/{pids[name][0]}/cmdline").read_bytes().startswith(program)
        port = int(os.environ["MEMCACHED_SERVERS"].rsplit(":", 1)[1])
        assert listening_pids(port) == pids["memcached"]
    finally:
        other_redis.shut_down()
        other_memcached.stop()
