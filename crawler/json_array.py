"""A file holding one JSON array (``-o FILE.json``, ``--records FILE.json``), valid JSON
after every write: a crawl killed at any moment leaves an array a JSON parser reads.

The file is ``[``, then each value on a line of its own (strict JSON has no raw newline
in a value), separated by ``,``, then ``]`` on the last line.  A write puts its values
where that last ``]`` was, and a new ``]`` after them, in one ``pwrite`` at that offset:
before it the file ends with the array as it was, after it with the values added.  A
file carried on (``--state``) is added to: its last ``]`` written over by the next
values, still one array; one that a kill or a power cut left without its ``]`` is cut
after its last whole value and closed again first.  A file made anew is written beside
its path and renamed onto it, so that it is never seen empty.  (A reader that reads while
a write goes on can still catch that write half done, as with any file being added to.)
"""

from __future__ import annotations

import os
from pathlib import Path

from crawler.atomic_write import write_atomically

#: What ends the file: the array's closing bracket on a line of its own.
END = b"\n]\n"


class NotAnArray(ValueError):
    """A file to carry on that holds no JSON array of this module's."""


class JsonArrayFile:
    """One JSON array in a file, whole after every :meth:`write` (not thread-safe: its
    callers hold a lock).

    Parameters:
      path(Path): The file, made anew (``[`` and ``]``, an empty array, at once).
      append(bool): Add to the array the file holds instead, if it exists and is not
        empty (:class:`NotAnArray` when it holds something else).
    """

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        carried_on = append and path.exists() and path.stat().st_size > 0
        regular = not path.exists() or path.is_file()  # not a device, which is written in place
        if not carried_on and regular:
            # renamed onto the path: never seen empty; a missing directory is the user's
            write_atomically(path, b"[" + END, make_directory=False)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            if carried_on:
                self._end, self._empty = _array_end(self._fd, path)
                self._put(END, self._end)
            else:
                self._end, self._empty = 1, True
                if not regular:
                    self._put(b"[" + END, 0)
        except BaseException:
            os.close(self._fd)
            raise

    def write(self, values: list[str]) -> None:
        """Add ``values`` (each a JSON text without a newline) to the array."""
        if not values:
            return
        body = ("\n" if self._empty else ",\n") + ",\n".join(values)
        data = body.encode("utf-8")
        self._put(data + END, self._end)
        self._end += len(data)
        self._empty = False

    def _put(self, data: bytes, offset: int) -> None:
        """``data`` written at ``offset``, the file cut after it; one ``pwrite`` but for
        a write the kernel cuts short."""
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], offset + written)
        os.ftruncate(self._fd, offset + len(data))

    def close(self) -> None:
        if self._fd != -1:
            fd, self._fd = self._fd, -1
            os.close(fd)


def _array_end(fd: int, path: Path) -> tuple[int, bool]:
    """Where the array of a file carried on ends (the offset of the newline before its
    closing ``]``), and whether it is empty; a file cut short is cut after its last
    whole value first."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, 64, 0).lstrip()
    if not head.startswith(b"["):
        raise NotAnArray(f"{str(path)!r} holds no JSON array: give -o a file of its own")
    tail_start = max(0, size - 65536)
    tail = os.pread(fd, size - tail_start, tail_start)
    stripped = tail.rstrip()
    if stripped[stripped.rfind(b"\n") + 1 :].strip() == b"]":  # closed
        end = tail_start + len(stripped[:-1].rstrip())
    else:  # cut short: keep its whole lines, the last without its comma
        newline = tail.rfind(b"\n")
        if newline == -1:
            raise NotAnArray(f"{str(path)!r}: its last value is longer than 64 KiB and cut short")
        whole = tail[:newline].rstrip()
        end = tail_start + len(whole[:-1] if whole.endswith(b",") else whole)
    before = os.pread(fd, 1, end - 1) if end > 0 else b""
    return end, before == b"["
