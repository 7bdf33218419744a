"""The dedup store in Redis (``DEDUP_URL=redis://...``): what lives in Memcached by
default (claims, the crawl's journal, counters, budgets, robots.txt and rate limits),
with the same operations, in a store that keeps it.

Memcached is a cache: it evicts when full and forgets everything when restarted. A
Redis with an append-only file keeps every claim across a restart, and with
``maxmemory-policy noeviction`` refuses a write rather than drop a key (the attempt is
then retried). Each operation is one command or one Lua script, so each is as atomic
as its Memcached counterpart: ``add`` is ``SET NX``, ``add_multi`` a pipeline of them,
``incr`` fails on a missing key, ``append`` keeps the key's expiry, ``cas`` compares
values.

``DEDUP_URL=redis+cluster://host:port`` uses a Redis Cluster instead (any one node's
address; the client finds the others).  Every write touches one key, so each goes to
the node that owns it; reads of several keys are split by slot.  A crawl's own figures
share a hash tag (:func:`crawler.frontier.counters.crawl_key`); its per-URL keys spread
over every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

# ARGV[2], when given: the seconds of a counter made now, at its amount.
_INCR = """
if redis.call('exists', KEYS[1]) == 1 then return redis.call('incrby', KEYS[1], ARGV[1]) end
if ARGV[2] then redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2]) return tonumber(ARGV[1]) end
"""
# ARGV[2], when given: the seconds of an item made now (then appended to).
_APPEND = """
if redis.call('exists', KEYS[1]) == 0 then
  if not ARGV[2] then return 0 end
  redis.call('set', KEYS[1], '', 'EX', ARGV[2])
end
redis.call('append', KEYS[1], ARGV[1])
return 1
"""
_CAS = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[3]) > 0 then redis.call('set', KEYS[1], ARGV[2], 'EX', ARGV[3])
else redis.call('set', KEYS[1], ARGV[2]) end
return 1
"""
# KEYS[1]: the mark, ARGV[1] its seconds; KEYS[2..]: the counters, ARGV[2..] their
# amounts; the last ARGV: the seconds of a counter made now.  Nothing when the mark was
# there (counted before); else each counter's new value.
_COUNT_ONCE = """
if not redis.call('set', KEYS[1], 1, 'NX', 'EX', ARGV[1]) then return false end
local values, ttl = {}, ARGV[#ARGV]
for i = 2, #KEYS do
  local made = redis.call('exists', KEYS[i]) == 0
  values[i - 1] = redis.call('incrby', KEYS[i], ARGV[i])
  if made then redis.call('expire', KEYS[i], ttl) end
end
return values
"""


class RedisStoreClient:
    """The subset of ``pylibmc.Client`` the crawler uses, on one Redis (thread-safe)."""

    def __init__(self, client: redis.Redis | redis.RedisCluster) -> None:
        self.redis = client
        #: Whether a command failed on the connection since every node last answered.
        self.suspect = False
        self.cluster = isinstance(client, redis.RedisCluster)
        self._incr = client.register_script(_INCR)
        self._append = client.register_script(_APPEND)
        self._cas = client.register_script(_CAS)
        self._count_once = client.register_script(_COUNT_ONCE)

    def together(self) -> AbstractContextManager[None]:
        """Each command is written as it comes (only ``--state``'s store groups them)."""
        return nullcontext()

    def ready(self) -> None:
        """Raise the store's error while a node that failed lately does not answer: a
        worker then fetches no page whose links and ending it could not record (a
        cluster's primary that died answers again once its replica took its place)."""
        if self.suspect:
            if self.cluster:
                self.redis.ping(target_nodes=redis.RedisCluster.PRIMARIES)
            else:
                self.redis.ping()
            self.suspect = False

    def get(self, key: str) -> Any:
        return self.redis.get(key)

    def get_multi(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(keys)
        if not keys:
            return {}
        if isinstance(self.redis, redis.RedisCluster):
            values = self.redis.mget_nonatomic(keys)  # a cluster's keys: one MGET per node
        else:
            values = self.redis.mget(keys)
        return {key: value for key, value in zip(keys, values, strict=True) if value is not None}

    def set(self, key: str, value: Any, time: float = 0) -> bool:
        return bool(self.redis.set(key, value, ex=_seconds(time)))

    def add(self, key: str, value: Any, time: float = 0) -> bool:
        return bool(self.redis.set(key, value, ex=_seconds(time), nx=True))

    def add_multi(self, mapping: Mapping[str, Any], time: float = 0) -> list[str]:
        """Store each key that is absent; return the keys that were already there."""
        pipeline = self.redis.pipeline(transaction=False)
        for key, value in mapping.items():
            pipeline.set(key, value, ex=_seconds(time), nx=True)
        stored = pipeline.execute()
        return [key for key, done in zip(mapping, stored, strict=True) if not done]

    def incr(self, key: str, delta: int = 1) -> int:
        value = self._incr(keys=[key], args=[delta])
        if value is None:
            raise KeyError(key)  # as Memcached's NotFound: the counter must be added first
        return int(value)

    def decr(self, key: str, delta: int = 1) -> int:
        return self.incr(key, -delta)

    def delete(self, key: str) -> bool:
        return bool(self.redis.delete(key))

    def append(self, key: str, value: bytes) -> bool:
        return bool(self._append(keys=[key], args=[value]))

    def incr_and_append(
        self, increments: Mapping[str, int], appends: Mapping[str, bytes], ttl: int | None = None
    ) -> tuple[dict[str, int | None], list[str]]:
        """Add to each counter (one not there made at its amount, with ``ttl``) and
        append to each item, in one pipeline on one Redis (a command each on a cluster):
        each counter's new value (None: it was not there), and the items that were not
        there, left as they are."""
        made = [] if ttl is None else [_seconds(ttl) or 1]
        if self.cluster:
            answers = [
                self._incr(keys=[key], args=[delta, *made]) for key, delta in increments.items()
            ]
            answers += [
                self._append(keys=[key], args=[data, *made]) for key, data in appends.items()
            ]
        else:
            pipeline = self.redis.pipeline(transaction=False)
            for key, delta in increments.items():
                self._incr(keys=[key], args=[delta, *made], client=pipeline)
            for key, data in appends.items():
                self._append(keys=[key], args=[data, *made], client=pipeline)
            answers = pipeline.execute()
        counted = answers[: len(increments)]
        values = {
            key: None if value is None else int(value)
            for key, value in zip(increments, counted, strict=True)
        }
        appended = answers[len(increments) :]
        no_items = [key for key, done in zip(appends, appended, strict=True) if not done]
        return values, no_items

    def count_once(
        self, mark: str, time: float, increments: Mapping[str, int], ttl: float
    ) -> dict[str, int] | None:
        """Add ``mark`` and, only if it was not there, add to each counter (one made now
        lives ``ttl`` seconds), in one Lua script: Redis runs it whole or not at all, so
        a call whose reply was lost (the connection dropped after Redis ran it) and is
        made again finds its mark and counts nothing more.  Each counter's new value;
        None when the mark was there.  On a cluster every key shares one hash tag."""
        keys = [mark, *increments]
        args = [_seconds(time) or 1, *(int(delta) for delta in increments.values())]
        values = self._count_once(keys=keys, args=[*args, _seconds(ttl) or 1])
        if values is None:
            return None
        return {key: int(value) for key, value in zip(increments, values, strict=True)}

    def touch(self, key: str, time: float) -> bool:
        return bool(self.redis.expire(key, _seconds(time) or 1))

    def touch_multi(self, keys: Iterable[str], time: float) -> None:
        """Give each of ``keys`` that is there ``time`` seconds more, in one pipeline."""
        pipeline = self.redis.pipeline(transaction=False)
        for key in keys:
            pipeline.expire(key, _seconds(time) or 1)
        pipeline.execute()

    def gets(self, key: str) -> tuple[Any, Any]:
        """The value and, as its CAS token, the value itself (compared by :meth:`cas`)."""
        value = self.redis.get(key)
        return value, value

    def cas(self, key: str, value: Any, cas: Any, time: float = 0) -> bool:
        if cas is None:
            return False
        return bool(self._cas(keys=[key], args=[cas, value, _seconds(time) or 0]))

    def get_stats(self) -> list[tuple[str, dict[str, Any]]]:
        """Redis's evicted keys, under Memcached's name for them (per node of a cluster)."""
        if not self.cluster:
            info = self.redis.info("stats")
            return [("redis", {"evictions": info.get("evicted_keys", 0)})]
        nodes = self.redis.info("stats", target_nodes=redis.RedisCluster.ALL_NODES)
        if "evicted_keys" in nodes:  # a cluster of one node answers as a single Redis
            nodes = {"redis": nodes}
        return [(node, {"evictions": info.get("evicted_keys", 0)}) for node, info in nodes.items()]


def _seconds(time: float) -> int | None:
    return int(time) if time else None


#: Seconds a Redis command of the store may wait, below the actor's 10 s time limit.
TIMEOUT = 5


class RedisStorePool:
    """Stands where ``pylibmc.ThreadMappedPool`` does: ``with pool.reserve() as client``."""

    def __init__(self, url: str) -> None:
        self.client = RedisStoreClient(connect(url))

    @contextmanager
    def reserve(self) -> Iterator[RedisStoreClient]:
        try:
            yield self.client
        except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterDownError):
            self.client.suspect = True
            raise


#: The schemes of ``DEDUP_URL`` that name a Redis Cluster, and the plain ones they stand for.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def connect(url: str, cluster: type[redis.RedisCluster] = redis.RedisCluster) -> Any:
    """A client of the Redis, or of the Redis Cluster (with client class ``cluster``),
    at ``url``.  Bounded waits, as Memcached's: a hung Redis fails the attempt, which
    is retried."""
    parts = urlsplit(url)
    if parts.scheme in CLUSTER_SCHEMES:
        plain = urlunsplit((CLUSTER_SCHEMES[parts.scheme], *parts[1:]))
        return cluster.from_url(plain, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)
    return redis.Redis.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)
