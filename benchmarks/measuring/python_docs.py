"""A real site nobody here wrote: the Python 3 documentation of Debian's ``python3-doc``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

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
    if directory is not None or not install:
        return directory
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    print(f"installing {PACKAGE} with apt-get (the benchmark's real site)", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = subprocess.DEVNULL
    if subprocess.run(["apt-get", "install", "-y", PACKAGE], env=env, stdout=quiet).returncode:
        subprocess.run(["apt-get", "update"], env=env, stdout=quiet)
        subprocess.run(["apt-get", "install", "-y", PACKAGE], env=env, stdout=quiet)
    return _installed()
