"""Usage errors that point to the fix: the closest option, the scheme left out."""

from __future__ import annotations

import pytest

from crawler import cli, command


def error_of(parse: object, args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        parse(args)  # type: ignore[operator]
    assert exited.value.code == 2
    return capsys.readouterr().err.splitlines()[0]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (
            ["crawl", "http://127.0.0.1/", "--max-page", "3"],
            "--max-page 3 (did you mean --max-pages?)",
        ),
        (["crawl", "http://127.0.0.1/", "-O", "x"], "-O x (did you mean -o?)"),
        (["crawl", "example.com/docs"], "(did you mean 'https://example.com/docs'?)"),
        (["crawl", "localhost:8000/"], "(did you mean 'https://localhost:8000/'?)"),
    ],
)
def test_crawler_crawl_says_what_was_meant(
    args: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert error_of(command.parser().parse_args, args, capsys).endswith(hint)


def test_no_hint_where_nothing_is_close(capsys: pytest.CaptureFixture[str]) -> None:
    said = error_of(command.parser().parse_args, ["crawl", "mailto:a@b.c", "--zzzz"], capsys)
    assert "did you mean" not in said
    said = error_of(cli.parser().parse_args, ["http://127.0.0.1/", "--max-dept", "2"], capsys)
    assert said.endswith("(did you mean --max-depth?)")
