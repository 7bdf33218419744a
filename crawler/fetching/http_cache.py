"""``--cache DIR``: every response a crawl fetches kept on disk, and given back from
there, with no request, to a later fetch of the same request: :class:`HttpCache`.

It is Scrapy's ``HTTPCACHE_ENABLED`` with its ``DummyPolicy``: an entry never goes
stale, and every answer is kept but those that say "not now" (a 5xx, 408, 429: kept,
they would be retried forever) and a ``304`` (the answer to a conditional request, not
the page).  Each hop of a fetch is one entry, redirects included, so a cached fetch
follows its redirects as the first one did and ends on the same final URL.

An entry is named by a digest of the request's method, URL and body
(:meth:`HttpCache.key`), and is one file: a line of JSON (the status, reason, headers,
URL, and whether the hop was on a public address) and the body as it was read
(decoded: its ``Content-Encoding`` dropped).  It is written to a temporary file in its
directory and renamed into place, so a crawl killed mid-write leaves no half entry, and
workers on one machine may share the directory.  An entry that cannot be read is
ignored with one warning: the page is fetched again and the entry written anew.

The network guard holds for cached hops as for fetched ones: an entry that was not on
a public address is not given to a hop that may reach only public ones (it is fetched,
and the guard decides).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers
from urllib3 import HTTPResponse

from crawler.atomic_write import write_atomically

logger = logging.getLogger(__name__)

#: The version of an entry's layout: an entry of another version is not read.
VERSION = 1
#: The headers an entry leaves out: its body is kept decoded, whole.
_DROPPED_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})
#: The statuses of a redirect (its body is not kept).
REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class Entry:
    """One cached hop: what :meth:`HttpCache.load` gives back.

    Parameters:
      response(requests.Response): The response, its body readable as a fetched one's
        (``raw``).
      public(bool): Whether the hop was on a public address when it was fetched.
    """

    response: requests.Response
    public: bool


def kept(status: int) -> bool:
    """Whether an answer of ``status`` is kept: not one that says "not now" (a 5xx,
    408, 429), nor a ``304``."""
    return status < 500 and status not in (304, 408, 429)


class HttpCache:
    """The responses of ``--cache DIR``, one file each under ``directory``.

    Parameters:
      directory(Path): Where its entries are (made on the first one written).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(method: str, url: str, body: bytes | None) -> str:
        """What names a request's entry: the SHA-1 of its method, URL and body, as
        Scrapy's request fingerprint."""
        digest = hashlib.sha1(usedforsecurity=False)
        for part in (method.upper().encode(), url.encode("utf-8", "surrogateescape"), body or b""):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return digest.hexdigest()

    def path(self, key: str) -> Path:
        """Where an entry is: under a directory named by its first two hex digits."""
        return self.directory / key[:2] / key

    def load(self, method: str, url: str, body: bytes | None, *, public_only: bool) -> Entry | None:
        """The entry of a request, if one is kept (and may be given to a hop that
        ``public_only`` may reach only public addresses); None: fetch it.  An entry
        that cannot be read is said in a warning, and is None."""
        path = self.path(self.key(method, url, body))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            logger.warning("Cannot read the cache entry %s of %r (%s): fetching it", path, url, e)
            return None
        try:
            entry = _entry_of(data, method, url)
        except (ValueError, KeyError, TypeError) as e:
            logger.warning(
                "The cache entry %s of %r is corrupt (%s): fetching it again", path, url, e
            )
            return None
        if public_only and not entry.public:
            return None
        return entry

    def save(
        self,
        method: str,
        url: str,
        body: bytes | None,
        response: requests.Response,
        content: bytes,
        *,
        public: bool,
    ) -> Entry:
        """Keep ``response`` to the request, with ``content`` its body as read, and
        return the entry as :meth:`load` will (its body to be read again).  A
        directory that cannot be written is a warning, the page going on uncached."""
        header = {
            "version": VERSION,
            "method": method.upper(),
            "url": url,
            "status": response.status_code,
            "reason": response.reason,
            "headers": [
                [name, value]
                for name, value in response.headers.items()
                if name.lower() not in _DROPPED_HEADERS
            ],
            "public": public,
            "length": len(content),
        }
        data = json.dumps(header, ensure_ascii=True).encode() + b"\n" + content
        path = self.path(self.key(method, url, body))
        try:
            write_atomically(path, data)
        except OSError as e:
            logger.warning("Cannot keep the response of %r in the cache %s: %s", url, path, e)
        return _entry_of(data, method, url)


def _entry_of(data: bytes, method: str, url: str) -> Entry:
    """The entry a file holds, checked whole; ValueError, KeyError or TypeError for
    one that is not an entry of this request."""
    line, newline, content = data.partition(b"\n")
    if not newline:
        raise ValueError("no header line")
    header: dict[str, Any] = json.loads(line)
    if header["version"] != VERSION:
        raise ValueError(f"version {header['version']!r}, not {VERSION}")
    if header["method"] != method.upper() or header["url"] != url:
        raise ValueError("it is another request's")
    if header["length"] != len(content):
        raise ValueError(f"{len(content)} bytes of body, not {header['length']}")
    status, reason = int(header["status"]), str(header["reason"] or "")
    headers = CaseInsensitiveDict({str(name): str(value) for name, value in header["headers"]})
    raw = HTTPResponse(
        body=io.BytesIO(content),
        headers=dict(headers),
        status=status,
        reason=reason,
        preload_content=False,
        decode_content=False,
        request_url=url,
    )
    response = requests.Response()
    response.status_code, response.reason, response.url = status, reason, url
    response.headers = headers
    response.encoding = get_encoding_from_headers(headers)
    response.raw = raw
    return Entry(response, bool(header["public"]))
