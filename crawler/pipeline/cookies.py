"""A crawl's cookies, shared by its workers: :class:`CookieStage`."""

from __future__ import annotations

import threading
import weakref

import requests

from crawler.environment import Lifetimes
from crawler.fetching import Fetched, shared_cookies
from crawler.pipeline.stage import Stage
from crawler.pipeline.visit import PageVisit
from crawler.stores import Stores


class CookieStage(Stage):
    """Keep a crawl's cookies in its store, so that a login on one worker holds on
    every worker that fetches the crawl's pages, and in no other crawl
    (:mod:`crawler.fetching.shared_cookies`).

    Before the request, a thread's session that has loaded an older version of the
    crawl's cookies than the message carries (``visit.jar``) loads the stored ones;
    after the answer, cookies it set are merged into the store and the version the
    page's links carry goes up.  A crawl without an id (upstream's bare ``crawl(url)``)
    or with ``--cookies off`` keeps each thread's jar to itself, as upstream does.

    Parameters:
      stores(Stores): The crawl's stores (the dedup store holds the cookies).
      lifetimes(Lifetimes): How long the crawl's entries live.
    """

    def __init__(self, stores: Stores, lifetimes: Lifetimes) -> None:
        self.stores = stores
        self.lifetimes = lifetimes
        self._lock = threading.Lock()
        #: The version of the crawl's cookies each session has loaded.
        self._loaded: weakref.WeakKeyDictionary[requests.Session, int] = weakref.WeakKeyDictionary()

    def _shared(self, visit: PageVisit) -> bool:
        options = visit.crawl_options
        return options.crawl_id is not None and options.cookies and visit.session is not None

    def before_request(self, visit: PageVisit) -> None:
        if not self._shared(visit):
            return
        session, crawl_id = visit.session, visit.crawl_options.crawl_id
        assert session is not None and crawl_id is not None
        with self._lock:
            loaded = self._loaded.get(session, 0)
        if visit.jar > loaded:
            with self.stores.memcache_pool.reserve() as client:
                version, cookies = shared_cookies.read(client, crawl_id)
            shared_cookies.load_into(session.cookies, cookies)
            self._remember(session, version)
        visit.jar = max(visit.jar, loaded)
        visit.cookies_before = shared_cookies.state_of(session.cookies)

    def after_response(self, visit: PageVisit, fetched: Fetched) -> None:
        session = visit.session
        if visit.cookies_before is None or session is None:
            return
        if shared_cookies.state_of(session.cookies) == visit.cookies_before:
            return
        crawl_id = visit.crawl_options.crawl_id
        assert crawl_id is not None
        with self.stores.memcache_pool.reserve() as client:
            version = shared_cookies.merge(client, crawl_id, session.cookies, self.lifetimes.grace)
        self._remember(session, version)
        visit.jar = max(visit.jar, version)

    def _remember(self, session: requests.Session, version: int) -> None:
        with self._lock:
            self._loaded[session] = max(self._loaded.get(session, 0), version)
