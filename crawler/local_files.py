"""Files of this machine a crawl reads and writes: its inputs (``-i``, ``--config``,
``--recrawl-from``) opened only when they are regular files and read with bounds, and
its outputs (``-o``, ``--items``) each a file of its own.

A FIFO nobody writes to would be waited on for ever, and a device such as
``/dev/zero`` never ends: an input that is not a regular file is refused in one line
(standard input is given as ``-``, where a command reads it).  A line longer than a
reader's cap, or a file larger than its cap, is refused in one line too, never read
into memory whole.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

#: A UTF-8 byte-order mark, which some editors put first in a text file.
BOM = b"\xef\xbb\xbf"
#: What each kind of file that is not a regular one is called in a refusal.
KINDS = {
    stat.S_IFIFO: "a FIFO (a named or anonymous pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}


class InputError(ValueError):
    """Why an input file cannot be read, one line (without the flag that named it)."""


class NotRegularFile(InputError):
    """The input is a FIFO, a device, a directory or a socket."""


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` open to read, in binary; an :class:`InputError` when it cannot be
    opened, a :class:`NotRegularFile` when it is no regular file (``/dev/null``, empty,
    is taken: ``--config /dev/null`` is a common way to say "no settings").

    It is opened without blocking, then looked at: opening a FIFO to read waits for a
    writer, which may never come."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise InputError(e.strerror or str(e)) from e
    try:
        found = os.fstat(descriptor)
        mode = found.st_mode
        if not stat.S_ISREG(mode) and (found.st_dev, found.st_ino) != _identity(os.devnull):
            kind = KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise NotRegularFile(f"{kind}, not a regular file")
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def read_whole(file: IO[bytes], limit: int) -> bytes:
    """``file``'s bytes, a byte-order mark first dropped; an :class:`InputError` when it
    holds more than ``limit`` bytes (no more than ``limit + 1`` of them read)."""
    data = file.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"larger than {limit:,} bytes")
    return data.removeprefix(BOM)


def bounded_lines(file: IO[bytes], limit: int) -> Iterator[tuple[int, bytes]]:
    """``file``'s lines, numbered from 1, each with its line ending, a byte-order mark
    first dropped; an :class:`InputError` naming the first line longer than ``limit``
    bytes (not counting its ending), of which no more than ``limit + 1`` are read."""
    number = 0
    while line := file.readline(limit + 2):  # the line, its \r\n, and one byte more
        number += 1
        if number == 1:
            line = line.removeprefix(BOM)
        if len(line.rstrip(b"\r\n")) > limit:
            raise InputError(f"line {number} is longer than {limit:,} bytes")
        yield number, line


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether two outputs (``-``: standard output) name one file, which their lines
    would share: the same path, or the same file by other names (a link, ``/dev/stdout``
    for ``-``).  ``/dev/null`` takes any number of writers."""
    if os.fspath(first) == os.fspath(second) == "-":
        return True
    identities = [_identity(name) for name in (first, second)]
    if identities[0] is not None and identities[0] == identities[1]:
        return identities[0] != _identity(os.devnull)
    return _resolved(first) == _resolved(second)


def _identity(name: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The device and inode of the file ``name`` names (``-``: standard output's), if
    it is there."""
    try:
        found = os.fstat(1) if os.fspath(name) == "-" else os.stat(name)
    except (OSError, ValueError):
        return None
    return found.st_dev, found.st_ino


def _resolved(name: str | os.PathLike[str]) -> str:
    return "-" if os.fspath(name) == "-" else str(Path(name).resolve())
