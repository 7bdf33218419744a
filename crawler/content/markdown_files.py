"""``--markdown DIR``: one Markdown file a page, its main content under front matter that
says where it came from (:func:`write_page`).

A page's file is named by its URL (:func:`relative_path`): ``DIR/<host>/<path>.md``, a
path ending in ``/`` as ``index.md``, a query as ``--`` and 12 hex digits of its digest.
Every part is made safe on every filesystem: no ``..``, no separator, no character
Windows refuses (``<>:"|?*``, control characters: each as ``%XX``), no name Windows
reserves (``CON``, ``NUL``, ``COM1``...), at most 200 bytes a part (a longer one cut and
given a digest); so a file is never outside DIR, and two URLs are two files.

The front matter is YAML, each value written as a JSON string or number (JSON is YAML).
A file is written to a temporary file beside it and renamed into place, so a killed
crawl leaves whole files, and a page crawled again after a crash writes its one file
again, whole.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from crawler.atomic_write import write_atomically

#: The longest part of a file's path, in bytes of UTF-8.
MAX_PART = 200
_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*%]')
_RESERVED = re.compile(r"(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?", re.IGNORECASE)


def relative_path(url: str) -> Path:
    """Where ``url``'s Markdown file is under DIR (see the module)."""
    split = urlsplit(url)
    host = split.hostname or "_"
    if split.port is not None:
        host += f"_{split.port}"
    segments = [unquote(part) for part in split.path.split("/")]
    directories, name = segments[1:-1] if len(segments) > 1 else [], segments[-1]
    name = name or "index"
    if name.lower().endswith((".html", ".htm", ".xhtml", ".php", ".asp", ".aspx")):
        name = name.rsplit(".", 1)[0]
    if split.query:
        name += "--" + hashlib.sha256(split.query.encode()).hexdigest()[:12]
    parts = [_safe(host), *(_safe(d) for d in directories if d), _safe(name, suffix=".md")]
    return Path(*parts)


def _safe(part: str, suffix: str = "") -> str:
    """One part of a file's path, safe on every filesystem (see the module)."""
    text = _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", part)
    if text in ("", ".", "..") or text.endswith((".", " ")) or _RESERVED.fullmatch(text):
        text = "_" + text + "_"
    limit = MAX_PART - len(suffix.encode())
    if len(text.encode()) > limit:
        digest = hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        text = text.encode()[: limit - 17].decode("utf-8", "ignore") + "-" + digest
    return text + suffix


def front_matter(fields: Mapping[str, Any]) -> str:
    """YAML front matter of ``fields`` (those that are not None), one a line."""
    lines = [f"{name}: {json.dumps(value, ensure_ascii=False)}" for name, value in fields.items()
             if value is not None]  # fmt: skip
    return "---\n" + "\n".join(lines) + "\n---\n\n"


def write_page(directory: Path, url: str, fields: Mapping[str, Any], markdown: str) -> Path:
    """Write the page's file (front matter of ``fields``, then ``markdown``) under
    ``directory``, whole or not at all; its path."""
    path = directory / relative_path(url)
    text = front_matter(fields) + markdown.rstrip("\n") + "\n"
    write_atomically(path, text.encode("utf-8", "surrogatepass"))
    return path
