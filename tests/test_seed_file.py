"""``-i FILE`` / ``-i -``: seeds a line each, checked whole before anything is sent."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from crawler.option_rules import canonical_http_url
from crawler.seed_file import SeedFile, SeedFileError


def url(text: str) -> str:
    try:
        return canonical_http_url(text)
    except ValueError as e:
        raise ValueError(f"{text!r} {e}") from e


def test_a_seed_file_skips_comments_and_blank_lines_and_reads_again(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# my seeds\nhttp://127.0.0.1:1/a.html\n\n  http://127.0.0.1:1/b.html  \n")
    read = SeedFile(str(seeds), url)
    assert read.count == 2
    assert list(read) == list(read) == ["http://127.0.0.1:1/a.html", "http://127.0.0.1:1/b.html"]


def test_bad_lines_are_refused_with_their_numbers_before_any_is_read(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    lines = ["http://127.0.0.1:1/a.html", "example.com/x", "", "ftp://h/", *["nope"] * 6]
    seeds.write_text("\n".join(lines) + "\n")
    with pytest.raises(SeedFileError) as refused:
        SeedFile(str(seeds), url)
    said = str(refused.value)
    assert said.startswith(f"-i {seeds}: line 2: 'example.com/x' is not an http")
    assert "line 4: 'ftp://h/' is not an http" in said and "(and 3 more)" in said
    assert "\n" not in said
    with pytest.raises(SeedFileError, match="No such file"):
        SeedFile(str(tmp_path / "none.txt"), url)
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(SeedFileError, match="no URL in it"):
        SeedFile(str(tmp_path / "empty.txt"), url)


def test_standard_input_is_read_once_and_kept_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"http://127.0.0.1:1/a.html\nhttp://127.0.0.1:1/b.html\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    read = SeedFile("-", url)
    try:
        assert read.count == 2 and list(read) == list(read)
        assert len(list(read)) == 2
    finally:
        read.close()
