"""pylibmc's ``ThreadMappedPool``, except that a client that failed is replaced.

After a failed multi-key call (``add_multi``) libmemcached can keep a server
"disabled until timed retry" for good, even once Memcached is back: seen here
with pylibmc 1.6.3.  A fresh clone of the master client connects as it should.
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
            failed = True
            client.disconnect_all()  # dropped: the next reserve() clones a fresh one
            raise
        finally:
            if not failed:
                self[key] = client
