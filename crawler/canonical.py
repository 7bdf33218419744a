"""One spelling per URL, so dedup sees ``HTTP://Host:80/a%7e`` and ``http://host/a~`` as one."""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

from crawler.links import CACHE_SIZE

DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
#: A URL that is canonical as it is written (most links are): lower-case scheme and
#: host, a path, no escapes, no fragment, no empty query; a port is checked apart.
_PLAIN = re.compile(
    r"(https?)://[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::([1-9][0-9]{0,4}))?"
    r"/[\w\-.~!$&'()*+,;=:@/]*(?:\?[\w\-.~!$&'()*+,;=:@/?]+)?",
    re.ASCII,
)


@lru_cache(maxsize=CACHE_SIZE)  # the same links come up page after page
def canonical_url(url: str) -> str:
    """Lower-case scheme and host, no default port, no fragment, an empty path as ``/``,
    and percent-escapes normalised (RFC 3986 6.2.2); the query keeps its order."""
    plain = _PLAIN.fullmatch(url)
    if plain:
        port = plain.group(2)
        if port is None or (int(port) <= 65535 and int(port) != DEFAULT_PORTS[plain.group(1)]):
            return url
    return _canonicalise(url)


def _canonicalise(url: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username is not None:
        userinfo = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{userinfo}@{netloc}"
    path = _normalise_escapes(parts.path) or "/"
    return urlunsplit((scheme, netloc, path, _normalise_escapes(parts.query), ""))


def _normalise_escapes(text: str) -> str:
    """Decode escapes of unreserved characters, upper-case the others' hex digits."""

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else match.group(0).upper()

    return _ESCAPE.sub(fix, text)
