"""pylibmc's ``ThreadMappedPool``, except that a client of one server that failed is
replaced.

After a failed multi-key call (``add_multi``) libmemcached can keep a server
"disabled until timed retry" for good, even once Memcached is back: seen here
with pylibmc 1.6.3.  A fresh clone of the master client connects as it should.
A client of a pool of servers is kept: it took the failed server out of its ring
(``remove_failed``) and tries it again after ``dead_timeout``, whereas a fresh clone
would meet the dead server again.

Beside it, pylibmc's other quirks worked around in one place: ``touch`` and the
stats of a pool with a server down.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pylibmc


class ThreadMappedPool(pylibmc.ThreadMappedPool):  # type: ignore[misc]
    @contextmanager
    def reserve(self) -> Iterator[Any]:
        key = self.current_key
        client = self.pop(key, None)
        if client is None:
            client = self.master.clone()
        failed = False
        try:
            yield client
        except pylibmc.Error:
            if len(self.master.addresses) == 1:
                failed = True
                client.disconnect_all()  # dropped: the next reserve() clones a fresh one
            raise
        finally:
            if not failed:
                self[key] = client


def touch_all(client: Any, keys: list[str], ttl: int) -> None:
    """Give each of ``keys`` that exists ``ttl`` more seconds.

    pylibmc's ``touch`` over the binary protocol waits out a 2-second timeout per
    existing key (pylibmc 1.6.3, libmemcached 1.0), so a binary client touches through a
    text-protocol client on the same servers, with the same key distribution.
    """
    if not (isinstance(client, pylibmc.Client) and client.binary):
        for key in keys:
            client.touch(key, ttl)
        return
    text = pylibmc.Client(client.addresses, binary=False, behaviors=client.behaviors)
    try:
        for key in keys:
            text.touch(key, ttl)
    finally:
        text.disconnect_all()


#: The behaviours a client of one server takes from the pool's client.
TIMEOUTS = ("connect_timeout", "send_timeout", "receive_timeout", "_poll_timeout")


def server_stats(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """``client.get_stats()``; for a pool of Memcached servers with one down (its keys
    gone with it), the stats of those that answer, asked one by one."""
    try:
        return list(client.get_stats())
    except pylibmc.Error:
        if not isinstance(client, pylibmc.Client) or len(client.addresses) == 1:
            raise
    answering = []
    timeouts = {name: client.behaviors[name] for name in TIMEOUTS}
    for address in client.addresses:
        one = pylibmc.Client([address], binary=True, behaviors=timeouts)
        try:
            answering += one.get_stats()
        except pylibmc.Error:
            pass
        finally:
            one.disconnect_all()
    return answering
