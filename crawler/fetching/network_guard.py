"""Always on: a link from a public page never leads to a loopback or private address.

Each hop of a fetch, redirects included, is checked against the address its host
resolves to, by :func:`check_hop` in the fetch's own redirect loop; whether a
fetch touched a public address is a value the fetch returns, never state kept
between messages.  A crawl seeded on a private address (a test site, an intranet) may
stay there; once a hop or the referring page was public, a non-global address is
refused.
"""

from __future__ import annotations

import ipaddress
import socket
from functools import lru_cache
from urllib.parse import urlsplit

from crawler.errors import PermanentError


def is_public(host: str) -> bool:
    """True when every address ``host`` resolves to is globally routable."""
    try:
        return _resolves_public(host)
    except OSError:
        return True  # unresolvable: the fetch itself fails with a clear error (not cached)


@lru_cache(maxsize=4096)  # only answers are cached: an exception never is
def _resolves_public(host: str) -> bool:
    addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    return all(ipaddress.ip_address(str(address).split("%")[0]).is_global for address in addresses)


def check_hop(url: str, public_so_far: bool) -> bool:
    """Refuse a hop to a non-global address once the fetch (or the page that linked
    to it) has touched a public one; return whether the fetch has, this hop included.

    Raises ``ValueError`` (``UnicodeError``) for a host name no resolver accepts.
    """
    host = urlsplit(url).hostname or ""
    public = is_public(host)
    if public_so_far and not public:
        raise PermanentError(
            f"refusing to follow a link from a public address to {host}, which is not public"
        )
    return public_so_far or public
