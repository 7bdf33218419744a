"""``--files DIR``: the files a crawl's items name, kept on disk by their content's digest,
as Scrapy's ``FilesPipeline`` keeps them under ``FILES_STORE`` (:class:`FileStore`).

A file is ``DIR/full/<SHA-256 of its bytes><extension>``: its extension is its URL's
(``.pdf``), else the one its content type has (``application/pdf``), else none.  Two
URLs with the same bytes are one file.  A file is written to a temporary file beside it
and renamed into place, so a crawl killed mid-write leaves no half file, and workers on
one machine may share the directory.

What an item says of a file (its ``files`` entry, :func:`entry`) is Scrapy's, with the
type and size besides: ``{"url", "path", "checksum", "digest", "type", "size",
"status"}``, ``path`` relative to DIR.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from crawler.atomic_write import write_atomically

#: The folder under DIR that holds the files, as Scrapy's ``full/``.
FOLDER = "full"
#: An extension kept from a URL: a dot, then 1 to 8 letters or digits.
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}")
#: What ``status`` says of a file downloaded (Scrapy's word, for a file it fetched).
DOWNLOADED = "downloaded"


class FileStore:
    """The files of one crawl's ``--files`` directory.

    Parameters:
      directory(Path): DIR (made on the first file written).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def keep(self, url: str, content: bytes, content_type: str | None) -> dict[str, Any]:
        """Write ``content`` (the body of ``url``) unless a file of the same bytes is
        there already, and return the item's entry of it (:func:`entry`).  OSError when
        the directory cannot be written."""
        digest = hashlib.sha256(content).hexdigest()
        name = f"{FOLDER}/{digest}{extension(url, content_type)}"
        path = self.directory / name
        if not path.exists():
            write_atomically(path, content)
        return entry(url, name, digest, media_type(content_type), len(content))


def entry(url: str, path: str, digest: str, content_type: str | None, size: int) -> dict[str, Any]:
    """An item's entry of a file downloaded: its URL, its ``path`` under DIR, its
    SHA-256 (``digest``; ``checksum`` as well, Scrapy's name), content type and size."""
    return {
        "url": url, "path": path, "checksum": digest, "digest": f"sha256:{digest}",
        "type": content_type, "size": size, "status": DOWNLOADED,
    }  # fmt: skip


def extension(url: str, content_type: str | None) -> str:
    """A file's extension: its URL's last dotted part, else its content type's, else ''."""
    name = unquote(urlsplit(url).path).rpartition("/")[2]
    dot = name.rfind(".")
    if dot > 0 and _EXTENSION.fullmatch(name[dot:]):
        return name[dot:].lower()
    media = media_type(content_type)
    return (mimetypes.guess_extension(media) or "") if media else ""


def media_type(content_type: str | None) -> str | None:
    """``application/pdf`` of ``application/pdf; charset=...``; None for none."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media or None
