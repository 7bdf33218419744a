"""Which site a host belongs to: its registrable domain (eTLD+1), for ``--same-site``.

``blog.example.co.uk`` and ``www.example.co.uk`` are one site, ``example.co.uk``;
``a.github.io`` and ``b.github.io`` are two, since ``github.io`` is a public suffix
(the Public Suffix List's private section is included, as browsers include it).
The list is the snapshot ``tldextract`` ships with: nothing is downloaded, ever.
"""

from __future__ import annotations

import ipaddress
import threading
from functools import cache, lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tldextract


@cache
def _extractor() -> tldextract.TLDExtract:
    """The bundled Public Suffix List only: no download, no cache on disk.  Made on
    first use: a process that never asks a host's site (upstream's commands, a worker
    before a page of a ``--same-site`` crawl, ``crawler crawl --same-domain``) does not
    load ``tldextract`` (some 10-15 ms of its start)."""
    import tldextract

    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )


#: The first look-up builds the list's trie (about 25 ms): once, not once a thread.
_building = threading.Lock()


def prepare() -> None:
    """Build the suffix list's trie now: before forking, so that processes share it."""
    site_of("example.com")


@lru_cache(maxsize=65536)
def site_of(host: str) -> str:
    """The registrable domain of ``host`` (lower case, no trailing dot); an IP
    address, ``localhost`` or a bare public suffix is a site of its own."""
    host = host.lower().rstrip(".")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    with _building:
        return _extractor()(host).top_domain_under_public_suffix or host
