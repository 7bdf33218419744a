"""What every whole-crawl benchmark starts: a generated site of its own and a seeder
waiting for the crawl's end (``python -m crawler.example URL --wait``), with a time
limit.  Workers come from :class:`tests.workers.WorkerProcesses` or
:func:`benchmarks.measuring.workers.start_workers`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from tests.site_server import SiteServer, generate_site

#: The project's root, the seeder's working directory.
ROOT = Path(__file__).resolve().parent.parent.parent


@contextmanager
def generated_site(
    pages: int, links_per_page: int = 10, delay: float = 0.0
) -> Iterator[SiteServer]:
    """A site of ``pages`` pages linking to each other, served on 127.0.0.1 until the end."""
    site = SiteServer().start()
    site.pages.update(generate_site(site.base_url, pages=pages, links_per_page=links_per_page))
    site.delay = delay
    try:
        yield site
    finally:
        site.stop()


class WaitingSeeder:
    """``python -m crawler.example URL --wait [arguments]`` in a session of its own, its
    output in files (a pipe nobody reads for minutes fills and stalls it).

    Parameters:
      env(dict): The seeder's environment (the workers').
      url(str): The seed.
      arguments(str): More of the seeder's arguments (``--output FILE``).
    """

    def __init__(self, env: dict[str, str], url: str, *arguments: str) -> None:
        # Files as long-lived as the seeder object: they go with it.
        self._stdout = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crawler.example", url, "--wait", *arguments],
            cwd=ROOT, env=env, stdout=self._stdout, stderr=self._stderr, text=True,
            start_new_session=True,
        )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def crawl_id(self, timeout: float = 30) -> str:
        """The crawl's id, from the seeder's first line (``crawl ID: ...``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            first = self.stdout.split("\n", 1)
            if len(first) == 2:
                return first[0].split()[1]
            if not self.running():
                break
            time.sleep(0.05)
        raise RuntimeError(f"no crawl id from the seeder: {self.stderr[-300:]!r}")

    def finish(self, limit: float) -> float | None:
        """Wait for the seeder's end: the seconds since it started, or None when it was
        still waiting ``limit`` seconds after its start and was killed."""
        try:
            self.process.wait(timeout=max(0.0, self.started + limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        return round(time.monotonic() - self.started, 1)

    def kill(self) -> None:
        if self.running():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def stdout(self) -> str:
        return _read(self._stdout)

    @property
    def stderr(self) -> str:
        return _read(self._stderr)

    def last_line(self, width: int = 200) -> str:
        """The last line of its progress (stderr)."""
        return (self.stderr.strip().splitlines() or [""])[-1][:width]


def _read(file: IO[str]) -> str:
    """What the seeder wrote so far: read at offsets, as its writes move the file's."""
    size = os.fstat(file.fileno()).st_size
    return os.pread(file.fileno(), size, 0).decode(errors="replace")
