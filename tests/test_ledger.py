"""The waiting seeder's ledger: the crawl's messages and written URLs on disk."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from crawler.tracking.ledger import Ledger


@pytest.mark.parametrize("spill_at", [0, 100], ids=["on disk", "in memory"])
def test_a_crawl_is_pending_until_every_expected_message_ended_in_any_order(
    tmp_path: Path, spill_at: int
) -> None:
    seed, child, grandchild = (str(uuid.uuid4()) for _ in range(3))
    with Ledger(tmp_path, spill_at=spill_at) as ledger:
        ledger.expect([seed])
        assert ledger.pending == 1
        assert ledger.end(grandchild)  # its record came before its parent's
        assert ledger.pending == 1
        assert ledger.end(seed)
        ledger.expect([child, child])  # named twice: expected once
        assert ledger.pending == 1 and ledger.expected == 2
        assert not ledger.end(seed)  # a copy of a record counts once
        assert ledger.end(child)
        ledger.expect([grandchild])  # ended already
        assert ledger.pending == 0 and ledger.expected == 3
        assert ledger.on_disk == (spill_at == 0)


def test_a_url_is_written_once_and_ids_that_are_no_uuids_are_kept_too(tmp_path: Path) -> None:
    with Ledger(tmp_path, spill_at=0) as ledger:
        assert ledger.first_write("http://a.test/")
        assert not ledger.first_write("http://a.test/")
        assert ledger.first_write("http://a.test/b")
        ledger.expect(["not-a-uuid"])
        ledger.flush()
        assert ledger.end("not-a-uuid") and ledger.pending == 0


def test_keys_move_to_disk_past_the_bound_and_the_file_is_gone_once_closed(
    tmp_path: Path,
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(10)]
    ledger = Ledger(tmp_path, spill_at=6)
    ledger.expect(ids[:5])
    assert not ledger.on_disk and not list(tmp_path.iterdir())
    ledger.expect(ids[5:])  # past 6 keys: every key moves to SQLite
    assert ledger.on_disk and list(tmp_path.rglob("ledger.db"))
    for message_id in ids:
        assert ledger.end(message_id)
        assert not ledger.end(message_id)
    assert ledger.pending == 0 and ledger.expected == 10
    ledger.close()
    assert not list(tmp_path.iterdir())
