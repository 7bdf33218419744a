"""Where ``--items`` go, as the command line names them: a file, or a ``postgresql://``
URL and its table; checked before the crawl starts (:func:`checked_address`).  Apart
from the sinks (:mod:`crawler.items.sinks`), so that the option's check loads no sink."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: The table a ``postgresql://`` sink writes to when its URL names none.
DEFAULT_TABLE = "items"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def is_database(address: str) -> bool:
    return address.startswith(("postgresql://", "postgres://"))


def checked_address(value: Any) -> str:
    """``--items``' value: a file name, or a ``postgresql://`` URL whose ``table`` (if
    given) is a plain name, ``schema.name`` at most; ValueError saying what is wrong."""
    if not isinstance(value, (str, Path)) or not str(value):
        raise ValueError("a file name or a postgresql:// URL")
    address = str(value)
    if "://" in address and not is_database(address):
        raise ValueError("only postgresql:// URLs are sinks (else a file name)")
    if is_database(address):
        table_of(address)
    return address


def table_of(address: str) -> tuple[str, ...]:
    """The schema and name of a ``postgresql://`` sink's table."""
    parts = dict(parse_qsl(urlsplit(address).query)).get("table", DEFAULT_TABLE).split(".")
    if len(parts) > 2 or not all(_NAME.fullmatch(part) for part in parts):
        raise ValueError("table= must be a name (letters, digits, _), or schema.name")
    return tuple(parts)
