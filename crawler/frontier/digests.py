"""The short names the frontier keeps things under: digests of URLs and of message ids."""

from __future__ import annotations

import base64
import hashlib


def url_digest(url: str, crawl_id: str) -> bytes:
    """A crawl's 16-byte digest of a URL: its claim's key and its journal entry."""
    return hashlib.blake2b(f"{crawl_id} {url}".encode(), digest_size=16).digest()


def owner_token(message_id: str) -> bytes:
    """What a claim holds of the message that owns it: 8 bytes of its id's digest."""
    return hashlib.blake2b(message_id.encode(), digest_size=8).digest()


def short_id(message_id: str) -> str:
    """A message id in 11 characters, for the keys kept per message."""
    return base64.urlsafe_b64encode(owner_token(message_id)).decode().rstrip("=")
