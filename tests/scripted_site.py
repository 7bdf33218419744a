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


def mixed_site(site: SiteServer, static: int = 360, scripted_pages: int = 40) -> list[str]:
    """Fill ``site`` with a mostly static site and a section built by script:
    ``/`` links to ``static`` pages ``/docs/N.html`` and to ``/app/0.html``; each docs
    page links to ``/`` and to the next one in its HTML (and runs a script that adds
    none); the section's first page, ``/app/0.html``, links to the other
    ``scripted_pages - 1`` only by script, once loaded, and each of those links back to
    it by script; all link to ``/`` in their HTML.  Returns every page's path: what a
    crawl that renders every page reaches, of which one that renders none misses all
    app pages but the first."""
    docs = [f"/docs/{i}.html" for i in range(static)]
    apps = [f"/app/{i}.html" for i in range(scripted_pages)]
    site.pages["/"] = Page(
        b"<html><body><h1>Index</h1>"
        + b"".join(f'<a href="{path}">{path}</a> '.encode() for path in [*docs, apps[0]])
        + b"</body></html>"
    )
    counter = b"<script>window.visits = (window.visits || 0) + 1;</script>"
    for i, path in enumerate(docs):
        site.pages[path] = Page(
            b"<html><head>" + counter + b"</head><body><p>Docs page.</p>"
            + f'<a href="/">home</a> <a href="{docs[(i + 1) % static]}">next</a>'.encode()
            + b"</body></html>"
        )  # fmt: skip
    for i, path in enumerate(apps):
        added = "".join(f"add('{other}');" for other in (apps[1:] if i == 0 else apps[:1]))
        site.pages[path] = Page(
            b"<html><head><script>" + _ADD + b"</script></head><body><p>App.</p>"
            b'<a href="/">home</a><script>window.addEventListener("load", () => {'
            + added.encode() + b"});</script></body></html>"
        )  # fmt: skip
    return ["/", *docs, *apps]
