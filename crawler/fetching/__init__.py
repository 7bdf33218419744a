"""Fetching a page: one bounded GET (deadline, size caps, redirects followed hop by
hop), the network guard every hop's connection passes (it connects to the addresses
it checked), and its failures sorted by kind."""

from crawler.fetching.bounded_fetch import Fetched, fetch, is_html, new_session, read_body

__all__ = ["Fetched", "fetch", "is_html", "new_session", "read_body"]
