"""What processes spend, read from ``/proc``, what the workers count, read from their
Prometheus endpoint, and what a dedup store holds, read from its stats."""

from __future__ import annotations

import os
import resource
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import redis

from crawler.stores.memcached import client_of

#: Clock ticks per second, the unit of the CPU times in ``/proc/<pid>/stat``.
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: Where Dramatiq's Prometheus middleware serves the workers' metrics.
METRICS_URL = "http://127.0.0.1:{port}/metrics"


def cpu_seconds(pid: int) -> float:
    """The user and system CPU seconds process ``pid`` has used, 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def service_pids() -> dict[str, list[int]]:
    """The processes of the services a benchmark uses, by name: RabbitMQ (the machine's
    one server), and the Redis and Memcached servers listening on the ports the
    environment names (``CRAWLER_TEST_REDIS_URL``, ``MEMCACHED_SERVERS``: the
    benchmark's own).  Other Redis and Memcached servers are not counted: a test's own
    that stops mid-measure would take its CPU out of the sum (a negative figure, seen
    beside the test suite's other tests)."""
    found = subprocess.run(["pgrep", "-f", "beam.smp"], capture_output=True, text=True).stdout
    redis_url = urlsplit(os.environ.get("CRAWLER_TEST_REDIS_URL", "redis://127.0.0.1:6379"))
    memcached = os.environ.get("MEMCACHED_SERVERS", "127.0.0.1:11211").split(",")
    return {
        "rabbitmq": [int(pid) for pid in found.split()],
        "redis": listening_pids(redis_url.port or 6379),
        "memcached": [pid for server in memcached for pid in listening_pids(_port(server))],
    }


def _port(server: str) -> int:
    return int(server.rsplit(":", 1)[1]) if ":" in server else 11211


def listening_pids(port: int) -> list[int]:
    """The processes with a TCP socket listening on ``port`` (``/proc/net/tcp`` and
    ``tcp6``, then each process's open files: those this user may read)."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl, local address, remote, state, ..., inode (10th)
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{fields[9]}]")
    pids = []
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in sockets for fd in (process / "fd").iterdir()):
                pids.append(int(process.name))
        except OSError:
            continue
    return pids


def _reaped_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class CrawlCpu:
    """The CPU a distributed crawl spends, by part, from the moment :meth:`start` is
    called: the worker processes, their Dramatiq parent, the broker's and Memcached's
    processes, and the seeder (this process's children reaped since).

    Parameters:
      parts(dict): The processes of each part, by the part's name.
      before(dict): Each process's CPU seconds at the start.
      reaped_before(float): The CPU seconds of this process's reaped children then.
    """

    parts: dict[str, list[int]]
    before: dict[int, float]
    reaped_before: float

    @classmethod
    def start(cls, workers_pid: int, broker: str) -> CrawlCpu:
        """Start counting for the workers under ``workers_pid`` on ``broker``."""
        services = service_pids()
        parts = {
            "workers": children(workers_pid),
            "worker parent": [workers_pid],  # dramatiq's main process: relays the logs
            broker: services[broker],
            "memcached": services["memcached"],
        }
        before = {pid: cpu_seconds(pid) for group in parts.values() for pid in group}
        return cls(parts, before, _reaped_children_cpu())

    def by_part(self) -> dict[str, float]:
        """CPU seconds of each part since the start; read once the seeder was reaped."""
        spent = {
            part: sum(cpu_seconds(pid) - self.before[pid] for pid in group)
            for part, group in self.parts.items()
        }
        spent["seeder"] = _reaped_children_cpu() - self.reaped_before
        return spent


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(child) for child in found.split()]


def peak_rss_mib(pid: int) -> float:
    """The most resident memory process ``pid`` has held so far, in MiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def read_metrics(timeout: float) -> str:
    """The workers' metrics now, in Prometheus' text format.

    Parameters:
      timeout(float): Seconds to wait for the answer.
    """
    port = os.environ.get("dramatiq_prom_port", "9191")  # noqa: SIM112 (Dramatiq's spelling)
    with urllib.request.urlopen(METRICS_URL.format(port=port), timeout=timeout) as response:
        return str(response.read().decode())


def metric(text: str, name: str) -> float:
    """The sum of every sample of ``name`` in ``text``, over all its labels.

    Parameters:
      text(str): Metrics in Prometheus' text format.
      name(str): A metric's name, or a name and labels (``name{label="value"``).
    """
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def memcached_stats(servers: str) -> dict[str, int]:
    """A Memcached's ``bytes`` (every item it holds, headers included), ``curr_items``
    and ``evictions``."""
    client = client_of([servers])
    try:
        ((_, stats),) = client.get_stats()
    finally:
        client.disconnect_all()
    return {name: int(stats[name]) for name in ("bytes", "curr_items", "evictions")}


def redis_stats(url: str) -> dict[str, int]:
    """A Redis's ``used_memory`` (as ``bytes``) and its keys (as ``curr_items``)."""
    client = redis.Redis.from_url(url)
    try:
        return {"bytes": int(client.info("memory")["used_memory"]), "curr_items": client.dbsize()}
    finally:
        client.close()
