"""Memcached, through pymemcache: a pure-Python client, so nothing native can crash a
worker when a server goes away, and it installs from one wheel on every CPython.

:class:`ThreadMappedPool` stands where upstream's ``pylibmc.ThreadMappedPool`` does
(``with memcache_pool.reserve() as client``): each thread has its own connections, and
its :class:`MemcachedClient` offers the subset of ``pylibmc.Client`` the crawler uses,
with pylibmc's answers (``add_multi`` lists the keys not stored, ``incr`` of a missing
key raises).

Over several servers a key lives on the server that rendezvous hashing picks among
those in the ring, so losing or adding a server moves only its share of the keys.  A
server that refuses a connection (its process is gone, and its memory with it) leaves
the ring of every thread of the process at once, and the call that met the refusal
goes on at once to the ring without it: nothing was written to a server that is not
there, and whatever it held is gone with it.  A connection the server dropped mid-call
is followed by one connection of its own: refused, the server is gone as above (and
the call goes on); accepted, the call fails as below.  A server out of the ring is
not tried by live calls again: every ``dead_timeout`` seconds one thread probes it
(``version`` on a connection of its own), and it rejoins when the probe answers.  Any
other failure raises :class:`MemcachedError`, and its attempt is retried: a server that
times out, or drops a connection and takes the next, stays in the ring: it may be alive
and still hold its keys, and one that rejoined after others took its keys over would
bring back claims that contradict theirs (two messages each finding the URL claimed by
the other, and neither fetching it).  pymemcache's
own ``HashClient`` is not used: while a server is "retrying" it answers calls with
defaults (``get`` None, ``add`` False) instead of failing them, which a claim would read
as "nobody holds this URL".

Values are bytes, text or whole numbers, never pickled: nothing read from the store is
unpickled.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError, MemcacheUnexpectedCloseError

from crawler.environment import DEAD_SERVER_RETRY, memcached_servers, memcached_timeout

#: The flags values are stored with: those of pymemcache's own serializer.
FLAG_BYTES, FLAG_INTEGER, FLAG_TEXT = 0, 1 << 1, 1 << 4
#: Memcached's longest key; longer ones (or ones with spaces) are stored under a digest.
MAX_KEY = 250


#: What says a server's process is gone, its keys with it: it refuses connections.
GONE = (ConnectionRefusedError,)
#: What says a server dropped a connection: then one connection of its own tells whether
#: it is gone (refused) or was only cut off (it may still hold its keys).
DROPPED = (
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
    MemcacheUnexpectedCloseError,
)


class MemcachedError(Exception):
    """Memcached could not answer: a server down, hung or out of memory."""


class ServerGone(MemcachedError):
    """The server refused a connection: it left the ring, and the call may go on to the
    servers left (a lone server stays: then the call fails)."""


class NotFound(MemcachedError, KeyError):
    """``incr`` or ``decr`` of a key that is not there (pylibmc's ``NotFound``)."""


def serialize(key: bytes, value: Any) -> tuple[bytes, int]:
    if isinstance(value, bytes):
        return value, FLAG_BYTES
    if isinstance(value, str):
        return value.encode(), FLAG_TEXT
    if isinstance(value, int):
        return str(int(value)).encode(), FLAG_INTEGER
    raise TypeError(f"Memcached keeps bytes, text and whole numbers, not {type(value).__name__}")


def deserialize(key: bytes, value: bytes, flags: int) -> Any:
    if flags & FLAG_INTEGER:
        return int(value)
    if flags & FLAG_TEXT:
        return value.decode()
    return value


class _Serde:
    serialize = staticmethod(serialize)
    deserialize = staticmethod(deserialize)


def wire_key(key: str) -> str:
    """``key`` as Memcached takes it: unchanged when it is short printable ASCII without
    spaces, else a digest of it."""
    if len(key) <= MAX_KEY and key.isascii() and key.isprintable() and " " not in key:
        return key
    return "k:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class Servers:
    """The Memcached servers of a pool and which are in the ring now, shared by the
    threads of a process.

    Parameters:
      addresses(list[str]): ``host`` or ``host:port`` (11211 by default).
      timeout(float): Seconds a connection or a reply may take.
      dead_timeout(float): Seconds between probes of a server out of the ring.
    """

    def __init__(self, addresses: list[str], *, timeout: float, dead_timeout: float) -> None:
        if not addresses:
            raise ValueError("no Memcached server given")
        self.addresses = list(dict.fromkeys(addresses))
        self.timeout = timeout
        self.dead_timeout = dead_timeout
        self._lock = threading.Lock()
        self._probing = threading.Lock()
        self._probe_at: dict[str, float] = {}
        self._ring = self.addresses

    def ring(self) -> list[str]:
        """The servers keys go to now: all but those that refused a connection and have
        not answered a probe since."""
        probe_at = self._probe_at  # replaced, never changed in place: read without a lock
        if probe_at and min(probe_at.values()) <= time.monotonic():
            self._probe_due()
        return self._ring

    def _probe_due(self) -> None:
        """Probe the servers out of the ring whose time came (one thread at a time; the
        others go on with the ring as it is): each that answers rejoins."""
        if not self._probing.acquire(blocking=False):
            return
        try:
            for address, at in self._probe_at.items():
                if at <= time.monotonic():
                    self._set_out(address, None if self.answers(address) else self.dead_timeout)
        finally:
            self._probing.release()

    def answers(self, address: str) -> bool:
        """Whether the server at ``address`` answers ``version`` on a connection of its own."""
        client = self.connect(address)
        try:
            client.version()
            return True
        except (OSError, MemcacheError):
            return False
        finally:
            client.close()

    def failed(self, address: str) -> bool:
        """Take ``address`` out of the ring until a probe answers, the first probe in
        ``dead_timeout``; whether it left (a lone server stays: there is nowhere else to
        go)."""
        if len(self.addresses) == 1:
            return False
        self._set_out(address, self.dead_timeout)
        return True

    def _set_out(self, address: str, seconds: float | None) -> None:
        with self._lock:
            probe_at = {a: t for a, t in self._probe_at.items() if a != address}
            if seconds is not None:
                probe_at[address] = time.monotonic() + seconds
            self._probe_at = probe_at
            self._ring = [a for a in self.addresses if a not in probe_at]

    def connect(self, address: str) -> Client:
        host, _, port = address.rpartition(":") if ":" in address else (address, "", "11211")
        return Client(
            (host.strip("[]"), int(port)),
            serde=_Serde(),
            connect_timeout=self.timeout,
            timeout=self.timeout,
            no_delay=True,
            default_noreply=False,
        )


class MemcachedClient:
    """One thread's client of the pool's servers: the subset of ``pylibmc.Client`` the
    crawler uses.  Not thread-safe: take it from :meth:`ThreadMappedPool.reserve`."""

    def __init__(self, servers: Servers) -> None:
        self.servers = servers
        self._clients: dict[str, Client] = {}

    def _server(self, key: str) -> str:
        ring = self.servers.ring()
        if len(ring) == 1:
            return ring[0]
        if not ring:
            raise MemcachedError("every Memcached server of the pool failed lately")
        encoded = key.encode()
        return max(ring, key=lambda address: hashlib.blake2b(address.encode() + encoded).digest())

    def _run(self, address: str, command: str, *args: Any, **kwargs: Any) -> Any:
        """pymemcache's ``command`` on the server at ``address``."""
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = self.servers.connect(address)
        try:
            return getattr(client, command)(*args, **kwargs)
        except (OSError, MemcacheError) as e:
            client.close()  # a reply may be half read: the next call connects anew
            gone = isinstance(e, GONE) or (
                isinstance(e, DROPPED) and not self.servers.answers(address)
            )
            if gone and self.servers.failed(address):
                raise ServerGone(f"{address}: {type(e).__name__}: {e}") from e
            raise MemcachedError(f"{address}: {type(e).__name__}: {e}") from e
        except BaseException:
            # Interrupted mid-call (Dramatiq's time limit raises in the thread, Ctrl-C):
            # the rest of a reply may still come, and must not be read as the next one's.
            client.close()
            raise

    def _each_server(
        self,
        wired: Iterable[str],
        call: Callable[[str, list[str]], None],
        route: Callable[[str], str] = str,
    ) -> None:
        """``call(address, keys)`` for each server and the keys it holds (``route(key)``:
        the wire key that picks the server); the keys of a server that turns out gone go
        on to the servers left."""
        pending = list(wired)
        while pending:
            grouped: dict[str, list[str]] = {}
            for key in pending:
                grouped.setdefault(self._server(route(key)), []).append(key)
            pending = []
            for address, keys in grouped.items():
                try:
                    call(address, keys)
                except ServerGone:
                    pending += keys

    def _one(self, command: str, key: str, *args: Any, **kwargs: Any) -> Any:
        wired = wire_key(key)
        while True:
            try:
                return self._run(self._server(wired), command, wired, *args, **kwargs)
            except ServerGone:
                continue  # out of the ring now: the key's next server takes the call

    def ready(self) -> None:
        """Nothing to check: a server that refuses connections leaves the ring at once."""

    def together(self) -> AbstractContextManager[None]:
        """Each command is written as it comes (only ``--state``'s store groups them)."""
        return nullcontext()

    def get(self, key: str) -> Any:
        return self._one("get", key)

    def get_multi(self, keys: Iterable[str]) -> dict[str, Any]:
        wired = {wire_key(key): key for key in keys}
        found: dict[str, Any] = {}

        def get(address: str, some: list[str]) -> None:
            values = self._run(address, "get_many", some)
            found.update((wired[k], value) for k, value in values.items())

        self._each_server(wired, get)
        return found

    def set(self, key: str, value: Any, time: float = 0) -> bool:
        return bool(self._one("set", key, value, expire=int(time)))

    def add(self, key: str, value: Any, time: float = 0) -> bool:
        return bool(self._one("add", key, value, expire=int(time)))

    def add_multi(self, mapping: Mapping[str, Any], time: float = 0) -> list[str]:
        """Store each key that is absent, one round trip a server; the keys that were
        there already."""
        wired = {wire_key(key): key for key in mapping}
        taken: list[str] = []

        def add(address: str, some: list[str]) -> None:
            values = {w: mapping[wired[w]] for w in some}
            # pymemcache's ``add`` is this command for one key; here all of them at once.
            stored = self._run(address, "_store_cmd", b"add", values, int(time), False)
            taken.extend(wired[w] for w, done in stored.items() if not done)

        self._each_server(wired, add)
        return taken

    def append(self, key: str, value: bytes) -> bool:
        return bool(self._one("append", key, value))

    def _write_together(self, commands: list[tuple[str, str, str, bytes | None]]) -> list[bytes]:
        """Each ``(command, key, arguments, data)`` (``data`` None: a command without a
        data block), a server's commands written together and their one-line answers
        read after: one round trip a server.  The answers, in the order of ``commands``."""
        lines: dict[str, tuple[int, bytes]] = {}  # a key of its own a command: index, line
        for index, (command, key, arguments, data) in enumerate(commands):
            wired = wire_key(key)
            line = f"{command} {wired} {arguments}\r\n".encode()
            lines[f"{index} {wired}"] = (index, line if data is None else line + data + b"\r\n")
        answers = [b""] * len(commands)

        def write(address: str, some: list[str]) -> None:
            read = self._run(address, "_misc_cmd", [lines[k][1] for k in some], b"write", False)
            for k, answer in zip(some, read, strict=True):
                answers[lines[k][0]] = answer

        self._each_server(lines, write, route=lambda k: k.partition(" ")[2])
        return answers

    def incr_and_append(
        self, increments: Mapping[str, int], appends: Mapping[str, bytes], ttl: int | None = None
    ) -> tuple[dict[str, int | None], list[str]]:
        """Add to each counter of ``increments`` and append to each item of ``appends``
        (with ``ttl``, each made first, a counter at 0 and an item empty: an ``add`` that
        fails when it is there), in one round trip a server: each counter's new value
        (None: it was not there), and the items that were not there, left as they are."""
        commands: list[tuple[str, str, str, bytes | None]] = []
        for key, delta in increments.items():
            if ttl is not None:
                commands.append(("add", key, f"{FLAG_INTEGER} {int(ttl)} 1", b"0"))
            commands.append(("incr", key, str(int(delta)), None))
        for key, data in appends.items():
            if ttl is not None:  # an item not there made empty first, then appended to
                commands.append(("add", key, f"{FLAG_BYTES} {int(ttl)} 0", b""))
            commands.append(("append", key, f"0 0 {len(data)}", data))
        values: dict[str, int | None] = {}
        no_items = []
        for (command, key, _, _), answer in zip(
            commands, self._write_together(commands), strict=True
        ):
            if command == "add":  # STORED, or NOT_STORED for a counter there already
                continue
            if command == "incr":  # the new value, or NOT_FOUND for a counter not there
                values[key] = None if answer == b"NOT_FOUND" else int(answer)
            elif answer == b"NOT_STORED":  # append's, for an item that is not there
                no_items.append(key)
        return values, no_items

    def touch(self, key: str, time: float) -> bool:
        return bool(self._one("touch", key, int(time)))

    def touch_multi(self, keys: Iterable[str], time: float) -> None:
        """Give each of ``keys`` that is there ``time`` seconds more, in one round trip a
        server."""
        self._write_together([("touch", key, str(int(time)), None) for key in keys])

    def delete(self, key: str) -> bool:
        return bool(self._one("delete", key))

    def incr(self, key: str, delta: int = 1) -> int:
        value = self._one("incr", key, delta)
        if value is None:
            raise NotFound(key)
        return int(value)

    def decr(self, key: str, delta: int = 1) -> int:
        value = self._one("decr", key, delta)
        if value is None:
            raise NotFound(key)
        return int(value)

    def gets(self, key: str) -> tuple[Any, Any]:
        """The value and its CAS token; ``(None, None)`` when the key is not there."""
        value, token = self._one("gets", key)
        return value, token

    def cas(self, key: str, value: Any, cas: Any, time: float = 0) -> bool:
        """Store ``value`` if the key still has token ``cas``; False when it changed or is gone."""
        return bool(self._one("cas", key, value, cas, expire=int(time)))

    def get_stats(self) -> list[tuple[str, dict[str, Any]]]:
        """Each server's stats; of a pool with servers down (their keys gone with them),
        those that answer."""
        answering, failures = [], []
        for address in self.servers.addresses:
            try:
                stats = self._run(address, "stats")
            except MemcachedError as e:
                failures.append(e)
                continue
            answering.append((address, {_text(k): _text(v) for k, v in stats.items()}))
        if failures and (not answering or len(self.servers.addresses) == 1):
            raise failures[0]
        return answering

    def flush_all(self) -> None:
        for address in self.servers.addresses:
            self._run(address, "flush_all")

    def disconnect_all(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> MemcachedClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect_all()


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class ThreadMappedPool:
    """A :class:`MemcachedClient` for each thread, as ``pylibmc.ThreadMappedPool``."""

    def __init__(self, servers: Servers) -> None:
        self.servers = servers
        self._clients: dict[int, MemcachedClient] = {}

    @contextmanager
    def reserve(self) -> Iterator[MemcachedClient]:
        thread = threading.get_ident()
        client = self._clients.get(thread)
        if client is None:
            client = self._clients[thread] = MemcachedClient(self.servers)
        yield client


def servers_of(addresses: list[str] | None = None) -> Servers:
    """The servers at ``addresses`` (``MEMCACHED_SERVERS`` by default), with the
    timeout of ``MEMCACHED_TIMEOUT_MS``."""
    addresses = memcached_servers() if addresses is None else addresses
    return Servers(addresses, timeout=memcached_timeout(), dead_timeout=DEAD_SERVER_RETRY)


def from_environment() -> ThreadMappedPool:
    """The pool of ``MEMCACHED_SERVERS``, with ``MEMCACHED_TIMEOUT_MS``."""
    return ThreadMappedPool(servers_of())


def client_of(addresses: list[str] | None = None) -> MemcachedClient:
    """A client of its own, for one thread, of the servers at ``addresses``."""
    return MemcachedClient(servers_of(addresses))
