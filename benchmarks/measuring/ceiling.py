"""The ceiling: how fast Dramatiq's workers consume messages of an actor that does nothing
(``benchmarks/noop.py``), on the crawler's own broker set-up, and the CPU it takes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.measuring.accounting import (
    children,
    cpu_seconds,
    metric,
    read_metrics,
    service_pids,
)
from benchmarks.measuring.workers import BIN, ROOT, broker_env, flush_services, stop


def noop_ceiling(
    broker: str, messages: int, tmp: Path, *, processes: int, threads: int
) -> dict[str, Any]:
    """``messages`` no-op messages sent, then consumed by ``dramatiq benchmarks.noop``.

    The sending process's CPU and the broker's are measured from the second message on
    (the first connects). The workers' rate, and their CPU and the broker's, are measured
    between 10% and 90% of the messages done: the workers' steady pace, with their
    start-up and the last stragglers left out.

    Parameters:
      broker(str): ``"rabbitmq"`` or ``"redis"``.
      messages(int): How many messages to send; at least a few thousand, so that there
        are readings between 10% and 90%.
      tmp(Path): A directory for the workers' metrics.
      processes(int): Worker processes.
      threads(int): Worker threads in each process.
    """
    env = broker_env(
        broker, dramatiq_prom_db=str(tmp / f"prom-noop-{broker}"), PYTHONPATH=str(ROOT)
    )
    Path(env["dramatiq_prom_db"]).mkdir()
    flush_services(env)
    # The messages are sent first, by one process; that CPU is measured too, from the
    # second message on (the first connects).
    broker_pids = service_pids()[broker]
    broker_before = sum(map(cpu_seconds, broker_pids))
    sender = subprocess.run(
        [sys.executable, "-c",
         "import resource\n"
         "from benchmarks.noop import noop, broker\n"
         "noop.send()\n"
         "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
         "before = usage.ru_utime + usage.ru_stime\n"
         f"for _ in range({messages} - 1): noop.send()\n"
         "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
         "print(usage.ru_utime + usage.ru_stime - before)\n"
         "broker.close()"],
        cwd=ROOT, env=env, check=True, timeout=300, capture_output=True, text=True,
    )  # fmt: skip
    sending = {
        "sender_cpu_ms_per_message": 1000 * float(sender.stdout) / (messages - 1),
        "broker_cpu_ms_per_sent_message": 1000
        * (sum(map(cpu_seconds, broker_pids)) - broker_before)
        / messages,
    }
    workers = subprocess.Popen(
        [str(BIN / "dramatiq"), "benchmarks.noop", "-p", str(processes), "-t", str(threads)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # The rate between 10% and 90% of the messages done: the workers' steady pace,
    # with their start-up and the last stragglers left out; and the CPU it took.
    deadline = time.monotonic() + 300
    marks: list[tuple[float, float, float, float]] = []  # time, count, workers' CPU, broker's
    processed = 0.0
    while processed < messages and time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            text = read_metrics(timeout=5)
        except OSError:
            continue
        processed = metric(text, "dramatiq_messages_total")
        if 0.1 * messages <= processed <= 0.9 * messages:
            workers_cpu = sum(map(cpu_seconds, [workers.pid, *children(workers.pid)]))
            broker_cpu = sum(map(cpu_seconds, broker_pids))
            marks.append((time.monotonic(), processed, workers_cpu, broker_cpu))
    stop(workers)
    assert len(marks) >= 2, "too few readings between 10% and 90%: use more --noop-messages"
    first, last = marks[0], marks[-1]
    done = last[1] - first[1]
    assert done > 0, "no message done between two readings: use more --noop-messages"
    return {
        "messages": processed,
        "window_seconds": last[0] - first[0],
        "window_messages": done,
        "messages_per_s": done / (last[0] - first[0]),
        "workers_cpu_ms_per_message": 1000 * (last[2] - first[2]) / done,
        "broker_cpu_ms_per_message": 1000 * (last[3] - first[3]) / done,
        **sending,
    }
