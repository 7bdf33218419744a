"""A file written whole or not at all: :func:`write_atomically`."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, make_directory: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path`` (its directory made when
    missing, with ``make_directory``; else FileNotFoundError), then rename it into
    place: a reader, or a crawl killed mid-write, never finds half a file, and processes
    on one machine may write the same directory (the temporary file is named by the
    process and thread)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.part")
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    except FileNotFoundError:
        if not make_directory:
            raise
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
        finally:
            os.close(handle)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
