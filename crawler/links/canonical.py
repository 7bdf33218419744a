"""One spelling per URL, as browsers build it, so dedup sees ``HTTP://Host:80/a%7e``
and ``http://host/a~`` as one.

URLs are parsed and serialised by the WHATWG URL Standard (ada, a conformant parser:
the web-platform-tests URL data is the reference), with two steps of the crawler's
own: no fragment (it is never sent), and percent-escapes of unreserved characters
decoded, the others' hex digits upper-cased (RFC 3986 6.2.2), so that
``/a%7e`` and ``/a~`` are one page.  A URL that names no server anyone could reach (a
port 0, a host name DNS cannot carry) raises ``ValueError`` here, where a page's links
are parsed one by one, rather than failing each fetch.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

import ada_url

from crawler.links.cleaning import CACHE_SIZE

#: The longest host name and host name label DNS can carry (RFC 1035 2.3.4), in
#: characters, without the optional trailing dot.
MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
#: A URL that is canonical as it is written (most links are): lower-case scheme and
#: host of labels DNS can carry, a path without dot segments, no escapes, no
#: fragment, no empty query; a port and the host's total length are checked apart.
_PLAIN = re.compile(
    r"(https?)://((?:[a-z0-9-]{1,63}\.)*([a-z0-9-]{1,63}))(?::([1-9][0-9]{0,4}))?"
    r"/[\w\-.~!$&'()*+,;=:@/]*(?:\?[\w\-.~!$&()*+,;=:@/?]+)?",  # a query's ' is escaped
    re.ASCII,
)
#: A host's last label that makes it an IPv4 address to the URL Standard.
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")
#: An IPv4 address as the URL Standard serialises it: four decimal numbers of 0 to
#: 255 without leading zeros (``127.0.0.1``; not ``127.1`` or ``0x7f.0.0.1``).
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
#: Where a plain URL's path begins at most for its host to be within MAX_HOST_LENGTH:
#: past ``http://`` and the host (and any port).
_PLAIN_PATH_START = len("http://") + MAX_HOST_LENGTH
DEFAULT_PORTS = {"http": 80, "https": 443}
#: ada's kind of host that is a domain name (not an IPv4 or IPv6 address).
_DOMAIN = ada_url.HostType.DEFAULT


@lru_cache(maxsize=CACHE_SIZE)  # the same links come up page after page
def canonical_url(url: str) -> str:
    """The URL as the WHATWG URL Standard serialises it (lower-case scheme and host,
    IDNA, IPv4 and IPv6 addresses in their one form, no default port, dot segments
    resolved, ``\\`` read as ``/``, tabs and newlines dropped), without its fragment
    and with escapes of unreserved characters decoded.

    Raises ``ValueError`` for a URL the standard refuses, a port 0, or a host name
    with a label or total length DNS cannot carry.
    """
    plain = _PLAIN.fullmatch(url)
    # The host ends where the path begins, found only for the rare long URL.
    if (
        plain
        and "/." not in url
        # A host that is an IPv4 address is parsed, unless in its one form already.
        and (not _NUMBER.fullmatch(plain.group(3)) or _IPV4.fullmatch(plain.group(2)))
        and (len(url) <= _PLAIN_PATH_START or url.find("/", 8) <= _PLAIN_PATH_START)
    ):
        port = plain.group(4)
        if port is None or (int(port) <= 65535 and int(port) != DEFAULT_PORTS[plain.group(1)]):
            return url
    return _canonicalise(url)


def _canonicalise(url: str) -> str:
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        raise ValueError(_why_not(url)) from None
    if parsed.port == "0":
        raise ValueError("Port 0 is reserved: no server listens on it")
    if parsed.host_type == _DOMAIN and parsed.protocol in ("http:", "https:"):
        check_host_name(parsed.hostname)
        for label in parsed.hostname.split("."):
            if label.startswith("xn--") and ada_url.idna_to_unicode(label) == label:
                raise ValueError(f"Host name label {label!r} is not valid punycode")
    if parsed.hash:
        parsed.hash = ""
    href: str = parsed.href
    if "%" not in href:
        return href
    scheme, separator, rest = href.partition("://")
    authority, slash, tail = rest.partition("/")
    path, question, query = tail.partition("?")
    path, query = _normalise_escapes(path), _normalise_escapes(query)
    return f"{scheme}{separator}{authority}{slash}{path}{question}{query}"


def _why_not(url: str) -> str:
    """Why the URL Standard refuses ``url``, in words: urllib's, where it can say."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is no number from 0 to 65535)
        if not parts.hostname:
            return "No host name"
    except ValueError as e:
        return str(e)
    return "Not a URL by the WHATWG URL Standard"


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
