"""Live progress of a crawl: a bar on a terminal, periodic lines elsewhere, and a summary."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, TextIO

from crawler.outcomes import (
    ANSWERED,
    CRAWLED,
    ENDINGS,
    FAILED,
    NOT_FINAL,
    RETRYING,
    eviction_warning,
    fetched,
    summary,
)
from crawler.records import Record
from crawler.tracking import statistics
from crawler.tracking.statistics import Tally

#: Seconds between plain progress lines when the output is not a terminal.
LINE_INTERVAL = 5.0


class Progress:
    """Counts records as they come, from any thread, and shows them on ``stream``
    (``None``: shown nowhere, as the Python API's crawls: :meth:`line` and
    :meth:`summary` say them to whoever asks)."""

    def __init__(self, stream: TextIO | None = sys.stderr) -> None:
        self.stream = stream
        self.is_terminal = stream is not None and stream.isatty()
        self.started = time.monotonic()
        self.counts: Counter[str] = Counter()
        self.discovered = 0
        self.failures: list[Record] = []
        #: By status, bytes, times and host: the statistics (``--stats``).
        self.tally = Tally()
        #: The URLs answered with a 4xx (outcome ``answered``), by HTTP status.
        self.answers: Counter[int] = Counter()
        #: Services the progress waits for, down or restarting: "RabbitMQ", "Memcached".
        self.waiting_for: set[str] = set()
        #: Items the crawl's handler yielded, in the records counted (``--items``).
        self.items = 0
        #: Items the crawl's item pipelines dropped, in the records counted.
        self.dropped = 0
        #: Pages whose response came from ``--cache``'s directory, in the records counted.
        self.cached = 0
        #: Items Memcached evicted since the crawl began, when it says so.
        self.evicted = 0
        #: True while the crawl is paused (``crawler pause``).
        self.paused = False
        self._waiting_shown: set[str] = set()
        self._lock = threading.Lock()
        self._fetched_before = 0  # pages of the crawl fetched by an earlier run (--state)
        self._last_line = self.started
        self._bar_shown = False

    def carry_on(self, figures: dict[str, int]) -> None:
        """Start from a crawl's figures so far (``--state``): counts and discovered; the
        rate counts only this run's pages."""
        with self._lock:
            for outcome in (*ENDINGS, RETRYING):
                self.counts[outcome] += figures.get(outcome, 0)
            self.discovered += figures.get("discovered", 0)
            self.items += figures.get("items", 0)
            self.dropped += figures.get("items_dropped", 0)
            self._fetched_before = fetched(self.counts)

    def discover(self, count: int = 1) -> None:
        with self._lock:
            self.discovered += count

    def record(self, record: Record) -> None:
        outcome = record.get("outcome", CRAWLED)
        with self._lock:
            self.counts[outcome] += 1
            self.items += len(record.get("items") or ())
            self.dropped += record.get("dropped_items") or 0
            self.tally.add(record, outcome)
            self.cached += bool(record.get("cached"))
            if record.get("outcome") == FAILED:
                self.failures.append(record)
            elif record.get("outcome") == ANSWERED:
                self.answers[int(record.get("status") or 0)] += 1

    def statistics(self, crawl_id: str | None) -> dict[str, Any]:
        """The crawl's statistics document (:mod:`crawler.tracking.statistics`): its
        counts so far, and what this run's records add up to."""
        with self._lock:
            return statistics.of_tally(
                crawl_id, self.counts, self.tally, discovered=self.discovered,
                items=self.items, dropped=self.dropped,
                elapsed_s=time.monotonic() - self.started,
            )  # fmt: skip

    @property
    def done(self) -> int:
        return sum(n for outcome, n in self.counts.items() if outcome not in NOT_FINAL)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        line = (
            f"{self.done} done / {self.discovered} discovered, "
            f"{(fetched(self.counts) - self._fetched_before) / elapsed:.1f} pages/s, "
            f"{self.counts[RETRYING] + self.counts[FAILED]} errors"
        )
        if self.evicted:
            line += f", Memcached evicted {self.evicted} items"
        if self.paused:
            line += ", paused"
        for service in sorted(self.waiting_for):
            line += f", waiting for {service}..."
        return line

    def show(self) -> None:
        """Redraw the bar on a terminal; elsewhere, print a line every few seconds, and
        at once when a service goes down or comes back."""
        if self.stream is None:
            return
        with self._lock:
            if self.is_terminal:
                self.stream.write("\r\033[K" + self.line())
                self._bar_shown = True
            elif (
                time.monotonic() - self._last_line >= LINE_INTERVAL
                or self._state() != self._waiting_shown
            ):
                self.stream.write(self.line() + "\n")
                self._last_line = time.monotonic()
                self._waiting_shown = self._state()
            self.stream.flush()

    def _state(self) -> set[str]:
        """What a line is printed at once for when it changes: services, and the pause."""
        return self.waiting_for | ({"paused"} if self.paused else set())

    def clear(self) -> None:
        """Take the bar off the terminal line, so a log line or the summary can go there."""
        if self._bar_shown and self.stream is not None:
            self.stream.write("\r\033[K")
            self._bar_shown = False

    def summary(self, *, interrupted: bool = False) -> str:
        with self._lock:
            self.clear()
            elapsed = time.monotonic() - self.started
            rate = (fetched(self.counts) - self._fetched_before) / max(elapsed, 1e-9)
            verb = "Interrupted" if interrupted else "Finished"
            said = summary(
                self.counts,
                rate=rate,
                answers=self.answers,
                items=self.items,
                dropped=self.dropped,
                cached=self.cached,
            )
            lines = [f"{verb} after {elapsed:.1f}s: {said}."]
            lines += [f"  failed: {r['url']}: {r['error']}" for r in self.failures]
            if self.evicted:
                lines.append(eviction_warning(self.evicted))
            return "\n".join(lines)


if TYPE_CHECKING:
    _StreamHandler = logging.StreamHandler[TextIO]
else:  # generic in typeshed, and at run time only from Python 3.11
    _StreamHandler = logging.StreamHandler


class ProgressLogHandler(_StreamHandler):
    """Log lines that first clear the progress bar, so the two never share a line."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(progress.stream)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        with self.progress._lock:
            self.progress.clear()
            super().emit(record)
