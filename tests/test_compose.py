"""docker-compose.yml, checked by loading it: there is no Docker engine here."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from dramatiq.middleware import prometheus as prometheus_middleware

from tests.support import free_port
from tests.workers import PROJECT_ROOT

COMPOSE = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
DEFAULT_PORTS = {"rabbitmq": 5672, "redis": 6379, "memcached": 11211}


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${VAR:-default}`` substitution, enough for this file."""
    return re.sub(
        r"\$\{(\w+)(?::-([^}]*))?\}",
        lambda m: environ.get(m.group(1)) or (m.group(2) or ""),
        value,
    )


@pytest.mark.parametrize("name", sorted(DEFAULT_PORTS))
def test_each_service_publishes_its_default_port_on_loopback_only(name: str) -> None:
    ports = SERVICES[name]["ports"]

    assert f"127.0.0.1:{DEFAULT_PORTS[name]}:{DEFAULT_PORTS[name]}" in ports
    assert all(port.startswith("127.0.0.1:") for port in ports)


@pytest.mark.parametrize("name", sorted(DEFAULT_PORTS))
def test_each_service_has_a_healthcheck_the_worker_waits_for(name: str) -> None:
    assert SERVICES[name]["healthcheck"]["test"][0] in {"CMD", "CMD-SHELL"}
    assert SERVICES["worker"]["depends_on"][name] == {"condition": "service_healthy"}


def test_rabbitmq_credentials_come_from_the_environment() -> None:
    environment = SERVICES["rabbitmq"]["environment"]
    secret = {"RABBITMQ_USER": "crawler", "RABBITMQ_PASSWORD": "s3cret"}

    assert interpolate(environment["RABBITMQ_DEFAULT_USER"], secret) == "crawler"
    assert interpolate(environment["RABBITMQ_DEFAULT_PASS"], secret) == "s3cret"
    worker_url = interpolate(SERVICES["worker"]["environment"]["RABBITMQ_URL"], secret)
    assert worker_url == "amqp://crawler:s3cret@rabbitmq:5672"


def test_worker_reads_the_same_variables_as_the_crawler() -> None:
    worker = SERVICES["worker"]
    environment = {key: interpolate(value, {}) for key, value in worker["environment"].items()}

    services = {key: value for key, value in environment.items() if value}
    passed_through = {key for key, value in environment.items() if not value}

    assert services == {
        "REDIS": "0",
        "RABBITMQ_URL": "amqp://guest:guest@rabbitmq:5672",
        "REDIS_URL": "redis://:@redis:6379/0",
        "MEMCACHED_SERVERS": "memcached:11211",
    }
    usage = (PROJECT_ROOT / "docs" / "usage.md").read_text()
    documented = set(re.findall(r"^\| `((?:CRAWLER|MEMCACHED)_[A-Z_]+|DEDUP_URL)` \|", usage, re.M))
    local_only = {name for name in documented if name.startswith("CRAWLER_LOCAL_")}  # --local's
    assert passed_through == documented - {"MEMCACHED_SERVERS"} - local_only
    assert worker["command"][:2] == ["dramatiq", "crawler.example"]
    assert worker["profiles"] == ["worker"]


def test_worker_image_is_built_from_this_project() -> None:
    assert SERVICES["worker"]["build"] == "."
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()

    assert "pip install --no-cache-dir -r requirements.txt" in dockerfile
    assert "COPY crawler ./crawler" in dockerfile
    assert 'CMD ["dramatiq", "crawler.example"]' in dockerfile


@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs a local redis-server")
def test_redis_command_requires_the_password_when_one_is_set(tmp_path: Path) -> None:
    shell_command = SERVICES["redis"]["command"]
    assert shell_command[:2] == ["sh", "-c"]
    port = free_port()
    script = shell_command[2].replace("$$", "$").replace("exec docker-entrypoint.sh ", "exec ")
    script += f" --port {port} --bind 127.0.0.1"
    env = dict(os.environ, REDIS_PASSWORD="s3cret")
    server = subprocess.Popen(["sh", "-c", script], env=env, cwd=tmp_path)
    try:
        client = redis.Redis(port=port, password="s3cret")
        deadline = time.monotonic() + 10
        while True:
            try:
                assert client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis from the compose command never answered"
                time.sleep(0.1)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()
        client.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs a local redis-server")
def test_redis_keeps_the_crawls_queue_across_a_restart_in_its_volume(tmp_path: Path) -> None:
    """With REDIS=1 the compose Redis holds the queue: its append-only file, in the
    ``redis-data`` volume mounted on its working directory, brings it back."""
    assert "redis-data:/data" in SERVICES["redis"]["volumes"]
    assert "rabbitmq-data:/var/lib/rabbitmq" in SERVICES["rabbitmq"]["volumes"]
    assert SERVICES["rabbitmq"]["hostname"] == "rabbitmq"
    assert set(COMPOSE["volumes"]) == {"redis-data", "rabbitmq-data"}
    script = SERVICES["redis"]["command"][2].replace("$$", "$")
    script = script.replace("exec docker-entrypoint.sh ", "exec ") + " --bind 127.0.0.1"
    port = free_port()

    def start() -> subprocess.Popen[bytes]:
        server = subprocess.Popen(["sh", "-c", f"{script} --port {port}"], cwd=tmp_path)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=port).ping()
                return server
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis from the compose command never answered"
                time.sleep(0.1)

    server = start()
    try:
        redis.Redis(port=port).rpush("dramatiq:default", b"a crawl message")
        server.kill()  # no shutdown save: only the append-only file can bring it back
        server.wait(timeout=10)
        server = start()
        assert redis.Redis(port=port).lrange("dramatiq:default", 0, -1) == [b"a crawl message"]
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_worker_group_that_dies_is_restarted_by_compose_and_by_the_systemd_unit() -> None:
    """A worker process that dies takes its group down (Dramatiq); whatever runs the
    group starts it again (tests/test_worker_crashes.py plays that part for real)."""
    assert SERVICES["worker"]["restart"] in {"always", "unless-stopped", "on-failure"}
    unit = configparser.ConfigParser(interpolation=None)
    unit.read_string((PROJECT_ROOT / "docs" / "deploy" / "crawler-worker.service").read_text())
    assert unit["Service"]["Restart"] in {"always", "on-failure"}
    command = unit["Service"]["ExecStart"].split()
    assert command[0].endswith("/dramatiq") and command[1] == "crawler.example"


def test_prometheus_scrapes_the_worker_and_grafana_shows_its_series() -> None:
    prometheus, grafana = SERVICES["prometheus"], SERVICES["grafana"]
    assert prometheus["profiles"] == grafana["profiles"] == ["monitoring"]
    assert all(port.startswith("127.0.0.1:") for port in prometheus["ports"] + grafana["ports"])
    assert grafana["depends_on"]["prometheus"] == {"condition": "service_healthy"}
    mounts = {
        volume.split(":")[1]: PROJECT_ROOT / volume.split(":")[0]
        for volume in prometheus["volumes"] + grafana["volumes"]
    }
    # Prometheus scrapes the worker's metrics port (Dramatiq's default, which it serves).
    config = yaml.safe_load(mounts["/etc/prometheus/prometheus.yml"].read_text())
    (job,) = config["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["worker:9191"]}]
    middleware = Path(prometheus_middleware.__file__).read_text()
    assert 'os.getenv("dramatiq_prom_port", "9191")' in middleware
    # Grafana's data source is that Prometheus, and its dashboard is provisioned.
    provisioning = mounts["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["url"] == "http://prometheus:9090" and source["uid"] == "prometheus"
    assert "127.0.0.1:9090:9090" in prometheus["ports"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "crawler.yml").read_text())[
        "providers"
    ]
    dashboards = mounts[provider["options"]["path"]]
    board = json.loads((dashboards / "crawler.json").read_text())
    # Every series a panel asks for is one the workers serve.
    served = set(re.findall(r'"((?:crawler|dramatiq)_\w+)"', middleware))
    served |= set(
        re.findall(r'"(crawler_\w+)"', (PROJECT_ROOT / "crawler" / "metrics.py").read_text())
    )
    asked = {
        re.sub(r"_bucket$", "", name)
        for panel in board["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b((?:crawler|dramatiq)_\w+)", target["expr"])
    }
    assert len(board["panels"]) >= 6
    assert asked and asked <= served, asked - served
    assert all(
        target["datasource"]["uid"] == source["uid"]
        for panel in board["panels"]
        for target in panel["targets"]
    )
