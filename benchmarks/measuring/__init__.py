"""The benchmarks' measuring library: what ``run.py`` and ``floor.py`` run and measure.

* ``generated_site``: the site every contender crawls, written and served on 127.0.0.1;
* ``accounting``: a process's CPU and peak memory from ``/proc``, the services'
  processes, the workers' Prometheus metrics;
* ``workers``: Dramatiq workers on a broker, with Memcached and the broker emptied first;
* ``contenders``: one crawl each by the workers, ``--local`` and Scrapy, with its figures;
* ``ceiling``: the no-op actor's rate and CPU per message, the ceiling of any actor.

Every function takes what it measures with as parameters (the broker, the worker
processes and threads, the pages...); nothing here is set from outside. Every address
is on 127.0.0.1.
"""

from __future__ import annotations

from benchmarks.measuring.accounting import (
    CrawlCpu,
    children,
    cpu_seconds,
    metric,
    peak_rss_mib,
    read_metrics,
    service_pids,
)
from benchmarks.measuring.ceiling import noop_ceiling
from benchmarks.measuring.contenders import (
    crawl_locally,
    crawl_with_defaults,
    crawl_with_scrapy,
    crawl_with_wget,
    crawl_with_workers,
)
from benchmarks.measuring.generated_site import serve, served, write_site
from benchmarks.measuring.workers import (
    BIN,
    DEFAULT_PROCESSES,
    DEFAULT_THREADS,
    ROOT,
    broker_env,
    flush_services,
    start_workers,
    stop,
)
from tests.support import free_port

__all__ = [
    "BIN",
    "DEFAULT_PROCESSES",
    "DEFAULT_THREADS",
    "ROOT",
    "CrawlCpu",
    "broker_env",
    "children",
    "cpu_seconds",
    "crawl_locally",
    "crawl_with_defaults",
    "crawl_with_scrapy",
    "crawl_with_wget",
    "crawl_with_workers",
    "flush_services",
    "free_port",
    "metric",
    "noop_ceiling",
    "peak_rss_mib",
    "read_metrics",
    "serve",
    "served",
    "service_pids",
    "start_workers",
    "stop",
    "write_site",
]
