"""Real sites nobody here wrote, from Debian's documentation packages, served as they
are installed:

* ``python-docs``: the Python 3 documentation (``python3-doc``): about 500 pages of
  some 90 KiB and 300 links each, heavy pages where parsing counts;
* ``postgresql-docs``: the PostgreSQL 15 documentation (``postgresql-doc-15``): about
  1,170 pages of some 13 KiB and 22 links each, light pages where the cost of each
  page's round trips counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scripts.services import apt_install


@dataclass(frozen=True)
class RealSite:
    """A documentation package and where its HTML lands (``index.html`` is the seed).

    Parameters:
      package(str): The Debian package.
      pattern(str): A glob of its ``index.html``; of several matches, the last in order.
    """

    package: str
    pattern: str

    def installed(self) -> Path | None:
        found = sorted({path.resolve() for path in Path("/").glob(self.pattern.lstrip("/"))})
        return found[-1].parent if found else None

    def directory(self, *, install: bool = True) -> Path | None:
        """The HTML directory; installed with apt-get first when missing, if this runs
        as root where apt-get exists (and says so); None when it cannot be had."""
        directory = self.installed()
        if directory is None and install:
            apt_install(self.package)
            directory = self.installed()
        return directory


SITES = {
    "python-docs": RealSite("python3-doc", "/usr/share/doc/python3*/html/index.html"),
    "postgresql-docs": RealSite(
        "postgresql-doc-15", "/usr/share/doc/postgresql-doc-15/html/index.html"
    ),
}
#: The Python docs, which most benchmarks and the WARC test read.
PYTHON_DOCS = SITES["python-docs"]
#: Its package's name, for the messages of those that find it missing.
PACKAGE = PYTHON_DOCS.package


def docs_directory(*, install: bool = True) -> Path | None:
    """The Python docs' HTML directory (see :meth:`RealSite.directory`)."""
    return PYTHON_DOCS.directory(install=install)
