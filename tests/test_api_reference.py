"""docs/api.md is the Python API's reference as its docstrings say it today
(``python scripts/api_reference.py > docs/api.md`` makes it)."""

from __future__ import annotations

import subprocess
import sys

from tests.workers import PROJECT_ROOT


def test_the_api_reference_is_made_from_today_s_docstrings() -> None:
    made = subprocess.run(
        [sys.executable, "scripts/api_reference.py"], cwd=PROJECT_ROOT, capture_output=True,
        text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    written = (PROJECT_ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert made == written, (
        "docs/api.md is out of date: python scripts/api_reference.py > docs/api.md"
    )
    for name in ("crawler.Crawl", "crawler.seed", "crawler.Router", "crawler.DropItem", "Stage"):
        assert f"### `{name}" in written or f"`crawler.pipeline.stage.{name}`" in written, name
    assert "| `max_pages` |" in written and "| `no_parent` |" in written
