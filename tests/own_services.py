"""Services of a test's own, to shut down and restart without touching the shared ones."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, *, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing answered on port {port}"
            time.sleep(0.05)


class RedisProcess:
    """A Redis of the test's own that keeps everything in an append-only file, as a
    production broker would, so a restart brings back what it held.

    Parameters:
      directory(Path): Where its append-only file lives.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port)
        client = redis.Redis.from_url(self.url)
        try:
            deadline = time.monotonic() + 10
            while True:  # a restarted Redis answers LOADING until its file is read
                try:
                    client.ping()
                    return
                except redis.BusyLoadingError:
                    assert time.monotonic() < deadline, "redis did not finish loading"
                    time.sleep(0.05)
        finally:
            client.close()

    def shut_down(self) -> None:
        """Stop as an operator would (``SHUTDOWN``: the append-only file is kept)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
