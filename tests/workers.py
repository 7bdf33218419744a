"""Real ``dramatiq crawler.example`` worker processes, and the seeder, for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pika
import redis
from dramatiq.common import dq_name, xq_name

from crawler.brokers import QUEUE

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


class WorkerProcesses:
    """``dramatiq crawler.example`` in a subprocess, its log lines collected."""

    def __init__(self, env: Mapping[str, str], *, processes: int = 1, threads: int = 8) -> None:
        self.processes, self.threads = processes, threads
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            [
                str(BIN / "dramatiq"),
                "crawler.example",
                "--processes",
                str(processes),
                "--threads",
                str(threads),
            ],
            cwd=PROJECT_ROOT,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def count(self, text: str) -> int:
        with self._changed:
            return sum(text in line for line in self.lines)

    def tracebacks(self) -> list[str]:
        """Each traceback the workers logged, whole (for a test's failure message)."""
        with self._changed:
            lines = list(self.lines)
        found = []
        for i, line in enumerate(lines):
            if "Traceback" in line:
                end = next(
                    (j for j in range(i + 1, len(lines)) if not lines[j].startswith((" ", "\t"))),
                    len(lines) - 1,
                )
                found.append("\n".join(lines[max(i - 1, 0) : end + 1]))
        return found

    def logged_any(self, text: str) -> bool:
        return self.count(text) > 0

    def wait_until(self, condition: Callable[[], bool], *, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise AssertionError(
                        "workers did not reach the expected state; last log lines:\n"
                        + "\n".join(self.lines[-30:])
                    )
                self._changed.wait(min(remaining, 0.5))

    def kill(self) -> None:
        """``kill -9`` the main process and its worker processes at once."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


def seed(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m crawler.example ARGS`` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "crawler.example", *args],
        cwd=PROJECT_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def queued_messages(
    env: Mapping[str, str], queues: tuple[str, ...] = (QUEUE, dq_name(QUEUE))
) -> int:
    """Messages in the crawler's queues: by default those waiting, ready or delayed for a retry."""
    if env.get("REDIS") == "1":
        client = redis.Redis.from_url(env["REDIS_URL"])
        try:
            return sum(
                int(client.zcard(f"dramatiq:{queue}"))
                if queue.endswith(".XQ")
                else int(client.hlen(f"dramatiq:{queue}.msgs"))
                for queue in queues
            )
        finally:
            client.close()
    connection = pika.BlockingConnection(pika.URLParameters(env["RABBITMQ_URL"]))
    try:
        return sum(_message_count(connection, queue) for queue in queues)
    finally:
        connection.close()


def _message_count(connection: pika.BlockingConnection, queue: str) -> int:
    """The messages in ``queue``; none in a queue not declared (yet)."""
    try:
        return int(connection.channel().queue_declare(queue, passive=True).method.message_count)
    except pika.exceptions.ChannelClosedByBroker as e:
        if e.reply_code != 404:
            raise
        return 0


def dead_letters(env: Mapping[str, str]) -> int:
    return queued_messages(env, (xq_name(QUEUE),))


#: Dramatiq's ``worker_timeout`` for the tests' workers, in ms: how long an idle worker
#: thread waits for work before it looks whether it is to stop (Dramatiq's 1000 made
#: every graceful stop of a test's workers 0.4 s longer).
WORKER_TIMEOUT_MS = "100"


def environment(**overrides: str) -> dict[str, str]:
    """This process's environment for workers and seeders, with ``overrides``.  The
    workers' Prometheus metrics are served on a port of their own (``metrics_port``):
    with the session's one port for every group, a group whose metrics server could
    not bind it (a group of an earlier test still stopping) served none, and a test
    that read the metrics found nothing there once the other had gone."""
    from tests.support import free_port

    env = dict(os.environ)
    env.pop("REDIS", None)
    env["dramatiq_worker_timeout"] = WORKER_TIMEOUT_MS
    env["dramatiq_prom_port"] = str(free_port())
    env.update(overrides)
    return env
