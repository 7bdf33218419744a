"""Seeds from a file or standard input: ``-i FILE`` / ``-i -``, as ``wget -i``.

One URL a line; blank lines and lines starting with ``#`` are skipped, and a UTF-8
byte-order mark before the first line.  The whole input is checked before anything is
sent: every bad line is refused with its line number (the first :data:`SHOWN` of them).
Nothing holds the URLs in memory: a file is read twice (checked, then sent), standard
input is copied to a temporary file while it is checked.  A file must be a regular
one (a FIFO or a device could be waited on, or read, for ever: standard input is
``-``), and a line longer than :data:`MAX_LINE` bytes is refused, not read whole.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import IO

from crawler.local_files import InputError, NotRegularFile, bounded_lines, open_input

#: Bad lines named at most in the refusal: past them, how many more.
SHOWN = 5
#: The longest line read, in bytes: a URL is rarely above 2,000, and a file with no
#: line ending (say, a disk image given by mistake) is refused at this length.
MAX_LINE = 65_536


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
            self._copy = self._standard_input()
        self.count = self._checked()

    def _standard_input(self) -> IO[bytes]:
        """Standard input copied to a temporary file, its lines' lengths checked."""
        if sys.stdin is None:  # started with it closed (<&-)
            raise SeedFileError("-i -: standard input is closed")
        copy = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            for _, line in self._bounded(sys.stdin.buffer):
                copy.write(line)
        except BaseException:
            copy.close()
            raise
        return copy

    def _lines(self) -> Iterator[tuple[int, str]]:
        with contextlib.ExitStack() as closing:
            if self._copy is not None:
                self._copy.seek(0)
                file = self._copy
            else:
                file = closing.enter_context(self._opened())
            for number, raw in self._bounded(file):
                yield number, raw.decode("utf-8", errors="replace")

    def _opened(self) -> IO[bytes]:
        try:
            return open_input(self.name)
        except NotRegularFile as e:  # <(command), say: read it as standard input
            raise SeedFileError(f"-i {self.name}: {e}; pipe it to -i - instead") from e
        except InputError as e:
            raise SeedFileError(f"-i {self.name}: {e}") from e

    def _bounded(self, file: IO[bytes]) -> Iterator[tuple[int, bytes]]:
        """``file``'s numbered lines, no longer than :data:`MAX_LINE`: else SeedFileError."""
        try:
            yield from bounded_lines(file, MAX_LINE)
        except InputError as e:
            raise SeedFileError(f"-i {self.name}: {e}") from e
        except OSError as e:  # a read that failed (EIO; standard input opened to write)
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
