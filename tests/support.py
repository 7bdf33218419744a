"""What several test modules share: the services they use and restart, and readers of
what a crawl leaves behind (records, metrics, the seeder's words).

Every service a test empties is the session's own (:mod:`tests.private_services`):
its RabbitMQ virtual host, Redis and Memcached, never the user's.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pika
import redis
from dramatiq.common import dq_name, xq_name

from crawler.brokers import QUEUE
from crawler.environment import rabbitmq_url
from crawler.stores.memcached import MemcachedClient, client_of
from tests.workers import PROJECT_ROOT, WorkerProcesses


def own_redis_url() -> str:
    """The Redis database of the test session's own (:mod:`tests.private_services`)."""
    return os.environ["CRAWLER_TEST_REDIS_URL"]


#: Worker settings that keep fault tests short; the defaults users get are untouched.
FAST_FAILURES = {
    "CRAWLER_MIN_BACKOFF_MS": "100",
    "CRAWLER_MAX_BACKOFF_MS": "2000",
    "CRAWLER_FETCH_DEADLINE": "1.5",
    "CRAWLER_STORE_PATIENCE": "3",
    "CRAWLER_REDIS_HEARTBEAT_TIMEOUT_MS": "5000",
    "CRAWLER_REDIS_MAINTENANCE_CHANCE": "1000000",
}
#: With FAST_FAILURES, for a test whose site holds fetches (``hold_from``) while it
#: faults or cancels the crawl: the held fetches outlast that rather than time out.
HELD_FETCHES = {"CRAWLER_FETCH_DEADLINE": "5"}


@contextmanager
def clean_memcached() -> Iterator[MemcachedClient]:
    client = client_of()
    client.flush_all()
    yield client
    client.flush_all()
    client.disconnect_all()


@contextmanager
def clean_broker(name: str) -> Iterator[dict[str, str]]:
    """The environment selecting broker ``name``, its crawler queues emptied around use."""
    if name == "redis":
        client = redis.Redis.from_url(own_redis_url())
        client.flushdb()
        yield {"REDIS": "1", "REDIS_URL": own_redis_url()}
        client.flushdb()
        client.close()
    else:
        purge_rabbitmq()
        yield {"RABBITMQ_URL": rabbitmq_url()}
        purge_rabbitmq()


def purge_rabbitmq() -> None:
    """Delete the crawler's queues: the next crawler to use them declares them anew,
    as on a new RabbitMQ (with the priorities of ``--breadth-first``)."""
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq_url()))
    channel = connection.channel()
    for queue in (QUEUE, dq_name(QUEUE), xq_name(QUEUE)):
        channel.queue_delete(queue)
    connection.close()


def free_port() -> int:
    """A port free now on 127.0.0.1, for a server the test starts later.

    Chosen below the kernel's ephemeral range, where no outgoing connection takes a
    local port: a port from ``bind(0)`` is one of those, and while the test runs, any
    connection to RabbitMQ or a site may be given it (a worker's metrics server then
    failed to start with "Address already in use", once in a CI run)."""
    lowest_ephemeral = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        ports = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        lowest_ephemeral = int(ports.split()[0])
    candidates = range(10000, max(lowest_ephemeral, 10001))
    for _ in range(200):
        port = random.choice(candidates)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between 10000 and {lowest_ephemeral}")


class MemcachedProcess:
    """A Memcached of the test's own on a free port, to stop, pause and restart.

    Parameters:
      memory_mb(int): Its ``-m``: how much it holds before it evicts (64 by default).
      options(tuple[str, ...]): More of its command line.
    """

    def __init__(self, memory_mb: int = 64, options: tuple[str, ...] = ()) -> None:
        self.memory_mb, self.options = memory_mb, options
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        as_root = ["-u", "root"] if os.geteuid() == 0 else []
        listen = ["-l", "127.0.0.1", "-p", str(self.port)]
        self.process = subprocess.Popen(
            ["memcached", *as_root, *listen, "-m", str(self.memory_mb), *self.options]
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


def wait_until(condition: Callable[[], bool], *, timeout: float) -> None:
    """Poll ``condition`` every 50 ms until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not true after {timeout} s: {condition}"
        time.sleep(0.05)


def wait_for_port(port: int, *, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing answered on port {port}"
            time.sleep(0.05)


class RedisProcess:
    """A Redis of the test's own that keeps everything in an append-only file, as a
    production broker would, so a restart brings back what it held.

    Parameters:
      directory(Path): Where its append-only file lives.
      appendfsync(str): How often Redis syncs that file to disk: ``always`` (the
        default here: a test's restart loses nothing), ``everysec`` (what the README
        advises for speed) or ``no``.
    """

    def __init__(self, directory: Path, appendfsync: str = "always") -> None:
        self.directory = directory
        self.appendfsync = appendfsync
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                self.appendfsync,
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # never holding the test run's output open
        )
        wait_for_port(self.port)
        client = redis.Redis.from_url(self.url)
        try:
            deadline = time.monotonic() + 10
            while True:  # a restarted Redis answers LOADING until its file is read
                try:
                    client.ping()
                    return
                except redis.BusyLoadingError:
                    assert time.monotonic() < deadline, "redis did not finish loading"
                    time.sleep(0.05)
        finally:
            client.close()

    def flush(self) -> None:
        """Empty it, for a test that starts afresh."""
        client = redis.Redis.from_url(self.url)
        client.flushdb()
        client.close()

    def shut_down(self) -> None:
        """Stop as an operator would (``SHUTDOWN``: the append-only file is kept)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


class RedisClusterProcesses:
    """A Redis Cluster of the test's own: three primaries on free ports, each with
    ``replicas`` replicas, its 16,384 slots spread over the primaries by ``redis-cli
    --cluster create``.

    Parameters:
      directory(Path): Where the nodes keep their cluster configuration files.
      replicas(int): Replicas of each primary (none by default).
      node_timeout_ms(int): How long a primary may not answer before its replica is
        promoted in its place (``cluster-node-timeout``).
    """

    PRIMARIES = 3

    def __init__(self, directory: Path, replicas: int = 0, node_timeout_ms: int = 15000) -> None:
        self.replicas = replicas
        self.ports: list[int] = []
        while len(self.ports) < self.PRIMARIES * (1 + replicas):  # distinct, no bus port
            port = _free_cluster_port()
            if not {port, port + 10000, port - 10000} & set(self.ports):
                self.ports.append(port)
        self.processes = [
            subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(directory),
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    f"nodes-{port}.conf",
                    "--cluster-node-timeout",
                    str(node_timeout_ms),
                    "--repl-diskless-sync-delay",
                    "0",  # a replica syncs at once, not 5 s after it attached
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--logfile",
                    f"redis-{port}.log",
                ],
                cwd=directory,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for port in self.ports
        ]
        try:
            self._form()
        except BaseException:
            self.shut_down()
            raise

    def _form(self) -> None:
        for port in self.ports:
            wait_for_port(port)
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *nodes,
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
        )
        deadline = time.monotonic() + 20
        for port in self.ports:  # each node must have learnt the whole slot map
            node = redis.Redis(port=port)
            while node.cluster("info")["cluster_state"] != "ok":
                assert time.monotonic() < deadline, "the test's Redis Cluster did not come up"
                time.sleep(0.05)
            if self.replicas and node.info("replication")["role"] == "slave":
                while node.info("replication")["master_link_status"] != "up":
                    assert time.monotonic() < deadline, "the cluster's replicas did not sync"
                    time.sleep(0.05)
            node.close()

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def nodes(self) -> list[redis.Redis]:
        return [redis.Redis(port=port) for port in self.ports]

    def primaries(self) -> list[int]:
        """The ports of the nodes that are primaries now."""
        roles = {}
        for port, process in zip(self.ports, self.processes, strict=True):
            if process.poll() is None:
                with redis.Redis(port=port) as node:
                    roles[port] = node.execute_command("ROLE")[0]
        return [port for port, role in roles.items() if role in (b"master", "master")]

    def kill(self, port: int) -> None:
        """Kill the node at ``port`` at once, as a machine that dies would."""
        process = self.processes[self.ports.index(port)]
        process.kill()
        process.wait(timeout=10)

    def ok(self) -> bool:
        """Whether every living node says the cluster is whole (every slot served)."""
        for port, process in zip(self.ports, self.processes, strict=True):
            if process.poll() is None:
                with redis.Redis(port=port) as node:
                    if node.cluster("info")["cluster_state"] != "ok":
                        return False
        return True

    def flush(self) -> None:
        for node in self.nodes():
            node.flushall()
            node.close()

    def shut_down(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(timeout=10)


def _free_cluster_port() -> int:
    """A free port whose cluster bus port (itself + 10,000) is free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@contextmanager
def running(command: list[str], **options: Any) -> Iterator[subprocess.Popen[str]]:
    """``command`` running while the block goes on (text mode, from the project's root);
    killed and reaped after it if it still runs, so that a failed test leaves no process
    and no open pipe behind."""
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, text=True, **options)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def wait_for_crawl(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """``python -m crawler.example ARGS --wait``, running while the test goes on."""
    return subprocess.Popen(
        [sys.executable, "-m", "crawler.example", *args, "--wait"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def waited_crawl(
    env: dict[str, str],
    *arguments: str,
    processes: int = 1,
    threads: int = 4,
    timeout: float = 60,
) -> tuple[subprocess.Popen[str], str, str, WorkerProcesses]:
    """Workers started, a crawl seeded with ``--wait`` and ``arguments`` and waited for,
    the workers stopped (cleanly, or the test fails): the seeder, its stdout and
    stderr, and the stopped workers (their log)."""
    workers = WorkerProcesses(env, processes=processes, threads=threads)
    try:
        waiting = wait_for_crawl(env, *arguments)
        stdout, stderr = waiting.communicate(timeout=timeout)
    finally:
        assert workers.stop() == 0
    return waiting, stdout, stderr, workers


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of an ``--output`` file."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def crawl_id_of(stdout: str) -> str:
    """The crawl id in the seeder's ``crawl ID seeded with N URL(s)`` line."""
    match = re.search(r"^crawl ([0-9a-f]{32}) seeded", stdout, re.M)
    assert match, stdout
    return match.group(1)


def metrics_port(env: Mapping[str, str]) -> int:
    """Where workers started with ``env`` serve their Prometheus metrics."""
    return int(env["dramatiq_prom_port"])


def read_metrics(port: int) -> str:
    """The /metrics page of workers started with ``dramatiq_prom_port=port``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text: str = response.read().decode()
        return text


def metric(text: str, name: str) -> float:
    """The sum of every sample of ``name`` (all its labels) in a /metrics page."""
    return sum(
        float(value)
        for sample, value in re.findall(r"^(\S+) (\S+)$", text, re.M)
        if sample == name or sample.startswith(name + "{")
    )


@contextmanager
def rabbitmq_vhost(name: str) -> Iterator[str]:
    """A RabbitMQ virtual host of the test's own, made with ``rabbitmqctl`` on the
    RabbitMQ of ``RABBITMQ_URL`` (this machine's) and deleted afterwards: the URL for it."""
    ctl = ["rabbitmqctl", "--quiet"]
    vhost = f"{name}-{os.getpid()}"
    subprocess.run([*ctl, "add_vhost", vhost], check=True, capture_output=True)
    try:
        user = urllib.parse.urlsplit(rabbitmq_url()).username or "guest"
        grant = [*ctl, "set_permissions", "-p", vhost, user, ".*", ".*", ".*"]
        subprocess.run(grant, check=True, capture_output=True)
        parts = urllib.parse.urlsplit(rabbitmq_url())
        yield urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(vhost, safe="")))
    finally:
        subprocess.run([*ctl, "delete_vhost", vhost], check=True, capture_output=True)


class RabbitmqProcess:
    """A RabbitMQ node of the caller's own: its own node name, port and data directory
    beside the machine's RabbitMQ, to restart or alarm without touching anyone else's
    queues.  Started from the machine's RabbitMQ installation (as the ``rabbitmq`` user
    when run as root, as Debian's scripts do), stopped by :meth:`shut_down`.

    Its configuration, data and logs live in a directory of its own in the system's
    temporary directory (one the ``rabbitmq`` user can reach), removed by :meth:`shut_down`.
    """

    def __init__(self) -> None:
        self.directory = directory = Path(tempfile.mkdtemp(prefix="crawler-rabbitmq-"))
        self.port = free_port()
        self.name = f"crawler-{self.port}@localhost"
        (directory / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (directory / "enabled_plugins").write_text("[].\n")
        settings = {
            "RABBITMQ_CONF_ENV_FILE": "/dev/null",  # not the machine's node name and port
            "RABBITMQ_CONFIG_FILE": str(directory / "rabbitmq.conf"),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(directory / "mnesia"),
            "RABBITMQ_LOG_BASE": str(directory / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(directory / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(directory / "pid"),
        }
        server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
        if not Path(server).exists():
            server = shutil.which("rabbitmq-server") or "rabbitmq-server"
        if os.geteuid() == 0:
            shutil.chown(directory, "rabbitmq")
            for path in directory.iterdir():
                shutil.chown(path, "rabbitmq")
            assignments = " ".join(f"{name}={value}" for name, value in settings.items())
            command = ["su", "rabbitmq", "-s", "/bin/sh", "-c"]
            command.append(
                f"cd /var/lib/rabbitmq; HOME=/var/lib/rabbitmq {assignments} exec {server}"
            )
            environment = None
        else:
            command, environment = [server], {**os.environ, **settings}
        self.process = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.port, timeout=60)

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}"

    def ctl(self, *args: str) -> None:
        """``rabbitmqctl -n NODE ARGS``."""
        subprocess.run(
            ["rabbitmqctl", "-n", self.name, *args], check=True, capture_output=True, timeout=60
        )

    def shut_down(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self.ctl("stop")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever of it is left
        self.process.wait(timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


def usage_error(stderr: str, prog: str = "python -m crawler.example") -> str:
    """The line a usage error is: checked to end stderr with the pointer to --help."""
    lines = stderr.splitlines()
    assert lines[-1] == f"See '{prog} --help'.", stderr
    return lines[-2]
