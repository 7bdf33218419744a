"""The examples run as docs/extracting.md and their docstrings show them: the shop's
router (``examples/shop.py``) crawls the shop of ``tests/shop_site.py`` with the
``crawler`` console script from the repository root, in one process and on workers,
into JSON lines and into PostgreSQL, every variant an item exactly once with the
category its listing passed on; the guide's code is the example's, its SQL runs; and
every example of ``examples/`` is run by some test."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crawler.handlers import load
from tests.postgres_server import PostgresProcess
from tests.shop_site import expected_items, listing_path, shop
from tests.site_server import SiteServer, html
from tests.test_docs import parse_as_the_command_does
from tests.workers import PROJECT_ROOT, environment

CRAWLER = str(Path(sys.executable).parent / "crawler")
HANDLER = "examples.shop:router"
GUIDE = PROJECT_ROOT / "docs" / "extracting.md"
EXAMPLES = PROJECT_ROOT / "examples"


def console(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The ``crawler`` console script run from the repository root as a user runs it:
    nothing on PYTHONPATH."""
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [CRAWLER, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def items_by_sku(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The items of ``--items`` lines by SKU, each SKU asserted to be there once."""
    skus = Counter(line["item"]["sku"] for line in lines)
    assert [sku for sku, n in skus.items() if n > 1] == []
    return {line["item"]["sku"]: line["item"] for line in lines}


def read_items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_shop_router_makes_every_variant_an_item_once_with_its_listing_s_category(
    site: SiteServer, tmp_path: Path
) -> None:
    products = tmp_path / "products.jsonl"
    done = console(environment(), "crawl", "--local", shop(site), "--handler", HANDLER,
                   "--items", str(products))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    expected = expected_items()
    assert "12 pages fetched" in done.stdout and f"{len(expected)} items" in done.stdout
    lines = read_items(products)
    assert items_by_sku(lines) == expected
    assert {line["url"].removeprefix(site.base_url) for line in lines} == {
        f"/product/{slug}/"
        for slug in ("classic-mug", "travel-mug", "espresso-cup", "tea-mug", "camp-mug",
                     "logo-tee", "plain-tee", "long-sleeve")
    }  # fmt: skip
    # Every page fetched once, the second listing page of mugs too (its rel=next link).
    counts = site.fetch_counts()
    assert counts[listing_path("Mugs", 2)] == 1
    assert {path: n for path, n in counts.items() if n != 1} == {}
    assert expected["MUG-TEA-1"]["product"] == "Tea mug, ä l'ancienne"  # text(strip=True)


def test_the_shop_router_writes_rows_into_postgresql_and_the_guide_s_select_reads_them(
    site: SiteServer, postgres: PostgresProcess
) -> None:
    with psycopg.connect(postgres.url, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS products")
    done = console(environment(), "crawl", "--local", shop(site), "--handler", HANDLER,
                   "--items", f"{postgres.url}?table=products")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    expected = expected_items()
    with psycopg.connect(postgres.url) as connection:
        rows = connection.execute('SELECT crawl_id, url, "index", item FROM products').fetchall()
        selected = connection.execute(guide_block("sql", "SELECT")).fetchall()
    assert len(rows) == len(expected)
    assert {row[3]["sku"]: row[3] for row in rows} == expected
    assert len({row[0] for row in rows}) == 1
    assert len({(row[1], row[2]) for row in rows}) == len(expected)
    # What the guide's SELECT gives, in its order, and the first rows it shows.
    assert [(c, s, v, float(p)) for c, s, v, p in selected] == sorted(
        (i["category"], i["sku"], i["variant"], i["price"]) for i in expected.values()
    )
    shown = re.findall(r"^ (\S+) +\| (\S+) +\| (\S+) +\| +(\S+)$", GUIDE.read_text(), re.M)
    assert len(shown) >= 2
    assert shown == [tuple(map(str, row)) for row in selected[: len(shown)]]


def test_workers_run_the_shop_router_and_the_seeder_writes_its_items(
    site: SiteServer, tmp_path: Path, rabbitmq_env: dict[str, str]
) -> None:
    env = {k: v for k, v in environment(**rabbitmq_env).items() if k != "PYTHONPATH"}
    worker = subprocess.Popen(
        [CRAWLER, "worker", "-p", "1", "-t", "4", "--handler", HANDLER],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    products = tmp_path / "products.jsonl"
    try:
        done = console(env, "crawl", "--workers", shop(site), "--handler", HANDLER, "--wait",
                       "--items", str(products))  # fmt: skip
    finally:
        os.killpg(worker.pid, 15)
        output, _ = worker.communicate(timeout=30)
    assert done.returncode == 0, done.stderr[-2000:] + output[-2000:]
    assert f"{len(expected_items())} items" in done.stdout
    assert items_by_sku(read_items(products)) == expected_items()


def test_a_product_linked_plainly_first_is_claimed_so_and_yields_no_items(
    site: SiteServer, tmp_path: Path
) -> None:
    """The guide's first claim: the seed links to a product plainly, so the product
    page is claimed before its listing asks for it labelled, and fetched once, by the
    default handler: no items."""
    shop(site)
    site.pages["/featured.html"] = html(site.url("/"), site.url("/product/travel-mug/"))
    products = tmp_path / "products.jsonl"
    done = console(environment(), "crawl", "--local", site.url("/featured.html"),
                   "--handler", HANDLER, "--items", str(products))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    expected = {sku: item for sku, item in expected_items().items() if sku != "MUG-TR"}
    assert items_by_sku(read_items(products)) == expected
    assert site.fetch_counts()["/product/travel-mug/"] == 1


def guide_block(language: str, starting: str) -> str:
    """The guide's first ``language`` code block that starts with ``starting``."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```", GUIDE.read_text(), re.M | re.S)
    found = [block for block in blocks if block.startswith(starting)]
    assert found, f"no {language} block starting with {starting!r} in {GUIDE}"
    return str(found[0])


PIPELINES = ("examples.shop_pipelines:at_least_ten", "examples.shop_pipelines:InCents")


def test_the_shop_s_items_pass_through_the_pipelines_the_guide_shows(
    site: SiteServer, tmp_path: Path
) -> None:
    products = tmp_path / "products.jsonl"
    done = console(
        environment(), "crawl", "--local", shop(site), "--handler", HANDLER,
        *(f"--pipeline={name}" for name in PIPELINES), "--items", str(products),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    expected = expected_items()
    kept = {
        sku: {**{k: v for k, v in item.items() if k != "price"}, "price_cents": round(
            float(str(item["price"])) * 100)}
        for sku, item in expected.items()
        if float(str(item["price"])) >= 10
    }  # fmt: skip
    assert items_by_sku(read_items(products)) == kept
    said = f"{len(kept)} items, {len(expected) - len(kept)} items dropped"
    assert said in done.stdout, done.stdout
    assert said in GUIDE.read_text()  # the guide's summary is this crawl's
    code = guide_block("python", "from typing import Any\n\nfrom crawler import DropItem")
    assert code in (EXAMPLES / "shop_pipelines.py").read_text()  # the guide's is the example's


def test_the_guide_shows_the_example_s_code_as_it_is() -> None:
    code = guide_block("python", "from typing import Any")
    assert len(code.splitlines()) > 30
    assert code in (EXAMPLES / "shop.py").read_text()


def example_modules() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", example_modules())
def test_every_example_s_documented_commands_parse_and_name_a_handler_it_has(
    module: str,
) -> None:
    """The ``crawler`` commands of each example's docstring parse as the command parses
    them, and the handlers they name load."""
    source = (EXAMPLES / f"{module}.py").read_text()
    docstring = ast.get_docstring(ast.parse(source)) or ""
    lines = re.sub(r"\\\n\s*", " ", docstring).splitlines()
    commands = [line.strip() for line in lines if line.strip().startswith("crawler ")]
    commands += re.findall(r"``(crawler [^`]+)``", docstring)
    assert commands, f"examples/{module}.py shows no crawler command"
    for command in commands:
        assert parse_as_the_command_does(command) is None, command
    handlers = set(re.findall(rf"--(?:handler|pipeline) (examples\.{module}:\w+)", docstring))
    assert handlers
    for handler in handlers:
        assert callable(load(handler))


def test_every_example_is_run_by_a_test() -> None:
    """Each module of examples/ is named as a handler (``examples.NAME:``) by a test
    that crawls with it."""
    tests = [p.read_text() for p in Path(__file__).parent.glob("test_*.py")]
    crawled = [
        module
        for module in example_modules()
        if any(f'"examples.{module}:' in text and "--handler" in text for text in tests)
    ]
    assert crawled == example_modules()
