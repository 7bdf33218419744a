"""Seeds from a file or standard input: ``-i FILE`` / ``-i -``, as ``wget -i``.

One URL a line; blank lines and lines starting with ``#`` are skipped.  The whole
input is checked before anything is sent: every bad line is refused with its line
number (the first :data:`SHOWN` of them).  Nothing holds the URLs in memory: a file is
read twice (checked, then sent), standard input is copied to a temporary file while
it is checked.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

#: Bad lines named at most in the refusal: past them, how many more.
SHOWN = 5


class SeedFileError(ValueError):
    """What is wrong with a seed file, one line (with the numbers of its bad lines)."""


class SeedFile:
    """The URLs of a seed file (``-i``), checked; iterate to read them again.

    Parameters:
      name(str): The file's path, or ``-`` for standard input.
      check(Callable): Turns one line's text into its URL; ValueError when it is none.
    """

    def __init__(self, name: str, check: Callable[[str], str]) -> None:
        self.name = name
        self._check = check
        self._copy: IO[bytes] | None = None
        if name == "-":
            self._copy = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
            shutil.copyfileobj(sys.stdin.buffer, self._copy)
        self.count = self._checked()

    def _lines(self) -> Iterator[tuple[int, str]]:
        if self._copy is not None:
            self._copy.seek(0)
            binary: IO[bytes] = self._copy
            for number, raw in enumerate(binary, 1):
                yield number, raw.decode("utf-8", errors="replace")
            return
        try:
            with Path(self.name).open(encoding="utf-8", errors="replace") as file:
                yield from enumerate(file, 1)
        except OSError as e:
            raise SeedFileError(f"-i {self.name}: {e.strerror or e}") from e

    def _checked(self) -> int:
        """How many URLs the input holds; SeedFileError naming its bad lines."""
        count, bad = 0, 0
        errors: list[str] = []
        for number, line in self._lines():
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            try:
                self._check(text)
            except ValueError as e:
                bad += 1
                if len(errors) < SHOWN:
                    errors.append(f"line {number}: {e}")
                continue
            count += 1
        if errors:
            more = f" (and {bad - len(errors)} more)" if bad > len(errors) else ""
            raise SeedFileError(f"-i {self.name}: {'; '.join(errors)}{more}")
        if count == 0:
            raise SeedFileError(f"-i {self.name}: no URL in it")
        return count

    def __iter__(self) -> Iterator[str]:
        for _, line in self._lines():
            text = line.strip()
            if text and not text.startswith("#"):
                yield self._check(text)

    def close(self) -> None:
        if self._copy is not None:
            self._copy.close()
