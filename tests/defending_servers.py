"""Servers that defend themselves, as behaviours of :class:`tests.site_server.SiteServer`
(every page's path mapped to one instance): ``tests/test_server_pace.py`` tests the
crawler's pace against them and ``benchmarks/server_pace.py`` measures it, Scrapy's
beside it.

- :class:`Defending` answers 429 with ``Retry-After: 1`` above 4 requests in flight or
  20 a second, as servers and CDNs do;
- :class:`Loaded` answers more slowly the more requests are in flight.
"""

from __future__ import annotations

import collections
import threading
import time
from http.server import BaseHTTPRequestHandler

from tests import faults
from tests.site_server import Page, send

#: :class:`Defending`'s limits: requests in flight, and requests in any one second.
IN_FLIGHT, PER_SECOND = 4, 20


class Defending:
    """Serves ``pages``, or a 429 with ``Retry-After: 1`` to a request above
    ``in_flight`` in flight or ``per_second`` in the last second; counts both."""

    def __init__(
        self,
        pages: dict[str, Page],
        answer_time: float = 0.01,
        *,
        in_flight: int = IN_FLIGHT,
        per_second: int = PER_SECOND,
    ) -> None:
        self.pages, self.answer_time = pages, answer_time
        self.limit_in_flight, self.limit_per_second = in_flight, per_second
        self.lock = threading.Lock()
        self.in_flight = 0
        self.recent: collections.deque[float] = collections.deque()
        self.served: collections.Counter[str] = collections.Counter()
        self.refused = 0
        self.started = time.monotonic()
        #: When each request came (seconds from the start), and whether it was refused.
        self.answers: list[tuple[float, bool]] = []

    def __call__(self, handler: BaseHTTPRequestHandler, nth: int) -> None:
        now = time.monotonic()
        with self.lock:
            while self.recent and self.recent[0] <= now - 1:
                self.recent.popleft()
            busy = (
                self.in_flight >= self.limit_in_flight or len(self.recent) >= self.limit_per_second
            )
            self.refused += busy
            self.answers.append((now - self.started, busy))
            if not busy:
                self.in_flight += 1
                self.recent.append(now)
        if busy:
            faults.status(429, Retry_After="1")(handler, nth)
            return
        try:
            time.sleep(self.answer_time)
            send(handler, self.pages[handler.path])
        finally:
            with self.lock:
                self.in_flight -= 1
                self.served[handler.path] += 1

    def refused_share_after(self, seconds: float) -> float:
        """The share of the requests answered 429, of those after the crawl's first
        ``seconds`` (from the first request)."""
        if not self.answers:
            return 0.0
        first = self.answers[0][0]
        later = [busy for at, busy in self.answers if at - first >= seconds]
        return sum(later) / max(1, len(later))


class Loaded:
    """Serves ``pages``, each answer taking longer the more requests are in flight
    (``base`` seconds, doubled for each one more): a server that slows under load.
    Counts the most in flight at once and how long the answers took."""

    def __init__(self, pages: dict[str, Page], base: float = 0.005) -> None:
        self.pages, self.base = pages, base
        self.lock = threading.Lock()
        self.in_flight = self.peak = 0
        self.took: list[float] = []
        self.served: collections.Counter[str] = collections.Counter()

    def __call__(self, handler: BaseHTTPRequestHandler, nth: int) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            answer_time = self.base * 2 ** (self.in_flight - 1)
        try:
            time.sleep(answer_time)
            send(handler, self.pages[handler.path])
        finally:
            with self.lock:
                self.in_flight -= 1
                self.took.append(answer_time)
                self.served[handler.path] += 1

    def median_answer_time(self) -> float:
        """The median of the answers' times (the upper of two), 0 before any."""
        took = sorted(self.took)
        return took[len(took) // 2] if took else 0.0
