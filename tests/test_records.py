"""A record's fields are typed (:class:`crawler.records.PageRecord`): mypy, as the
project runs it, refuses a misspelled field, read with a subscript or with ``get``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_option_table import mypy_on
from tests.workers import PROJECT_ROOT

READS = """
from crawler.records import PageRecord


def outcome_of(record: PageRecord) -> str:
    return record["outcome"]


def items_of(record: PageRecord) -> int:
    return len(record.get("items") or [])


def misspelled(record: PageRecord) -> object:
    return record["outcom"]


def misspelled_with_get(record: PageRecord) -> object:
    return record.get("outcom")
"""


def test_mypy_refuses_a_misspelled_field_of_a_record_and_takes_a_right_one(
    tmp_path: Path,
) -> None:
    checked = mypy_on(tmp_path, READS, config=PROJECT_ROOT / "pyproject.toml")

    assert checked.returncode == 1, checked.stdout
    misspelled = [n for n, line in enumerate(READS.splitlines(), 1) if '"outcom"' in line]
    errors = re.findall(r"users_program_\w+\.py:(\d+): error: (.*)", checked.stdout)
    assert errors == [
        (str(n), 'TypedDict "PageRecord" has no key "outcom"  [typeddict-item]') for n in misspelled
    ], checked.stdout
    assert len(misspelled) == 2
    assert 'Did you mean "outcome"?' in checked.stdout
