#!/usr/bin/env python3
"""Make sure RabbitMQ, Redis and Memcached answer at the configured addresses.

A running service is used as it is.  Otherwise the missing ones are started with
``docker compose`` when a Docker engine answers, or from local binaries, installed
with apt-get first when they are missing and this runs as root on Debian or Ubuntu
(a fresh machine has no Memcached); failing all that, this says how to get them and
exits non-zero.  PostgreSQL's binaries are installed too when missing (the item sink's
tests start servers of their own with them).
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

from crawler.environment import memcached_servers, rabbitmq_url, redis_url


def address(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url if "//" in url else "//" + url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def docker_engine() -> bool:
    return bool(shutil.which("docker")) and (
        subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    )


def apt_install(package: str) -> None:
    """Install a Debian package when this runs as root where apt-get exists: a fresh
    machine's package lists may be empty or stale, so a failed install updates them once."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    print(f"services: installing {package} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

    def apt_get(*arguments: str) -> bool:
        done = subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=600", *arguments],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        return done.returncode == 0

    # Two test processes installing at once (the docs of two benchmarks) take turns here,
    # and wait for an apt-get of someone else's (DPkg::Lock::Timeout), instead of failing.
    with open(os.path.join(tempfile.gettempdir(), "crawler-apt-get.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not apt_get("install", "-y", package) and apt_get("update"):
            apt_get("install", "-y", package)


def local_command(name: str, port: int) -> list[str] | None:
    as_root = ["-u", "root"] if os.geteuid() == 0 else []
    commands = {
        "memcached": ["memcached", "-d", *as_root, "-l", "127.0.0.1", "-p", str(port)],
        "redis": ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(port)],
        "rabbitmq": ["rabbitmq-server", "-detached"],
    }
    command = commands[name]
    if not shutil.which(command[0]):
        apt_install(PACKAGES[name])
    return command if shutil.which(command[0]) else None


def wait_for(host: str, port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if answers(host, port):
            return True
        time.sleep(0.5)
    return False


def main() -> int:
    services = {
        "rabbitmq": address(rabbitmq_url(), 5672),
        "redis": address(redis_url(), 6379),
        "memcached": address(memcached_servers()[0], 11211),
    }
    missing = {name: where for name, where in services.items() if not answers(*where)}
    for name, (host, port) in services.items():
        if name not in missing:
            print(f"services: using the {name} running at {host}:{port}")
    if missing and docker_engine():
        print(f"services: starting {', '.join(missing)} with docker compose")
        subprocess.run(["docker", "compose", "up", "--detach", "--wait", *missing], check=True)
        missing = {name: where for name, where in missing.items() if not answers(*where)}
    for name, (host, port) in list(missing.items()):
        command = local_command(name, port)
        if command is None:
            continue
        print(f"services: starting {name}: {' '.join(command)}")
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
        if wait_for(host, port, seconds=60):
            del missing[name]
    if not glob.glob(URL_TEST_DATA):
        apt_install("librust-url-dev")  # ships the web-platform-tests' URL test data
    if not glob.glob(POSTGRES_INITDB):
        apt_install("postgresql")  # tests/test_items.py starts PostgreSQLs of its own
    for name, (host, port) in missing.items():
        print(
            f"services: {name} does not answer at {host}:{port}, and neither a Docker engine "
            f"nor a local {name} binary could start it. Start it yourself "
            f"(`docker compose up -d {name}`, or install it: `apt-get install {PACKAGES[name]}`) "
            "or point the environment variable in the README's configuration table at one.",
            file=sys.stderr,
        )
    return 1 if missing else 0


#: PostgreSQL's initdb, as Debian ships it (the tests run initdb and pg_ctl themselves).
POSTGRES_INITDB = "/usr/lib/postgresql/*/bin/initdb"
#: The web-platform-tests' URL test data, as Debian's Rust ``url`` crate ships it.
URL_TEST_DATA = "/usr/share/cargo/registry/url-*/tests/urltestdata.json"
PACKAGES = {"rabbitmq": "rabbitmq-server", "redis": "redis-server", "memcached": "memcached"}

if __name__ == "__main__":
    sys.exit(main())
