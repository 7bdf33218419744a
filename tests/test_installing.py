"""The runtime dependencies install from wheels on every supported CPython: no compiler,
no C headers (upstream's pylibmc had no wheels past CPython 3.11)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers import PROJECT_ROOT

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


@pytest.mark.parametrize("version", ["3.10", "3.12", "3.13", "3.14"])
def test_every_runtime_dependency_resolves_to_wheels_on_cpython(
    version: str, tmp_path: Path
) -> None:
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", version,
            *platforms, "--dest", str(tmp_path), "-r", str(PROJECT_ROOT / "requirements.txt"),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    downloaded = {path.name.split("-")[0].lower() for path in tmp_path.iterdir()}
    assert {"pymemcache", "google_re2", "dramatiq", "selectolax"} <= downloaded
    assert not any(path.suffix != ".whl" for path in tmp_path.iterdir())
