"""What the seeder checks before it enqueues anything, and how it names the broker."""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit, urlunsplit

import requests

from crawler.canonical import canonical_url
from crawler.environment import rabbitmq_url, redis_url, uses_redis
from crawler.links import clean_href


def http_url(value: str) -> str:
    """An ``argparse`` type: an absolute http(s) URL, in its canonical form.

    Refused: another scheme, no host, a port that is not a number from 1 to 65535,
    a host name no resolver accepts, anything requests cannot send.
    """
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"{value!r} is not an http:// or https:// URL")
    try:
        if not parts.hostname:
            raise argparse.ArgumentTypeError(f"{value!r} has no host name")
        parts.port  # noqa: B018  (raises ValueError on a bad port)
        requests.Request("GET", value).prepare()
        return canonical_url(clean_href(value))  # port 0, impossible host names
    except (ValueError, requests.RequestException) as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a valid URL: {e}") from e


def broker_address() -> str:
    """The broker the seeder talks to, password hidden, for error messages."""
    url = redis_url() if uses_redis() else rabbitmq_url()
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    name = "Redis" if uses_redis() else "RabbitMQ"
    return f"{name} at {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"
