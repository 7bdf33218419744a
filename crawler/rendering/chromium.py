"""Which Chromium ``--render`` drives, and whether this machine can render at all.

The browser is the system's: ``CRAWLER_CHROMIUM`` names its executable, else the first
of :data:`NAMES` on the ``PATH`` (Debian's ``chromium`` package installs
``/usr/bin/chromium``), else one that ``playwright install chromium`` downloaded.
No browser is downloaded here.  The driver is Playwright's (``pip install
'crawler[render]'``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

#: Executables tried on the ``PATH``, in order, when ``CRAWLER_CHROMIUM`` is not set.
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: How to get what rendering needs, for the one-line refusal.
HOW = (
    "install Chromium (Debian: 'apt-get install chromium') or name it in CRAWLER_CHROMIUM,"
    " and Playwright ('pip install crawler[render]')"
)


class CannotRender(RuntimeError):
    """This machine has no Chromium or no Playwright: what is missing, in one line."""


def executable() -> str | None:
    """The Chromium to launch: ``CRAWLER_CHROMIUM``, else one of :data:`NAMES` on the
    ``PATH``; None: Playwright's own download, when there is one (:func:`check`)."""
    named = os.environ.get("CRAWLER_CHROMIUM")
    if named:
        return named
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def check() -> str | None:
    """The executable :func:`executable` picks (None: Playwright's download), once it
    is known to exist; else :class:`CannotRender` saying what is missing."""
    if importlib.util.find_spec("playwright") is None:
        raise CannotRender(f"--render needs Playwright, which is not installed: {HOW}")
    named = executable()
    if named is not None:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise CannotRender(f"--render: the Chromium {named!r} is not an executable: {HOW}")
        return named
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:  # where `playwright install chromium` puts it
        downloaded = playwright.chromium.executable_path
    if not Path(downloaded).is_file():
        raise CannotRender(f"--render needs Chromium, and none was found: {HOW}")
    return None
