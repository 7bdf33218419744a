"""Fetching a page: one bounded GET (deadline, size caps, redirects followed hop by
hop), the network guard every hop passes, and its failures sorted by kind."""

from crawler.fetching.bounded_fetch import Fetched, fetch, is_html, new_session, read_body

__all__ = ["Fetched", "fetch", "is_html", "new_session", "read_body"]
