"""Dramatiq workers on one broker: their environment, clean services, start and stop."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import redis

from benchmarks.measuring.accounting import children
from crawler.stores.memcached import client_of

#: The project's root, the working directory of every process started here.
ROOT = Path(__file__).resolve().parent.parent.parent
#: Where this Python's commands are installed (``dramatiq``, ``scrapy``).
BIN = Path(sys.executable).parent
#: The worker set-up of the README's figures: ``dramatiq -p 2 -t 8``.
DEFAULT_PROCESSES, DEFAULT_THREADS = 2, 8


def broker_env(broker: str, **settings: str) -> dict[str, str]:
    """This process's environment plus ``settings``, pointed at ``broker``: the services
    of :func:`own_services` (Redis: its database).

    Parameters:
      broker(str): ``"rabbitmq"`` or ``"redis"``.
      settings(str): More variables, such as ``dramatiq_prom_db``.
    """
    own_services()
    env = dict(os.environ, **settings)
    env.pop("REDIS", None)
    if broker == "redis":
        env.update(REDIS="1", REDIS_URL=os.environ["CRAWLER_TEST_REDIS_URL"])
    return env


def own_services() -> None:
    """Point this process at services of the benchmark's own (a Memcached and a Redis on
    free ports, a RabbitMQ virtual host), removed when it exits; inside a test session,
    at the session's.  A benchmark empties them between runs, never the user's."""
    if os.environ.get("CRAWLER_OWN_SERVICES") == "1":
        return
    sys.path.insert(0, str(ROOT))
    from tests import private_services

    atexit.register(private_services.start())


def flush_services(env: dict[str, str]) -> None:
    """Empty Memcached and the broker ``env`` points at (the benchmark's own, from
    :func:`own_services`), for a crawl that starts afresh.

    Parameters:
      env(dict): An environment from :func:`broker_env`.
    """
    assert env.get("CRAWLER_OWN_SERVICES") == "1", "own_services() first: never the user's"
    client_of(env["MEMCACHED_SERVERS"].split(",")).flush_all()
    if env.get("REDIS") == "1":
        redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    else:
        sys.path.insert(0, str(ROOT))
        from tests.support import purge_rabbitmq

        purge_rabbitmq()


def start_workers(
    env: dict[str, str],
    module: str,
    *,
    processes: int,
    threads: int,
    root: Path = ROOT,
    bin_dir: Path = BIN,
    output: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """``dramatiq module -p processes -t threads``, once its worker processes are up.

    Waits a second more, so that each worker process imports and connects before a
    clock starts.

    Parameters:
      env(dict): The workers' environment, from :func:`broker_env`.
      module(str): The module declaring the broker and actors, ``crawler.example``.
      processes(int): Worker processes.
      threads(int): Worker threads in each process.
      root(Path): Their working directory: Dramatiq puts it first on ``sys.path``, so
        that its ``crawler`` package is the one imported (another build's tree).
      bin_dir(Path): Where the ``dramatiq`` command to run is (another build's
        virtualenv's ``bin``).
      output(IO): A file for their standard output and error (none when None).
    """
    sink: IO[bytes] | int = subprocess.DEVNULL if output is None else output
    workers = subprocess.Popen(
        [str(bin_dir / "dramatiq"), module, "-p", str(processes), "-t", str(threads)],
        cwd=root, env=env, stdout=sink, stderr=sink,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(children(workers.pid)) < processes:
        if workers.poll() is not None:
            raise RuntimeError(f"the workers exited with status {workers.returncode}")
        if time.monotonic() > deadline:
            stop(workers)
            raise RuntimeError("the workers did not start in 30 s")
        time.sleep(0.1)
    time.sleep(1.0)  # let each worker process import and connect before the clock starts
    if workers.poll() is not None:
        raise RuntimeError(f"the workers exited with status {workers.returncode}")
    return workers


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` as Ctrl-C would stop Dramatiq's workers, and wait for it."""
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
