"""``--handler`` finds a module where the user is, as ``dramatiq`` finds actors: the
documented commands work as written from the repository root, and a module in the
current directory is found by ``crawler crawl``, ``--local`` and ``crawler worker``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.site_server import SiteServer, generate_site, page_path
from tests.workers import PROJECT_ROOT, environment

CRAWLER = str(Path(sys.executable).parent / "crawler")
MINE = 'def where(page):\n    return {"found_at": page.url}\n'


def console(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``crawler`` console script, as a user runs it: nothing on PYTHONPATH."""
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    command = [CRAWLER, *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def data_of(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line)["data"] for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(
    "handler", ["examples.titles:title_and_description", "examples.search_text:page_text"]
)
def test_the_documented_local_handler_commands_work_from_the_repository_root(
    site: SiteServer, handler: str
) -> None:
    site.pages.update(generate_site(site.base_url, pages=3, links_per_page=2))
    url = site.url(page_path(0))
    crawled = console(
        environment(), PROJECT_ROOT, "crawl", "--local", url, "--handler", handler, "--records", "-"
    )
    assert crawled.returncode == 0, crawled.stderr[-2000:]
    data = data_of(crawled.stdout)
    assert len(data) == 3 and all(isinstance(d, dict) and d for d in data)


def test_a_handler_module_in_the_current_directory_is_found_by_a_local_crawl(
    site: SiteServer, tmp_path: Path
) -> None:
    (tmp_path / "mine.py").write_text(MINE)
    site.pages.update(generate_site(site.base_url, pages=2, links_per_page=1))
    url = site.url(page_path(0))
    crawled = console(
        environment(),
        tmp_path,
        "crawl",
        "--local",
        url,
        "--handler",
        "mine:where",
        "--records",
        "-",
    )
    assert crawled.returncode == 0, crawled.stderr[-2000:]
    assert sorted(str(d["found_at"]) for d in data_of(crawled.stdout)) == sorted(
        site.url(page_path(i)) for i in range(2)
    )
    elsewhere = console(
        environment(), PROJECT_ROOT, "crawl", "--local", url, "--handler", "mine:where"
    )
    assert elsewhere.returncode == 2
    assert "--handler mine:where: cannot import 'mine'" in elsewhere.stderr


def test_crawler_worker_loads_a_handler_from_the_current_directory(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    (tmp_path / "mine.py").write_text(MINE)
    site.pages.update(generate_site(site.base_url, pages=2, links_per_page=1))
    env = environment(**rabbitmq_env)
    env.pop("PYTHONPATH", None)
    worker = subprocess.Popen(
        [CRAWLER, "worker", "-p", "1", "-t", "2", "--handler", "mine:where"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url = site.url(page_path(0))
        crawled = console(
            env,
            tmp_path,
            "crawl",
            "--workers",
            url,
            "--handler",
            "mine:where",
            "--wait",
            "--records",
            "-",
        )
    finally:
        os.killpg(worker.pid, 15)
        output, _ = worker.communicate(timeout=30)
    assert crawled.returncode == 0, crawled.stderr[-2000:] + output[-2000:]
    assert len(data_of(crawled.stdout)) == 2
    assert "cannot import" not in output


def test_an_actor_declared_by_a_handler_s_module_is_on_the_worker_s_broker(
    redis_env: dict[str, str],
) -> None:
    env = environment(**redis_env, CRAWLER_HANDLERS="tests.actor_handler:hand_on")
    check = (
        "from crawler import example; from tests import actor_handler;"
        "print(actor_handler.slow_work.broker is example.broker, type(example.broker).__name__)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", check], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split() == ["True", "PromptRedisBroker"]
