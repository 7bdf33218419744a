"""A PostgreSQL of the tests' own (``--items postgresql://``): ``initdb`` and ``pg_ctl``
of PostgreSQL 15, run as the ``postgres`` user when the tests run as root, its data
and its Unix socket in a temporary directory, on a free TCP port of 127.0.0.1, trust
authentication.  No other PostgreSQL is touched."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support import free_port


def _bin() -> Path:
    """PostgreSQL 15's binaries, else the newest Debian installed (scripts/services.py)."""
    if Path("/usr/lib/postgresql/15/bin/initdb").exists():
        return Path("/usr/lib/postgresql/15/bin")
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    return Path(found[-1]).parent if found else Path("/usr/lib/postgresql/15/bin")


BIN = _bin()


def _as_postgres(command: list[str]) -> list[str]:
    """``command`` as the ``postgres`` user when run as root (initdb refuses root)."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class PostgresProcess:
    """Started when made; :meth:`stop` and :meth:`start` again; :meth:`remove` at the end."""

    def __init__(self) -> None:
        if not (BIN / "initdb").exists():
            raise RuntimeError(f"no initdb in {BIN}: run scripts/services.py (installs postgresql)")
        self.directory = Path(tempfile.mkdtemp(prefix="crawler-test-pg-"))
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        self.data = self.directory / "data"
        self.port = free_port()
        subprocess.run(
            _as_postgres(
                [str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                 "--no-sync", "-E", "UTF8"]
            ),
            check=True, capture_output=True,
        )  # fmt: skip
        self.start()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            _as_postgres(
                [str(BIN / "pg_ctl"), "-D", str(self.data), "-o", options, "-w", "-t", "30",
                 "-l", str(self.directory / "log"), "start"]
            ),
            check=True, capture_output=True,
        )  # fmt: skip

    def stop(self) -> None:
        subprocess.run(
            _as_postgres(
                [str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
            ),
            capture_output=True,
        )  # fmt: skip

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
