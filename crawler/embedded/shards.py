"""``--local --processes N``: the frontier cut in N shards by URL, one a process.

Each process crawls the URLs of its shard (:func:`owner_of`: a hash of the URL) with
its own broker and dedup store, the whole of ``--local``'s.  A page's links of another
shard are not claimed where they were found but handed to their shard's process
(:meth:`ShardBroker.route_links`), which claims them in its store as its own pages' links
are: every URL has one claim, in one place, so the processes never fetch a page twice.

The processes share what :class:`Shards` holds: an inbox each (links of theirs found
elsewhere; the word to stop), one queue of results to the process that started them
(records, log lines, the URLs each discovered), and what tells that process the crawl
ended: how many hand-overs are in transit, an idle flag a process, and the count of
hand-overs taken in (:meth:`Shards.finished`).
"""

from __future__ import annotations

import signal
import zlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from typing import Any

import dramatiq

from crawler.brokers.local import PriorityStubBroker
from crawler.frontier.scope import url_in
from crawler.stores.saved import SavedState


def owner_of(url: str, count: int) -> int:
    """The shard of ``url`` among ``count``: the same in every process."""
    return zlib.crc32(url.encode("utf-8", "surrogatepass")) % count


def url_of(message: dramatiq.Message[Any]) -> str:
    """The URL a ``crawl`` (or sitemap) message is about."""
    return str(message.args[0] if message.args else message.kwargs["url"])


@dataclass(frozen=True)
class Handover:
    """Links of a shard's found by a page of another's: what its process claims and
    sends, as :func:`crawler.frontier.claims.send_claimed` would have where they were
    found (the same message ids: a child's id is its parent's and its URL's)."""

    parent_id: str
    urls: list[str]
    kwargs: dict[str, Any]
    own: dict[str, Mapping[str, Any]]
    crawl_id: str | None
    priority: int | None
    sitemaps: bool
    first_delivery: bool


@dataclass(frozen=True)
class Shards:
    """What the processes of one crawl share (made before they start, inherited).

    Parameters:
      count(int): How many shards (processes).
      inboxes(list): Each process's :class:`Handover`\\ s (and its seeds, and the word to stop).
      results(Queue): What the processes tell the one that started them.
      in_transit(Synchronized): Hand-overs put in an inbox and not yet taken in.
      taken_in(Synchronized): Hand-overs taken in so far (changes whenever an idle
        process may wake up).
      idle(SynchronizedArray): 1 for each process whose broker holds nothing.
    """

    count: int
    inboxes: list[Queue[Any]]
    results: Queue[Any]
    in_transit: Synchronized[int]
    taken_in: Synchronized[int]
    idle: SynchronizedArray[int]

    @classmethod
    def make(cls, context: BaseContext, count: int) -> Shards:
        return cls(
            count,
            [context.Queue() for _ in range(count)],
            context.Queue(),
            context.Value("q", 0),
            context.Value("q", 0),
            context.Array("b", count, lock=False),
        )

    def let_inboxes_go(self) -> None:
        """This process will not wait, when it exits, for what it put in an inbox to be
        written: a shard that died reads nothing, and a full pipe to it must not hang
        the exit (at the crawl's end nothing is in transit)."""
        for inbox in self.inboxes:
            inbox.cancel_join_thread()

    def hand_over(self, shard: int, item: Any) -> None:
        """Put ``item`` in ``shard``'s inbox, counted in transit until it is taken in."""
        with self.in_transit.get_lock():
            self.in_transit.value += 1
        self.inboxes[shard].put(item)

    def taken(self, shard: int) -> None:
        """``shard``'s process took an item in (and is busy): the first half of it."""
        self.idle[shard] = 0
        with self.taken_in.get_lock():
            self.taken_in.value += 1

    def done_with(self) -> None:
        """An item taken in is all in its process's broker now: no longer in transit."""
        with self.in_transit.get_lock():
            self.in_transit.value -= 1

    def finished(self) -> bool:
        """Whether the crawl ended: every process idle and nothing in transit, with no
        process taking anything in meanwhile (a process wakes only by taking an item
        in, and an item is in transit from before its sender's page ends until it is
        in its owner's broker)."""
        before = self.taken_in.value
        if self.in_transit.value or not all(self.idle[:]):
            return False
        return self.in_transit.value == 0 and self.taken_in.value == before


class ShardBroker(PriorityStubBroker):
    """``--local``'s broker for one shard of the crawl: links of other shards go to
    their processes (:meth:`route_links`)."""

    def __init__(self, shards: Shards, index: int, saved: SavedState | None = None) -> None:
        super().__init__(saved)
        self.shards = shards
        self.index = index
        #: Links handed over by a first delivery: claimed by their shard (or about to
        #: be), not handed over again.
        self._handed: set[tuple[bool, str]] = set()

    def mine(self, url: str) -> bool:
        return owner_of(url, self.shards.count) == self.index

    def route_links(
        self,
        parent_id: str,
        urls: list[str],
        kwargs: dict[str, Any],
        own: Mapping[str, Mapping[str, Any]],
        *,
        crawl_id: str | None,
        priority: int | None,
        sitemaps: bool,
        first_delivery: bool,
    ) -> list[str]:
        """Hand the links of other shards to theirs (those a first delivery handed over
        before are theirs already); the links of this shard, to claim here."""
        mine: list[str] = []
        theirs: defaultdict[int, list[str]] = defaultdict(list)
        for url in urls:
            owner = owner_of(url_in(url), self.shards.count)  # a keyed request's too
            if owner == self.index:
                mine.append(url)
                continue
            if first_delivery:
                if (sitemaps, url) in self._handed:
                    continue
                self._handed.add((sitemaps, url))
            theirs[owner].append(url)
        for owner, batch in theirs.items():
            handover = Handover(
                parent_id, batch, kwargs, {url: own[url] for url in batch if url in own},
                crawl_id, priority, sitemaps, first_delivery,
            )  # fmt: skip
            self.shards.hand_over(owner, handover)
        return mine

    def quiet(self) -> bool:
        """Whether this broker holds no message, queued, delayed or in hand (one
        count: a message moving from the delay queue to its queue is in neither for a
        moment, as their own counts see it)."""
        return self.outstanding == 0


def die_with_parent() -> None:
    """Linux: this process is killed with the one that started it (kill -9 included).
    Elsewhere a shard sees its parent change instead."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass


PR_SET_PDEATHSIG = 1
