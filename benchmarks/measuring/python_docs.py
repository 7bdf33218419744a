"""A real site nobody here wrote: the Python 3 documentation of Debian's ``python3-doc``."""

from __future__ import annotations

from pathlib import Path

from scripts.services import apt_install

#: The package, and where its HTML lands.
PACKAGE = "python3-doc"
PATTERN = "/usr/share/doc/python3*/html/index.html"


def _installed() -> Path | None:
    found = sorted({path.resolve() for path in Path("/").glob(PATTERN.lstrip("/"))})
    return found[-1].parent if found else None


def docs_directory(*, install: bool = True) -> Path | None:
    """The docs' HTML directory; installed with apt-get first when missing, if this runs
    as root where apt-get exists (and says so); None when it cannot be had."""
    directory = _installed()
    if directory is None and install:
        apt_install(PACKAGE)
        directory = _installed()
    return directory
