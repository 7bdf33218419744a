"""A site whose every link is made by script, for ``--render``'s tests: a crawler that
reads the HTML it fetched finds none; one that renders the pages finds them all."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from scripts.services import apt_install
from tests.site_server import Page, SiteServer

#: The HTML pages of :func:`scripted_site`, all reachable only through scripts.
PAGES = ("/", "/p/1.html", "/p/2.html", "/p/3.html", "/p/4.html", "/p/5.html")

_ADD = (
    b"function add(href) { const a = document.createElement('a'); a.href = href;"
    b" a.textContent = href; document.body.appendChild(a); }\n"
)


def scripted(body: bytes) -> Page:
    return Page(
        b"<html><head><script>" + _ADD + b"</script></head><body>" + body + b"</body></html>"
    )


def scripted_site(site: SiteServer) -> str:
    """Fill ``site``: the seed ``/`` adds a link once loaded (from a script file) and
    another after a 300 ms timer; ``/p/1.html`` writes its link as it is parsed,
    ``/p/2.html`` adds two read from JSON it fetches (one relative to itself); the
    others link back by script.  Returns the seed's URL."""
    site.pages["/"] = Page(
        b"<html><head><script src='/app.js'></script></head><body><p>No links here.</p>"
        b"<img src='/picture.png'></body></html>"
    )
    site.pages["/app.js"] = Page(
        _ADD + b"window.addEventListener('load', () => {\n"
        b"  add('/p/1.html');\n"
        b"  setTimeout(() => add('/p/2.html'), 300);\n"
        b"});\n",
        content_type="text/javascript",
    )
    site.pages["/picture.png"] = Page(b"\x89PNG\r\n\x1a\n", content_type="image/png")
    site.pages["/p/1.html"] = scripted(
        b"<script>document.write('<a href=\"/p/3.html\">3</a>')</script>"
    )
    site.pages["/p/2.html"] = scripted(
        b"<script>fetch('/links.json').then(r => r.json()).then(ls => ls.forEach(add))</script>"
    )
    site.pages["/links.json"] = Page(b'["/p/4.html", "5.html"]', content_type="application/json")
    for path in ("/p/3.html", "/p/4.html", "/p/5.html"):
        site.pages[path] = scripted(b"<script>add('/')</script>")
    return site.url("/")


def chromium() -> str:
    """Debian's Chromium, installed when missing (as Memcached is)."""
    if not shutil.which("chromium"):
        apt_install("chromium")
    found = shutil.which("chromium")
    assert found, "Debian's chromium is needed: apt-get install chromium"
    return found


def processes_marked(mark: str) -> list[int]:
    """The processes whose environment holds ``mark``: a crawl's driver and browser
    (Chromium's every process inherits it) outliving the crawl."""
    found = []
    needle = mark.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "stat").read_text()
        except OSError:
            continue
        if needle in environ and ") Z " not in status:  # a zombie is gone already
            found.append(int(entry.name))
    return found


def wait_until_none_marked(mark: str, timeout: float = 10.0) -> list[int]:
    """Wait until no process carries ``mark``; those still there after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (left := processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
