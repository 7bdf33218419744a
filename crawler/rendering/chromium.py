"""Which Chromium ``--render`` drives, and whether this machine can render at all.

The browser is the system's: ``CRAWLER_CHROMIUM`` names its executable, else the first
of :data:`NAMES` on the ``PATH`` (Debian's ``chromium`` package installs
``/usr/bin/chromium``), else one that ``playwright install chromium`` downloaded.
No browser is downloaded here.  The driver is Playwright's (``pip install
'crawler[render]'``).  ``CRAWLER_CHROMIUM_ARGS`` adds switches to the command line it is
launched with (:func:`arguments`), after the crawler's own (:data:`SWITCHES`).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from pathlib import Path

#: Executables tried on the ``PATH``, in order, when ``CRAWLER_CHROMIUM`` is not set.
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: How to get what rendering needs, for the one-line refusal.
HOW = (
    "install Chromium (Debian: 'apt-get install chromium') or name it in CRAWLER_CHROMIUM,"
    " and Playwright ('pip install crawler[render]')"
)


#: Switches the crawler always launches Chromium with: no shared workers, whose requests
#: no route of Playwright's sees (a dedicated worker's pass the page's route), and no
#: WebRTC over UDP, whose packets (STUN, to any address) no route sees either.
SWITCHES = (
    "--disable-dev-shm-usage",
    "--disable-shared-workers",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
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


def arguments() -> list[str]:
    """The switches to launch Chromium with: :data:`SWITCHES`, then
    ``CRAWLER_CHROMIUM_ARGS`` split as a shell splits words (the tests turn Chromium's
    own private-network checks off with it, so that the crawler's are what is tested);
    :class:`CannotRender` when that is not a list of switches."""
    value = os.environ.get("CRAWLER_CHROMIUM_ARGS", "")
    try:
        extra = shlex.split(value)
    except ValueError as e:
        raise CannotRender(f"CRAWLER_CHROMIUM_ARGS: {e} in {value!r}") from None
    for word in extra:
        if not word.startswith("--") or word.startswith("--remote-debugging"):
            raise CannotRender(
                f"CRAWLER_CHROMIUM_ARGS: {word!r} is not a switch the crawler may pass to Chromium"
            )
    return [*SWITCHES, *extra]


def check() -> str | None:
    """The executable :func:`executable` picks (None: Playwright's download), once it
    is known to exist and ``CRAWLER_CHROMIUM_ARGS`` is well formed (:func:`arguments`);
    else :class:`CannotRender` saying what is missing."""
    arguments()
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
