"""The runtime dependencies install from wheels on every supported CPython: no compiler,
no C headers (upstream's pylibmc had no wheels past CPython 3.11)."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.workers import PROJECT_ROOT

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def wheels_for(version: str, destination: Path, *requirements: str) -> None:
    """``pip download`` of ``requirements``, wheels only, for CPython ``version`` on
    Linux x86-64; the test fails with pip's words when one has none."""
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", version,
            *platforms, "--dest", str(destination), *requirements,
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("version", ["3.10", "3.12", "3.13", "3.14"])
def test_every_runtime_dependency_resolves_to_wheels_on_cpython(
    version: str, tmp_path: Path
) -> None:
    wheels_for(version, tmp_path, "-r", str(PROJECT_ROOT / "requirements.txt"))
    downloaded = {path.name.split("-")[0].lower() for path in tmp_path.iterdir()}
    assert {"pymemcache", "google_re2", "dramatiq", "selectolax", "ada_url"} <= downloaded
    assert not any(path.suffix != ".whl" for path in tmp_path.iterdir())


def the_test_extra() -> list[str]:
    """The ``test`` extra of pyproject.toml: the requirements between its brackets."""
    text = (PROJECT_ROOT / "pyproject.toml").read_text()
    block = re.search(r"^test = \[(.*?)^\]", text, re.S | re.M)
    assert block is not None
    return re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)


@pytest.mark.parametrize("version", ["3.10", "3.12", "3.13", "3.14"])
def test_each_test_tool_is_a_wheel_on_cpython(version: str, tmp_path: Path) -> None:
    requirements = the_test_extra()
    assert "pytest-xdist>=3.5" in requirements and len(requirements) >= 8
    wheels_for(version, tmp_path, "--no-deps", *requirements)
    assert not any(path.suffix != ".whl" for path in tmp_path.iterdir())


#: Source files a compiler would have to build.
NATIVE = (".c", ".cc", ".cpp", ".cxx", ".h", ".pyx", ".rs", ".f90")


def test_what_the_test_tools_need_builds_without_a_compiler(tmp_path: Path) -> None:
    """Their dependencies, as pip picks them here: wheels, or sources of pure Python
    (``surt``, which ``cdxj-indexer`` needs, has no wheel)."""
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--prefer-binary", "--dest", str(tmp_path), *the_test_extra(),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    sources = [path for path in tmp_path.iterdir() if path.suffix != ".whl"]
    for source in sources:
        with tarfile.open(source) as archive:
            native = [name for name in archive.getnames() if name.endswith(NATIVE)]
        assert native == [], source.name
    assert len(list(tmp_path.iterdir())) > 20
