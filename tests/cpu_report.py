"""The CPU each test spends, printed at the end of a run beside pytest's ``--durations``:
the suite's main pass is bound by its CPU (two cores, six processes), so its CPU says
what a shorter run needs less of, where wall times move with whatever else the machine
runs.

A test's CPU is that of its pytest process (the site it serves runs there) and of the
processes it started and waited for (workers, seeders, services of its own, browsers),
from its setup to its teardown: ``getrusage``'s ``RUSAGE_SELF`` and ``RUSAGE_CHILDREN``.
The shared services (RabbitMQ) are not in it.  Under pytest-xdist each worker measures
its tests and the figure rides to the controller in the report's ``user_properties``.
"""

from __future__ import annotations

import resource
from typing import Any

import pytest

#: The tests named in the summary, most CPU first.
SHOWN = 10
_KEY = "cpu_s"
_STARTED = pytest.StashKey[float]()


def cpu_seconds() -> float:
    """This process's CPU seconds and its waited-for children's, user and system."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    if call.when == "setup":
        item.stash[_STARTED] = cpu_seconds()
    elif call.when == "teardown" and _STARTED in item.stash:
        item.user_properties.append((_KEY, cpu_seconds() - item.stash[_STARTED]))
    return (yield)


class CpuReport:
    """Each test's CPU, as its teardown report brings it."""

    def __init__(self) -> None:
        self.by_test: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            for key, value in report.user_properties:
                if key == _KEY and isinstance(value, float):
                    self.by_test[report.nodeid] = value

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.by_test:
            return
        total = sum(self.by_test.values())
        terminalreporter.write_sep(
            "=", f"CPU of the tests and their processes: {total:.0f} s in {len(self.by_test)}"
        )
        most = sorted(self.by_test.items(), key=lambda kv: kv[1], reverse=True)[:SHOWN]
        for nodeid, seconds in most:
            terminalreporter.write_line(f"{seconds:6.2f}s cpu   {nodeid}")


def register(config: pytest.Config) -> None:
    """Report the tests' CPU in this run (the controller's, or a run without xdist)."""
    if not hasattr(config, "workerinput"):  # an xdist worker measures; its controller tells
        config.pluginmanager.register(CpuReport(), "cpu-report")


def pytest_configure(config: pytest.Config) -> None:
    """As a plugin of its own (``-p tests.cpu_report``); the suite's conftest calls
    :func:`register` from its own ``pytest_configure``."""
    register(config)
