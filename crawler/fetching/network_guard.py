"""Always on: a link from a public page never leads to a loopback or private address.

A hop is public when every address its host name resolves to is global
(:func:`is_global_address`); once a fetch, or the page that linked to it, was public,
a hop to a name with any other address is refused with :class:`PrivateAddress`.  A
crawl seeded on a private address (a test site, an intranet) may stay there.  Whether a
fetch touched a public address is a value the fetch returns, never state kept between
messages.

What is pinned: a direct connection (no proxy) resolves its host name once, when it is
opened, checks every address of that answer (:func:`check_addresses`), and connects to
those very addresses; the Host header and the TLS server name stay the URL's host.  A
name that answers differently a moment later (DNS rebinding, a short TTL) cannot send
that connection elsewhere.  Nothing is cached here: each new connection asks the
system resolver again, so no answer outlives its TTL in this code; a keep-alive
connection stays with the address it connected to.

Names are judged as a browser resolves them: ``localhost`` and every name under it
(``a.localhost``, ``localhost.``) are loopback before any look-up (:func:`is_localhost`:
the WHATWG and RFC 6761 say so, and Chromium maps them to loopback itself, while this
machine's resolver may not know them and would leave them unresolved, which counts as
public).

What is not pinned: behind a proxy (``HTTP_PROXY`` and kin in the environment) the
proxy resolves the name, so only :func:`check_hop` runs, on the name as it resolves
here and now; an answer that changes between that look-up and the proxy's is not
caught.  :func:`check_hop` is also how a caller learns whether a host it did not
connect to itself (robots.txt's, read through a cache) counts as public.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from crawler.errors import PermanentError

#: NAT64's well-known prefix (RFC 6052): its last 32 bits are the IPv4 address a
#: NAT64 gateway connects to.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
#: IPv4-compatible addresses (RFC 4291, deprecated): ``::a.b.c.d``.
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


class PrivateAddress(PermanentError):
    """A hop that may reach only global addresses resolved to some other one.

    Parameters:
      host(str): The host name (or address) of the hop, as the URL has it.
    """

    def __init__(self, host: str) -> None:
        super().__init__(
            f"refusing to follow a link from a public address to {host}, which is not public"
        )
        self.host = host


def is_global_address(address: str) -> bool:
    """Whether ``address`` (as ``getaddrinfo`` answers it) is globally routable, the
    IPv4 addresses an IPv6 one embeds included.

    Python 3.11's ``is_global`` judges ``::ffff:127.0.0.1``, ``::127.0.0.1`` and
    ``2002:7f00:1::`` by their IPv6 form alone, so those are unwrapped here: an
    IPv4-mapped address is the IPv4 address it maps (a dual-stack socket connects
    there); the other forms must be global themselves and embed only global ones.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # fe80::1%eth0: the scope is no part
    if isinstance(ip, ipaddress.IPv4Address):
        return ip.is_global
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_global
    return ip.is_global and all(embedded.is_global for embedded in _embedded_ipv4(ip))


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: 6to4's, Teredo's server and
    client, NAT64's and an IPv4-compatible address's."""
    embedded = []
    if ip.sixtofour is not None:
        embedded.append(ip.sixtofour)
    if ip.teredo is not None:
        embedded.extend(ip.teredo)
    if ip in _NAT64 or ip in _IPV4_COMPATIBLE:
        embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return embedded


def is_localhost(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a name under it, which browsers resolve to
    loopback without asking DNS (RFC 6761 section 6.3, the WHATWG's "potentially
    trustworthy" origins, Chromium's ``IsLocalHostname``); a trailing dot and case do
    not matter."""
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def check_addresses(host: str, addresses: Iterable[str], *, public_only: bool) -> bool:
    """Whether every one of the ``addresses`` that ``host`` resolved to is global
    (never, for a name :func:`is_localhost` calls loopback).

    Parameters:
      host(str): The name that was resolved, for the error's message.
      addresses(Iterable[str]): Its addresses, as ``getaddrinfo`` answered them.
      public_only(bool): The fetch or the referring page was public: an address that
        is not global is refused with :class:`PrivateAddress`.
    """
    public = not is_localhost(host) and all(is_global_address(a) for a in addresses)
    if public_only and not public:
        raise PrivateAddress(host)
    return public


def is_public(host: str) -> bool:
    """True when every address ``host`` resolves to right now is global.

    Asked afresh every time.  ``localhost`` and the names under it are loopback, asked
    nothing (:func:`is_localhost`).  Any other name that does not resolve counts as
    public: the fetch itself fails on it with a clear error.
    """
    if is_localhost(host):
        return False
    try:
        answers = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return True
    return check_addresses(host, (str(answer[4][0]) for answer in answers), public_only=False)


def check_hop(url: str, public_so_far: bool) -> bool:
    """Refuse a hop to a host name with a non-global address once the fetch (or the
    page that linked to it) has touched a public one; return whether the fetch has,
    this hop included.

    This checks the name, not a connection: it pins nothing (see the module's
    docstring for where it is the only check).

    Parameters:
      url(str): The hop's URL.
      public_so_far(bool): The fetch, or the page that linked to it, was public.

    Raises :class:`PrivateAddress`, or ``ValueError`` (``UnicodeError``) for a host
    name no resolver accepts.
    """
    host = urlsplit(url).hostname or ""
    public = is_public(host)
    if public_so_far and not public:
        raise PrivateAddress(host)
    return public_so_far or public
