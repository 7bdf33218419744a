"""For tests only: the host names listed in ``TEST_HOSTS`` resolve to 127.0.0.1.

A test that crawls several host names (``blog.example.co.uk``, ``a.github.io``) serves
them all on 127.0.0.1 and starts its workers with this folder on ``PYTHONPATH``:
Python imports ``sitecustomize`` at start-up, as if ``/etc/hosts`` named them.
"""

from __future__ import annotations

import os
import socket
from typing import Any

_NAMES = {name.strip().lower() for name in os.environ.get("TEST_HOSTS", "").split(",")}
_NAMES.discard("")
_getaddrinfo = socket.getaddrinfo


def _resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(host, str) and host.lower().rstrip(".") in _NAMES:
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)


if _NAMES:
    socket.getaddrinfo = _resolve
