"""One spelling per URL, so dedup sees ``HTTP://Host:80/a%7e`` and ``http://host/a~`` as one.

A URL that names no server anyone could reach (a port out of range or 0, a host
name no resolver accepts) raises ``ValueError`` here, where a page's links are
parsed one by one, rather than being rewritten into a URL the link never named.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

from crawler.links.cleaning import CACHE_SIZE

DEFAULT_PORTS = {"http": 80, "https": 443}
#: The longest host name and host name label DNS can carry (RFC 1035 2.3.4), in
#: characters, without the optional trailing dot.
MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
#: A URL that is canonical as it is written (most links are): lower-case scheme and
#: host of labels DNS can carry, a path, no escapes, no fragment, no empty query; a
#: port and the host's total length are checked apart.
_PLAIN = re.compile(
    r"(https?)://[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*(?::([1-9][0-9]{0,4}))?"
    r"/[\w\-.~!$&'()*+,;=:@/]*(?:\?[\w\-.~!$&'()*+,;=:@/?]+)?",
    re.ASCII,
)
#: Where a plain URL's path begins at most for its host to be within MAX_HOST_LENGTH:
#: past ``http://`` and the host (and any port).
_PLAIN_PATH_START = len("http://") + MAX_HOST_LENGTH


@lru_cache(maxsize=CACHE_SIZE)  # the same links come up page after page
def canonical_url(url: str) -> str:
    """Lower-case scheme and host, no default port, no fragment, an empty path as ``/``,
    and percent-escapes normalised (RFC 3986 6.2.2); the query keeps its order.

    Raises ``ValueError`` for a URL that cannot be parsed or names no reachable
    server: a malformed host, a port that is not a number from 1 to 65535, a host
    name with an empty label or a label or total length DNS cannot carry.
    """
    plain = _PLAIN.fullmatch(url)
    # The host ends where the path begins, found only for the rare long URL.
    if plain and (len(url) <= _PLAIN_PATH_START or url.find("/", 8) <= _PLAIN_PATH_START):
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
    elif host or scheme in DEFAULT_PORTS:
        check_host_name(host)
    port = parts.port  # raises ValueError unless a number from 0 to 65535
    if port == 0:
        raise ValueError("Port 0 is reserved: no server listens on it")
    netloc = host if port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username is not None:
        userinfo = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{userinfo}@{netloc}"
    path = _normalise_escapes(parts.path) or "/"
    return urlunsplit((scheme, netloc, path, _normalise_escapes(parts.query), ""))


def check_host_name(host: str) -> None:
    """Raise ``ValueError`` for a host name that no resolver can look up, so it is
    refused where it is read instead of failing each fetch with an IDNA error.

    One trailing dot (a fully qualified name) is allowed; other characters are left
    to the resolver, as browsers do (``_`` is common in real host names).
    """
    if not host:
        raise ValueError("No host name")
    name = host[:-1] if host.endswith(".") else host
    if len(name) > MAX_HOST_LENGTH:
        raise ValueError(f"Host name of {len(name)} characters, over {MAX_HOST_LENGTH}")
    for label in name.split("."):
        if not label:
            raise ValueError(f"Host name {host!r} has an empty label")
        if len(label) > MAX_LABEL_LENGTH:
            raise ValueError(
                f"Host name has a label of {len(label)} characters, over {MAX_LABEL_LENGTH}"
            )


def _normalise_escapes(text: str) -> str:
    """Decode escapes of unreserved characters, upper-case the others' hex digits."""

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else match.group(0).upper()

    return _ESCAPE.sub(fix, text)
