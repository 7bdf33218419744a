"""A crawl's cookies, shared by every worker process and thread that fetches its pages.

A thread's session keeps the cookies its answers set (:mod:`crawler.fetching.sessions`);
a login form's POST answered with a session cookie on one worker must log in the
crawl's pages on every other worker too, and no other crawl's.  So a crawl's cookies
are kept in its store as well, under one key (:func:`jar_key`) with a version:

* a page whose answer changed its session's cookies merges them into the stored jar
  (``gets``/``cas``: two workers' cookies at once both land), and the version goes up;
* the links that page sends carry that version (their message's ``jar`` argument), and
  a session that has loaded an older one loads the stored jar before it fetches them.

So a page found after a login is fetched with the login's cookies, wherever it is
fetched; a crawl whose answers set no cookies costs nothing more.  The stored jar is
kept within :data:`MAX_JAR_BYTES`: cookies past it stay the thread's that got them.
Pages a sitemap lists carry no version (a thread's own cookies go with them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from requests.cookies import RequestsCookieJar, create_cookie

from crawler.frontier.counters import crawl_key
from crawler.stores.client import StoreClient

#: Attempts at merging a page's cookies into the stored jar, other workers' merges
#: landing in between.
MERGE_TRIES = 8
#: The stored jar's size, in bytes of JSON at most (a Memcached value holds 1 MiB): past
#: it, the cookies a page set stay its thread's, as upstream's do.
MAX_JAR_BYTES = 256 * 1024


def jar_key(crawl_id: str) -> str:
    """The store's key of a crawl's shared cookies."""
    return crawl_key(crawl_id, "cookies")


def state_of(jar: Iterable[Any]) -> frozenset[tuple[Any, ...]]:
    """What a jar holds, to tell whether an answer changed it."""
    return frozenset((c.domain, c.path, c.name, c.value, c.expires) for c in jar)


def dumped(jar: Iterable[Any]) -> list[dict[str, Any]]:
    """A jar's cookies as JSON values."""
    return [
        {
            "name": c.name, "value": c.value, "domain": c.domain, "path": c.path,
            "secure": c.secure, "expires": c.expires, "rest": dict(c._rest),
        }
        for c in jar
    ]  # fmt: skip


def load_into(jar: RequestsCookieJar, cookies: Iterable[dict[str, Any]]) -> None:
    """Set ``cookies`` (as :func:`dumped` made them) in ``jar``."""
    for cookie in cookies:
        jar.set_cookie(create_cookie(**cookie))  # type: ignore[no-untyped-call]


def read(client: StoreClient, crawl_id: str) -> tuple[int, list[dict[str, Any]]]:
    """The stored jar's version and cookies (0 and none: nothing stored)."""
    return _decoded(client.get(jar_key(crawl_id)))


def _decoded(stored: Any) -> tuple[int, list[dict[str, Any]]]:
    if stored is None:
        return 0, []
    value = json.loads(stored)
    return int(value["version"]), list(value["cookies"])


def merge(client: StoreClient, crawl_id: str, jar: RequestsCookieJar, ttl: int) -> int:
    """Merge ``jar``'s cookies into the crawl's stored jar (``jar``'s value of a cookie
    wins), and load the stored ones it lacked into ``jar``: the new version."""
    key = jar_key(crawl_id)
    for _ in range(MERGE_TRIES):
        stored, token = client.gets(key)
        version, cookies = _decoded(stored)
        merged = RequestsCookieJar()
        load_into(merged, cookies)
        load_into(merged, dumped(jar))
        value = json.dumps({"version": version + 1, "cookies": dumped(merged)}).encode()
        if len(value) > MAX_JAR_BYTES:  # a site that sets a new cookie on every page...
            return version
        done = (
            client.add(key, value, time=ttl)
            if stored is None
            else client.cas(key, value, token, time=ttl)
        )
        if done:
            load_into(jar, cookies)
            load_into(jar, dumped(merged))
            return version + 1
    raise RuntimeError(f"the crawl's cookies changed {MERGE_TRIES} times while merging")
