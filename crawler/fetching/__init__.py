"""Fetching a page: one bounded GET (deadline, size caps, redirects followed hop by
hop), the network guard every hop's connection passes (it connects to the addresses
it checked), and its failures sorted by kind."""

from crawler.fetching.bounded_fetch import (
    GET,
    Asking,
    Fetched,
    fetch,
    is_html,
    new_session,
    read_body,
)  # fmt: skip

__all__ = ["GET", "Asking", "Fetched", "fetch", "is_html", "new_session", "read_body"]
