"""The site every contender crawls: generated HTML pages, served on 127.0.0.1."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from scripts.services import apt_install


def write_site(directory: Path, base: str, pages: int, links: int) -> None:
    """``pages`` HTML files, each with ``links`` absolute links; page i links to i+1.

    The other links are drawn at random, the same ones on every run.

    Parameters:
      directory(Path): An empty directory; the pages go to ``page/<i>.html`` in it.
      base(str): The address the site is served at, as the links spell it.
      pages(int): How many pages.
      links(int): How many links each page has.
    """
    rng = random.Random(1)
    (directory / "page").mkdir()
    for i in range(pages):
        targets = [(i + 1) % pages] + [rng.randrange(pages) for _ in range(links - 1)]
        anchors = "".join(f'<a href="{base}/page/{t}.html">p{t}</a>\n' for t in targets)
        (directory / "page" / f"{i}.html").write_text(f"<html><body>\n{anchors}</body></html>\n")


class QuietHandler(SimpleHTTPRequestHandler):
    """Python's file handler, keeping connections alive as nginx does, and logging nothing."""

    protocol_version = "HTTP/1.1"  # keep-alive, as nginx

    def log_message(self, format: str, *args: Any) -> None:
        pass


class PathLoggingHandler(QuietHandler):
    """Python's file handler, writing each request's path and status to an access log."""

    access_log: Path
    lock = threading.Lock()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        with self.lock, self.access_log.open("a") as log:
            log.write(f"{time.time():.3f} {self.path.split('?')[0]} {int(code)}\n")


def access_entry(line: str) -> tuple[float | None, str, str]:
    """One line of the access log: when it was written (seconds since the epoch, None in
    the older ``path status`` lines), the path and the status.

    The status is the last field, the path the one before: ``$msec $uri $status`` and
    ``$uri $status`` lines both read so.
    """
    head, _, status = line.rstrip("\n").rpartition(" ")
    msec, _, path = head.partition(" ")
    try:
        return float(msec), path, status
    except ValueError:  # no time first: a ``$uri $status`` line
        return None, head, status


def served(access_log: Path) -> Counter[str]:
    """How many times each path was served with status 200, read from ``access_log``."""
    counts: Counter[str] = Counter()
    with access_log.open() as log:
        for line in log:
            _, path, status = access_entry(line)
            if status == "200":
                counts[path] += 1
    return counts


#: What nginx says each file is: its own table when installed with one, else HTML only.
MIME_TYPES = (
    "include /etc/nginx/mime.types; default_type application/octet-stream;"
    if Path("/etc/nginx/mime.types").exists()
    else "types { text/html html; }"
)


@contextmanager
def serve(
    directory: Path,
    port: int,
    access_log: Path | None = None,
    state: Path | None = None,
    *,
    log_format: str = "$msec $uri $status",
    limit_rate: str | None = None,
) -> Iterator[str]:
    """nginx (it is not the bottleneck; installed with apt-get when missing, if this runs
    as root), else Python's threaded server.

    nginx writes its configuration, pid file (``nginx.pid``) and error log in ``state``
    (by default next to ``directory``). Yields which server it is, ``"nginx"`` or
    ``"python http.server"``, once it accepts connections; stops it on exit.

    Parameters:
      directory(Path): The site's files, served from ``/``.
      port(int): The port to listen on, on 127.0.0.1.
      access_log(Path): Where to write each request's time (``$msec``: seconds since
        the epoch, to the millisecond, as it ends), path and status, one per line (none
        when None); :func:`served` and :func:`access_entry` read it.
      state(Path): A directory for nginx's own files.
      log_format(str): nginx's access log line; its first three fields are those
        :func:`access_entry` reads.
      limit_rate(str): nginx's ``limit_rate`` for each answer (nginx only), when given.
    """
    nginx = shutil.which("nginx")
    if nginx is None:  # installed when it can be, as the docs are: figures need it
        apt_install("nginx")
        nginx = shutil.which("nginx")
    if nginx:
        state = state or directory.parent
        conf = state / "nginx.conf"
        logging = f"access_log {access_log} paths;" if access_log else "access_log off;"
        limit = f" limit_rate {limit_rate};" if limit_rate else ""
        conf.write_text(
            f"daemon off; worker_processes 1; pid {state}/nginx.pid;"
            f"error_log {state}/nginx-error.log;"
            "events { worker_connections 1024; }"
            f"http {{ log_format paths '{log_format}'; {logging}"
            f" keepalive_requests 100000;{limit} {MIME_TYPES}"
            f" server {{ listen 127.0.0.1:{port}; root {directory}; }} }}"
        )
        process = subprocess.Popen([nginx, "-c", str(conf), "-p", str(state)])
        kind = "nginx"
    else:
        if access_log:
            handler_class = type("Handler", (PathLoggingHandler,), {"access_log": access_log})
            handler = partial(handler_class, directory=str(directory))
        else:
            handler = partial(QuietHandler, directory=str(directory))
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        kind = "python http.server"
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the site server did not start"
            time.sleep(0.05)
    try:
        yield kind
    finally:
        if nginx:
            process.terminate()
            process.wait()
        else:
            server.shutdown()
            server.server_close()
