"""The summary of each test's CPU (:mod:`tests.cpu_report`), on a run of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent

BURNING = """
import subprocess, sys, time

def test_burns():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass

def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)

def test_waits():
    time.sleep(0.3)
"""


@pytest.mark.parametrize("processes", [[], ["-n", "2"]])
def test_the_summary_gives_each_test_s_cpu_its_own_and_its_children_s(
    tmp_path: Path, processes: list[str]
) -> None:
    (tmp_path / "test_burning.py").write_text(BURNING)
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.cpu_report", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), *processes, "test_burning.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"CPU of the tests and their processes: \d+ s in 3 ", result.stdout)
    cpu = {
        name: float(seconds)
        for seconds, name in re.findall(r"([\d.]+)s cpu +test_burning\.py::(\w+)", result.stdout)
    }
    assert cpu.keys() == {"test_burns", "test_burns_in_a_child", "test_waits"}, result.stdout
    assert cpu["test_burns"] >= 0.29 and cpu["test_burns_in_a_child"] >= 0.29
    assert cpu["test_waits"] < 0.1
