"""Always on: a link from a public page never leads to a loopback or private address.

Each hop of a fetch, redirects included, is checked against the address its host
resolves to.  A crawl seeded on a private address (a test site, an intranet) may
stay there; once a hop or the referring page was public, a non-global address is
refused.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from crawler.errors import PermanentError

_state = threading.local()


@lru_cache(maxsize=4096)
def is_public(host: str) -> bool:
    """True when every address ``host`` resolves to is globally routable."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return True  # unresolvable: the fetch itself will fail with a clear error
    return all(ipaddress.ip_address(str(address).split("%")[0]).is_global for address in addresses)


class GuardedAdapter(HTTPAdapter):
    """Refuses a hop to a non-global address once the fetch has touched a public one."""

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        host = urlsplit(request.url or "").hostname or ""
        public = is_public(host)
        if getattr(_state, "seen_public", False) and not public:
            raise PermanentError(
                f"refusing to follow a link from a public address to {host}, which is not public"
            )
        _state.seen_public = getattr(_state, "seen_public", False) or public
        return super().send(request, *args, **kwargs)


def _proxies_or_netrc() -> bool:
    """Whether requests could find a proxy or netrc credentials in the environment."""
    if any("proxy" in name.lower() or name == "NETRC" for name in os.environ):
        return True
    return any(os.path.exists(os.path.expanduser(f"~/{n}")) for n in (".netrc", "_netrc"))


def guarded_session() -> requests.Session:
    session = requests.Session()
    # With trust_env requests reads the environment again for every request; read it
    # once here instead, unless a proxy or netrc file is there to honour.
    session.trust_env = _proxies_or_netrc()
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    adapter = GuardedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def start_fetch(via_public: bool) -> None:
    """Begin a fetch in this thread; ``via_public``: the referring page was public."""
    _state.seen_public = via_public


def fetch_was_public() -> bool:
    """Whether the page just fetched (or a hop on the way) was on a public address."""
    return bool(getattr(_state, "seen_public", False))
